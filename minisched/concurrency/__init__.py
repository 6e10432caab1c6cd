"""Concurrency building blocks: §2.4 of Part I (what "lock-free" can and cannot mean in Python),
and Part II §2.1/§2.3 (a decision flow with threads and with asyncio, a bounded queue that drops,
M/M/1/K, tickers on absolute and relative deadlines)."""
