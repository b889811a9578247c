"""The statistics' compiled kernels loaded in a background thread while a report reads its output.

Every statistic a report quotes runs on numba kernels compiled once per installation (``cache=True``), yet a fresh
process still pays to import numba and to load the cached machine code before the first kernel runs: about 0.5 s
and 0.3–0.9 s (numba builds its registries on the first load, and imports ``scipy.linalg`` when scipy is
installed), a third of a 1M-trial report's CPU. None of that needs the output, and reading the output (checking
each part's checksums, then polars' scans) runs mostly outside the GIL. So the report starts this thread before it
opens its outputs: the kernels load meanwhile, and the statistics find them loaded.

It calls the same public functions the analysis calls (``runner.analysis.cells``), with the argument types the
analysis passes, on a design of four cells, so the overloads loaded are the ones the report runs; numba's compiler
lock makes a kernel the report asks for while it loads wait for it, never load twice. Nothing it computes is kept:
the numbers of a report are the same with or without it. ``tests/analysis/test_warmup.py`` checks that a report
after the warm-up loads no kernel signature the warm-up did not.

A fresh installation has nothing to load: its first report compiles the kernels (5–15 s, once; numba keeps the
machine code beside the package's modules in ``__pycache__``, or under ``NUMBA_CACHE_DIR``). A silent pause that
long reads as a hang, so the first summary of such a process says so in one line (``say_if_compiling``).
"""

from __future__ import annotations

import os
import threading
from typing import Any, cast

from runner.core.messages import note

__all__ = ["kernels_compiled", "say_if_compiling", "start"]

_said = threading.Event()


def _load_kernels() -> None:
    import numpy as np

    import stats
    from runner.core.constants import CONFIDENCE, INTERVAL_METHOD, N_RESAMPLES

    cluster = np.array([1, 1, 2, 2], dtype=np.uint32)  # what ``rank("dense")`` gives the analysis
    arm = np.array([1, 0, 1, 0], dtype=np.int64)
    hits = np.array([3, 1, 2, 0], dtype=np.int64)
    n = np.array([5, 5, 4, 4], dtype=np.int64)
    both = np.column_stack([np.where(arm == 1, hits, 0), np.where(arm == 0, hits, 0)])
    trials = np.column_stack([np.where(arm == 1, n, 0), np.where(arm == 0, n, 0)])
    stats.cluster_rate_ci_many(cluster, both, trials, differences=[([0], [1])], n_resamples=N_RESAMPLES,
                               confidence_level=CONFIDENCE, seed=0, method=INTERVAL_METHOD)
    for level in ("trial", "cell"):
        stats.cluster_permutation_test(cluster, arm, hits, n, level=level, seed=0)
    # a p below the plain convolution's reach (about 1e-1800 here): the tilted convolution's kernels, which a big
    # output's contrasts reach (the 1M-trial quickstart's do)
    stats.cluster_permutation_test(cluster[:2], arm[:2], np.array([3000, 0], dtype=np.int64),
                                   np.array([3000, 3000], dtype=np.int64), level="trial", seed=0)


def _quietly() -> None:
    try:
        _load_kernels()
    except Exception:  # only a head start: the report loads whatever this did not, and says why
        pass


def kernels_compiled() -> bool:
    """Whether numba's cache holds the kernels every interval and every permutation test run (False: the next
    call compiles them). Reads the cache's index files; True when numba's cache cannot be inspected (nothing is
    known to be missing). A kernel is cached per argument signature: a rare path may still compile one later."""
    from stats._kernels import hypergeom_tables
    from stats._special import beta_ppf_many

    try:
        indexes = [cast(Any, kernel)._cache._cache_file._index_path for kernel in (hypergeom_tables, beta_ppf_many)]
    except AttributeError:  # numba's cache layout is its own
        return True
    return all(os.path.exists(path) for path in indexes)


def say_if_compiling() -> None:
    """A note, once per process, when the statistics about to run must first compile their kernels."""
    if _said.is_set():
        return
    _said.set()
    if not kernels_compiled():
        note("compiling the statistics' kernels for this installation: once, 5–15 s")


def start() -> threading.Thread:
    """Start loading the report's kernels in a daemon thread; returns it (joining it is never required)."""
    thread = threading.Thread(target=_quietly, name="trialgrid-kernels", daemon=True)
    thread.start()
    return thread
