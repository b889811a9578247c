"""A private local Ray must not outlive a killed driver: the reaper that ends it.

``--ray local`` starts Ray's node processes (GCS, raylet, the dashboard and runtime-env agents, workers) as the
driver's descendants. A clean stop ends them (``ray.shutdown``); a driver killed with SIGKILL cannot, and Ray's
own parent checks leave some running: on Ray 2.60, the dashboard agent and the runtime-env agent were still
alive 20 s after a kill -9 of the driver (the goal is none after 10 s).

The reaper is a small process in its own session (so a terminal's Ctrl-C reaches the driver, which stops
cleanly, not the reaper), started by the driver after ``ray.init``. It notes the driver's descendants every
half second. When the pipe the driver holds closes without the driver having said ``done`` — the driver died,
however it died — it ends every process it noted, and their descendants: SIGTERM, then SIGKILL after 3 s. A
process is known by its pid *and* its start time, so a pid reused since is never signalled. Linux only (it
reads ``/proc``); elsewhere ``start_reaper`` starts nothing.

This file runs as a script (``python -I reaper.py DRIVER_PID``) and imports only the standard library, so it works
whatever the child's ``sys.path``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

__all__ = ["Reaper", "start_reaper"]

_POLL_S = 0.5
_GRACE_S = 3.0
_DONE = b"done\n"


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of ``pid``, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[19])


def _tree() -> dict[int, list[tuple[int, int]]]:
    """Every process's children, with their start times: ``{ppid: [(pid, start), …]}``."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    return children


def _descendants(roots: list[int], tree: dict[int, list[tuple[int, int]]]) -> dict[int, int]:
    found: dict[int, int] = {}
    todo = list(roots)
    while todo:
        for pid, start in tree.get(todo.pop(), []):
            if pid not in found:
                found[pid] = start
                todo.append(pid)
    return found


def _alive(pid: int, start: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == start


def _signal_all(noted: dict[int, int], sig: signal.Signals) -> None:
    for pid, start in noted.items():
        if _alive(pid, start):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _reap(driver: int, stdin: IO[bytes]) -> None:
    me = os.getpid()
    said: list[bytes] = []
    closed = threading.Event()

    def listen() -> None:
        said.append(stdin.read())  # returns at EOF: the driver closed its end, or died
        closed.set()

    threading.Thread(target=listen, daemon=True).start()
    noted: dict[int, int] = {}
    while not closed.wait(_POLL_S):
        seen = _descendants([driver], _tree())
        seen.pop(me, None)
        noted = {pid: start for pid, start in noted.items() if _alive(pid, start)} | seen
    if said and said[0].endswith(_DONE):
        return  # a clean stop: ray.shutdown ended its processes
    noted = {pid: start for pid, start in noted.items() if _alive(pid, start)}
    noted |= _descendants(list(noted), _tree())  # started between the last look and the driver's death
    noted.pop(me, None)
    _signal_all(noted, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_S
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in noted.items()):
        time.sleep(0.1)
    _signal_all(noted, signal.SIGKILL)


class Reaper:
    """The driver's end of a started reaper: ``done()`` once Ray was shut down cleanly."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    def done(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.write(_DONE)
                stdin.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def start_reaper() -> Reaper | None:
    """A reaper watching this process's descendants (see the module docstring), or None where there is no
    ``/proc`` to read."""
    if not sys.platform.startswith("linux") or not Path("/proc/self/stat").exists():
        return None
    proc = subprocess.Popen([sys.executable, "-I", str(Path(__file__).resolve()), str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return Reaper(proc)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _reap(int(sys.argv[1]), sys.stdin.buffer)
