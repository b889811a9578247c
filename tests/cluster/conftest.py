"""Ray fixtures for cluster tests: loopback only, temp dirs in pytest's tmp folder, everything stopped after.

A private one-node Ray (``num_cpus=2``, no dashboard, node IP 127.0.0.1) is started
once per test module that asks for it, with its temp dir in that module's pytest tmp
folder, and shut down after the module. The environment (a dead proxy for anything
but loopback, ``RAY_AUTH_MODE=disabled``) is set by tests/conftest.py. A Ray that does
not start fails with the tail of its own logs in the error, so the cause is on screen.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.helpers import quickstart_dict

# Ray's Unix sockets live at <temp>/session_<date>_<time>_<usec>_<pid>/sockets/<name>, and a Unix
# socket path must stay under 108 bytes: that leaves about 40 characters for <temp> itself.
TEMP_BUDGET = 40


@contextmanager
def ray_temp(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A Ray temp dir in pytest's tmp folder (kept, logs and all, as pytest keeps its last runs).

    Where that path is too long for Ray's socket paths (a long ``--basetemp``), a short
    ``/tmp/tg*`` dir instead, removed after.
    """
    path = factory.mktemp(name)
    if len(str(path)) <= TEMP_BUDGET:
        yield path
        return
    short = Path(tempfile.mkdtemp(prefix="tg", dir="/tmp"))
    try:
        yield short
    finally:
        shutil.rmtree(short, ignore_errors=True)


def log_tail(*paths: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of each of ``paths`` that exists and is not empty, for an error message."""
    parts = []
    for path in paths:
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        if text:
            parts.append(f"----- last {len(text)} lines of {path} -----\n" + "\n".join(text))
    return "\n".join(parts) or f"(none of {', '.join(p.name for p in paths)} was written)"


def session_logs(temp: Path) -> list[Path]:
    """The logs that say why a node did not come up, in a Ray temp dir."""
    logs = temp / "session_latest" / "logs"
    return [logs / name for name in ("gcs_server.err", "raylet.err", "gcs_server.out", "raylet.out")]


@pytest.fixture(scope="module")
def ray_local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    import ray

    with ray_temp(tmp_path_factory, "ray") as temp:
        try:
            ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=str(temp),
                     log_to_driver=False, configure_logging=False)
        except Exception as exc:
            ray.shutdown()
            raise RuntimeError(f"Ray did not start: {exc}\n{log_tail(*session_logs(temp), lines=20)}") from exc
        try:
            nodes = {n["NodeManagerAddress"] for n in ray.nodes()}
            assert nodes == {"127.0.0.1"}, f"Ray's node is not on loopback: {nodes}"
            yield
        finally:
            ray.shutdown()


def http_sweep(base_url: str, *, runs: int = 2, concurrency: int = 16, params: dict[str, Any] | None = None,
               limits: dict[str, Any] | None = None, models: tuple[str, ...] = ("careful", "typical", "reckless"),
               batch_rows: int | None = None) -> dict[str, Any]:
    """The quickstart design, its models reached over HTTP (``provider: openai``) at ``base_url``."""
    data = quickstart_dict()
    data["models"] = [{"name": f"sim-{m}", "provider": "openai", "model": m, "base_url": base_url,
                       "api_key_env": None, "params": dict(params or {}), "concurrency": 64,
                       **({"limits": limits} if limits else {})} for m in models]
    for probe in data["probes"]:
        probe["runs"] = runs
    data["engine"] = {"concurrency": concurrency, "timeout_s": 60}
    if batch_rows:
        data["engine"]["batch_rows"] = batch_rows
    return data


def trialworker_pids() -> list[int]:
    """Worker processes of *this* test's Ray (descendants of this process): never another run's on the machine."""
    me = os.getpid()
    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if cmd and cmd[0].startswith("ray::TrialWorker"):
            try:
                if any(parent.pid == me for parent in proc.parents()):
                    pids.append(proc.info["pid"])
            except psutil.Error:
                continue
    return pids


def kill_a_worker_after(server: Any, requests: int, killed: list[int]) -> threading.Thread:
    """A thread that SIGKILLs one of this test's Ray workers once ``server`` has seen ``requests`` requests."""

    def kill_one() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.stats()["requests"] < requests:
            time.sleep(0.05)
        pids = trialworker_pids()
        if pids:
            os.kill(pids[0], signal.SIGKILL)  # a worker process this test's Ray started
            killed.append(pids[0])

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    return killer
