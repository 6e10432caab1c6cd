"""OS-level thread names, so that `top -H`, `ps -L` and /proc/<pid>/task/<tid>/comm tell minisched's
threads apart (the binding workers "bind-N", "scheduler-loop", "event-recorder", "reflector pods"...).

Python 3.14 names each OS thread after its threading.Thread (gh-59705); before that every thread of
the process is called "python". `name_os_threads()` does the same for threads started after it, on
Linux (prctl PR_SET_NAME; the kernel keeps the first 15 bytes of a name).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any

PR_SET_NAME = 15
COMM_BYTES = 15  # TASK_COMM_LEN less the terminating NUL

_installed = False


def os_thread_name(name: str) -> bytes:
    """A thread's name as the kernel keeps it in comm (its first 15 bytes)."""
    return name.encode("utf-8", "replace")[:COMM_BYTES]


def name_os_threads() -> bool:
    """Name every thread started from now on after its threading.Thread name. False where the
    interpreter does it already (3.14+) or where there is no prctl (not Linux)."""
    global _installed
    if _installed:
        return True
    if sys.version_info >= (3, 14) or not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    bootstrap_inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def named_bootstrap_inner(thread: threading.Thread) -> Any:
        # the first thing the new thread runs, on itself: PR_SET_NAME names the calling thread
        prctl(PR_SET_NAME, ctypes.c_char_p(os_thread_name(thread.name)), 0, 0, 0)
        return bootstrap_inner(thread)

    # Thread._bootstrap_inner is where 3.14 names the thread too (Thread._set_os_name)
    threading.Thread._bootstrap_inner = named_bootstrap_inner  # type: ignore[attr-defined]
    _installed = True
    return True
