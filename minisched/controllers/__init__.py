"""Controllers: loops that drive the cluster toward a desired state, and the leader election that
decides which replica of a controller may act."""
