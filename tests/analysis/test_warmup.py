"""The report's kernels load in a background thread (``runner.analysis.warmup``) while it reads its output.

The warm-up is only worth its thread if it loads what the report then runs: the same kernels with the same
argument types (another type is another overload, loaded again). Checked in a fresh interpreter, where no kernel is
loaded yet: after the warm-up, a report of the quickstart output loads no kernel signature the warm-up did not.
(The figures do not depend on it: the outcome digests and the reporting tests run with it.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_SIGNATURES = """
import gc, json, sys
from pathlib import Path
from numba.core.dispatcher import Dispatcher

def loaded():
    return sorted({f"{d.py_func.__module__}.{d.py_func.__name__}{s}" for d in gc.get_objects()
                   if isinstance(d, Dispatcher) for s in d.signatures})

from runner.analysis import warmup
warmup.start().join()
warmed = loaded()
from runner.analysis.leaderboard import summarize
from runner.output import Output
summarize([Output.open(Path(sys.argv[1]))])
print(json.dumps({"warmed": warmed, "after": loaded()}))
"""


def test_after_the_warm_up_a_report_loads_no_kernel_it_did_not(quickstart_out: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _SIGNATURES, str(quickstart_out)], capture_output=True, text=True,
                          check=True, timeout=600)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["warmed"], "the warm-up loaded no kernel"
    assert sorted(set(found["after"]) - set(found["warmed"])) == []


def test_a_fresh_installations_first_report_says_it_compiles_once(quickstart_out: Path, tmp_path: Path) -> None:
    """Where numba's cache is empty (a fresh install), the first report says in one line that it compiles the
    statistics' kernels; the next report, which loads them, says nothing of it."""
    import os

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}  # an empty cache, as a fresh install has

    def report() -> str:
        done = subprocess.run([sys.executable, "-m", "runner", "report", str(quickstart_out), "-q"], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stderr

    first, second = report(), report()
    assert first.count("compiling the statistics' kernels") == 1, first
    assert "compiling" not in second, second
