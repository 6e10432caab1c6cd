"""The scheduling framework: extension points, the status they return, profiles and the runtime.

Shaped like kube-scheduler's pkg/scheduler/framework, with one difference that is the point of the
Python version: Filter and Score run once per pod over every node at the same time, as numpy
operations over the snapshot's arrays, not once per (pod, node) pair. The plugin runtime is
runtime.py (kube's framework/runtime/framework.go); the algorithm that uses it to place one pod is
algorithm.py (kube keeps it outside the framework, in pkg/scheduler/schedule_one.go), with the
cross-cycle reuse cache in reuse.py.
"""
