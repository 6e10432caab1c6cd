"""Install a CustomResourceDefinition and wait until its resource is served.

A real API server answers a create of a CRD at once, but serves the new resource only later: the
CRD must first be Established (names accepted), and then every API server's handler chain and
discovery must pick it up. A client that lists or watches in between gets 404 or 503 (a real
informer started too early logs a 503 and retries). `install_crd` waits for both, so what comes
after behaves the same on the embedded cluster (which serves at once) and on a real one.
"""

from __future__ import annotations

import contextlib
import time

from minisched.cluster.base import Cluster, Object
from minisched.errors import AlreadyExists, NotFound, ServiceUnavailable
from minisched.resources import CRDS, Resource


def is_established(crd: Object) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_crd(cluster: Cluster, crd: Object, *, timeout: float = 30.0, poll: float = 0.05) -> Resource:
    """Create `crd` (an existing one of that name is kept) and return its resource once it is
    Established and a list of it succeeds. TimeoutError names what was still missing."""
    with contextlib.suppress(AlreadyExists):
        cluster.create(CRDS, crd)
    resource = Resource.from_crd(crd)
    name = crd["metadata"]["name"]
    deadline = time.monotonic() + timeout
    waiting_for = "Established"
    while True:
        try:
            if is_established(cluster.get(CRDS, name)):
                waiting_for = f"{resource.group_resource} to be served"
                cluster.list(resource, limit=1)
                return resource
        except (NotFound, ServiceUnavailable):
            pass  # not served yet
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name}: still waiting for {waiting_for} after {timeout:g} s")
        time.sleep(poll)
