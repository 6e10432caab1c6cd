"""What counts as volatile in a notebook's output, masked before stored and fresh outputs compare.

Rules apply in order (timestamps before durations, so "12:00:01.5Z" is one timestamp, not a time
and a duration). Integer seconds are NOT masked: on the virtual clock "backoff 10 s" is a result
worth checking. Real measurements print with a fraction or a sub-second unit ("1.27 s", "830 µs",
"12,400 ops/s") and are masked. The same list feeds nbval (`sanitize_config`) and the harness's
own tests (`sanitize`).
"""

from __future__ import annotations

import re

# (name, pattern, replacement)
SANITIZERS: list[tuple[str, str, str]] = [
    ("timestamp", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "<TIMESTAMP>"),
    ("address", r"\b0x[0-9a-fA-F]{6,}\b", "0x<ADDR>"),
    ("uuid", r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<UUID>"),
    ("tmp-path", r"/tmp/[^\s'\"]+", "<TMPPATH>"),
    # a tqdm bar: a fresh run's widget text is its first frame ("0%|  | 0/5 [00:00<?, ?it/s]"), the
    # stored one its last ("100%|███| 5/5", see normalize); whether it finished is the hygiene rule's
    ("progress-bar", r" *\d{1,3}%\|[^|\n]*\|\s*[\d.]+[kM]?/[\d.]+[kM]?(?:\s*\[[^\]\n]*\])?", "<PROGRESS>"),
    # 12,345.6 ops/s  |  3.2k pods/s  |  1.5e+06 items/s  |  420/s
    ("throughput", r"\d[\d,_]*(?:\.\d+)?(?:[eE][+-]?\d+)?\s?[kKMG]?\s?(?:[A-Za-z]+)?/s\b", "<RATE>"),
    ("subsecond", r"\d[\d,_]*(?:\.\d+)?(?:[eE][+-]?\d+)?\s?(?:ns|µs|μs|us|ms)\b", "<DURATION>"),
    ("fractional-seconds", r"\d+\.\d+(?:[eE][+-]?\d+)?\s?(?:s|sec|seconds)\b", "<DURATION>"),
    ("byte-size", r"\d+(?:\.\d+)?\s?(?:KiB|MiB|GiB|kB|MB|GB)\b", "<SIZE>"),
    ("pid", r"\bpid[ =:]\s?\d+", "pid <PID>"),
]

_COMPILED = [(re.compile(pattern), replacement) for _, pattern, replacement in SANITIZERS]


def sanitize(text: str) -> str:
    """`text` with every volatile figure masked, exactly as nbval masks it."""
    for pattern, replacement in _COMPILED:
        text = pattern.sub(replacement, text)
    return text


def sanitize_config() -> str:
    """The rules in nbval's sanitize-file format (sections of `regex:` / `replace:` lines)."""
    blocks = [
        f"[{name}]\nregex: {pattern}\nreplace: {replacement}\n" for name, pattern, replacement in SANITIZERS
    ]
    return "\n".join(blocks)
