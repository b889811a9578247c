"""Shared test fixtures: small sweeps built from the bundled quickstart files."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment (a plain pytest run has neither):
# the reports would then fit every table to 80 columns, unlike the run a user sees in a pipe. Removed before
# anything (runner.cli.console's consoles, a subprocess) reads them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

# re-exported: many test modules import these from here (``from tests.conftest import ROOT``); they live in
# tests/helpers with the other shared helpers
from tests.helpers.files import CONFIGS, ROOT, quickstart_dict, quickstart_sweep, write_yaml

__all__ = ["CONFIGS", "ROOT", "chromium", "missing", "on_ci", "quickstart_dict"]

# Nothing a test starts may leave the machine: Ray probes cloud metadata addresses at
# start, so route any proxy-honouring client to a dead port, except loopback.
os.environ.setdefault("HTTP_PROXY", "http://127.0.0.1:9")
os.environ.setdefault("HTTPS_PROXY", "http://127.0.0.1:9")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# On Linux, Ray silently replaces a loopback node IP (ray.init(_node_ip_address="127.0.0.1"),
# `ray start --head --node-ip-address=127.0.0.1`) by the machine's outward address, unless this
# is 0 (read when ray is imported, so set here, before any test imports it). A second node
# (`ray start --address`) refuses to start with it: tests/cluster/test_ray_two_node.py starts
# that one through a launcher that keeps loopback addresses as given.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# Readers record the parts they verified outside the output (runner.output.verified): in a folder of this run,
# so the suite neither writes into the home folder nor trusts what an earlier run recorded there.
if "TRIALGRID_VERIFIED_DIR" not in os.environ:
    os.environ["TRIALGRID_VERIFIED_DIR"] = _verified = tempfile.mkdtemp(prefix="trialgrid-verified-")
    atexit.register(shutil.rmtree, _verified, ignore_errors=True)


def on_ci() -> bool:
    """True where CI runs the suite (.ci/run is run with CI=true)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str) -> NoReturn:
    """A test's requirement is absent: skip it here, but fail on CI, which must never skip it silently."""
    if on_ci():
        pytest.fail(f"{reason}; CI=true, so this fails instead of skipping (.ci/run installs what the tests need)",
                    pytrace=False)
    pytest.skip(reason)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 2``, set in pyproject.toml), every test that starts Ray runs on one worker.

    Two Ray clusters at once would share one machine's ports, ``/dev/shm`` and both cores;
    ``--dist loadgroup`` keeps a group on one worker, in order, while the other worker
    takes the rest of the suite (most of which waits on servers and subprocesses).
    """
    for item in items:
        if item.get_closest_marker("ray") is not None or item.path.parent.name == "cluster":
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.browser`` tests need headless Chromium: checked before their (costly) fixtures run."""
    if item.get_closest_marker("browser") is not None and chromium() is None:
        missing("headless Chromium is not installed (apt-get install -y chromium)")


@pytest.fixture(scope="session")
def quickstart_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished quickstart run with 6 runs per cell, shared read-only by the tests that read one."""
    import runner
    from runner.config.sweep import load_sweep

    tmp = tmp_path_factory.mktemp("quickstart")
    runner.run(load_sweep(quickstart_sweep(tmp, runs=6)), tmp / "out", quiet=True)
    return tmp / "out"


@pytest.fixture
def write_sweep(tmp_path: Path) -> Callable[..., Path]:
    """Write a sweep (default: the quickstart with few runs) into tmp and return its path."""

    def _write(data: dict[str, Any] | None = None, *, runs: int = 3, name: str = "sweep.yaml", **top: Any) -> Path:
        sweep = data if data is not None else quickstart_dict()
        if data is None:
            for probe in sweep["probes"]:
                probe["runs"] = runs
        sweep.update(top)
        return write_yaml(tmp_path / name, sweep)

    return _write


@pytest.fixture(autouse=True)
def _no_internal_rows(request: pytest.FixtureRequest) -> Any:
    """``internal`` means a bug in trialgrid, so an ``internal`` row in any output a test wrote under its
    ``tmp_path`` fails that test (``@pytest.mark.internal_rows``: a test that makes them on purpose)."""
    yield
    tmp = request.node.funcargs.get("tmp_path") if hasattr(request.node, "funcargs") else None
    if tmp is None or request.node.get_closest_marker("internal_rows") is not None:
        return
    parts = [p for p in Path(tmp).rglob("*.arrow") if p.parent.name == "trials"]
    if not parts:
        return
    import pyarrow.ipc as ipc

    found = []
    for part in parts:
        try:
            table = ipc.open_file(str(part)).read_all()
        except Exception:  # a part a test damaged on purpose, or still open: not this check's business
            continue
        if "error_kind" in table.column_names:
            kinds = table.column("error_kind").to_pylist()
            errors = table.column("error").to_pylist() if "error" in table.column_names else [None] * len(kinds)
            found += [(part, e) for k, e in zip(kinds, errors, strict=True) if k == "internal"]
    if found:
        pytest.fail(f"{len(found)} internal row(s) written (a bug in trialgrid), e.g. in {found[0][0]}: "
                    f"{found[0][1]}", pytrace=False)


@pytest.fixture(autouse=True)
def _forget_keys() -> Any:
    """Each test starts with no remembered key (runner.core.redact scrubs every key a process read, for its whole
    life: one test's key must not cut its fragments out of the next test's text)."""
    yield
    from runner.core import redact

    redact.forget_all()


@pytest.fixture(autouse=True)
def _no_lingering_message_handlers() -> Any:
    """What trialgrid says goes through one logger (``runner.core.messages``): a handler a test or a command
    leaves on it would print into every later test's streams, so a test that leaves one fails."""
    from runner.core.messages import logger

    before = list(logger.handlers)
    yield
    left = [h for h in logger.handlers if h not in before]
    for handler in left:
        logger.removeHandler(handler)
    assert not left, f"handlers left on the trialgrid logger: {left}"
