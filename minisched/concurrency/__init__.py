"""Concurrency building blocks for §2.4 (what "lock-free" can and cannot mean in Python)."""
