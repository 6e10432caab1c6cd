"""Pure analysis helpers for the chapters (no cluster, no threads)."""
