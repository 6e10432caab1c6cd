"""Controllers (§2.3, §2.5): the reconciler contract, the runner, and worked examples."""
