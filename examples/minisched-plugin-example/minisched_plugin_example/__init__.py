"""An out-of-tree minisched plugin package (see README.md)."""
