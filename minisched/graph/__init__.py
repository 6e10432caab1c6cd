"""Graphs over pods held in arrays (Part II §3.1): CSR adjacency, strong components, levels."""

from minisched.graph.podgraph import UNLEVELED, DependencyCycle, PodGraph, random_dag

__all__ = ["UNLEVELED", "DependencyCycle", "PodGraph", "random_dag"]
