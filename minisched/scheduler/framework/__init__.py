"""The scheduling framework: extension points, the status they return, profiles and the runtime.

Shaped like kube-scheduler's pkg/scheduler/framework, with one difference that is the point of the
Python version: Filter and Score run once per pod over every node at the same time, as numpy
operations over the snapshot's arrays, not once per (pod, node) pair.
"""
