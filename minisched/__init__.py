"""minisched: a Kubernetes scheduler and its control loops, built to be read.

Layers, each importing only from those before it:
objects and quantities -> cluster backends -> informer and work queue -> scheduler framework and
plugins -> controllers -> observability -> CLI and notebooks.
"""

__version__ = "0.1.0"
