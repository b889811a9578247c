"""Giving the memory a finished phase freed back to the system, where the C library would keep it.

Why: a command that audits a million calls and then reports them frees the audit's numpy buffers (each a few
to tens of MiB) before the report makes its own; glibc's malloc serves buffers of that size from its heap
once its mmap threshold has risen past them, and keeps the heap's freed pages in the process. At a million
calls the audit left ~120 MiB so kept, under the report's own peak. ``malloc_trim`` returns them; on a C library
without it (macOS, musl) this does nothing, and nothing is lost but the memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache
from typing import Any


@cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_freed() -> None:
    """Return the C heap's free pages to the system, where the C library can (glibc's ``malloc_trim``), and the
    pages Arrow's allocator keeps for reuse (where pyarrow is loaded already: never imported for this)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
