"""cluster.reaper without Ray: a driver's descendants end when it is killed, and are left alone when it says done.

The driver here is a small Python process that starts the reaper, then a child that starts a grandchild in a
session of its own (as Ray's node processes are not in the driver's process group's reach once it dies).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the reaper reads /proc (Linux)")

DRIVER = """
import subprocess, sys, time
from cluster.reaper import start_reaper
reaper = start_reaper()
child = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; "
    "g = subprocess.Popen(['sleep', '300'], start_new_session=True); "
    "print(g.pid, flush=True); time.sleep(300)"], stdout=subprocess.PIPE, text=True)
grandchild = int(child.stdout.readline())
time.sleep(1.5)  # the reaper looks every 0.5 s
print(child.pid, grandchild, flush=True)
if sys.argv[1] == "done":
    reaper.done()
    print("done", flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(mode: str) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    if mode == "done":
        assert proc.stdout.readline().strip() == "done"
    return proc, pids


def _cleanup(proc: subprocess.Popen[str], pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdout:
        proc.stdout.close()


def test_a_killed_drivers_descendants_are_ended_even_in_their_own_session() -> None:
    proc, pids = _start("kill")
    try:
        assert all(_alive(p) for p in pids)
        proc.kill()  # SIGKILL: the driver runs no code of its own after this
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        assert not any(_alive(p) for p in pids)
    finally:
        _cleanup(proc, pids)


def test_a_driver_that_said_done_leaves_its_processes_alone() -> None:
    proc, pids = _start("done")
    try:
        proc.kill()
        proc.wait()
        time.sleep(2)  # longer than the reaper's look and more than enough for it to have acted
        assert all(_alive(p) for p in pids)
    finally:
        _cleanup(proc, pids)
