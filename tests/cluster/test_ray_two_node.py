"""A real two-node Ray cluster on this machine (``ray start`` head + ``ray start --address``).

Covers the acceptance runs that need a cluster started outside the driver:
``trialgrid run --ray ADDRESS`` across both nodes against ``trialgrid serve``
(outcomes equal to the single-node run), a killed driver's output resumed by a
single-node run, and ``trialgrid job submit`` / ``status`` through Ray Jobs on the head.

Each ``ray start --block`` runs in its own session, and teardown kills exactly those
process groups (never ``ray stop --force``, which would stop every Ray on the
machine, including other users' and other test runs'). One CPU per node; each node's
temp dir is in the module's pytest tmp folder. Only the head runs the dashboard, and
only because the Ray Jobs API (``trialgrid job submit``) lives there; without ray[default]'s
dashboard modules the head starts without it and the Jobs test is skipped (failed on CI).
A node that does not come up fails the fixture with the tail of its log.

A pytest killed before its teardown (SIGTERM, which Python does not catch, or SIGKILL) would leave those
sessions running, since they are not in pytest's process group: each cluster starts the reaper a
``--ray local`` driver starts (``cluster.reaper``), which notes pytest's descendants and, when pytest dies
without the fixture having said "done", ends them: SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import polars as pl
import psutil
import pytest

import runner
from cluster.reaper import start_reaper
from cluster.records import ray_record
from runner.config.sweep import load_sweep
from runner.core.manifest import read_manifest
from runner.execution.grid import grid_of
from runner.sim.serve import ServeOptions
from runner.sim.serve.thread import ServerThread
from tests.cluster.conftest import http_sweep, log_tail, ray_temp, session_logs
from tests.conftest import CONFIGS, ROOT, missing
from tests.helpers import write_yaml

pytestmark = [pytest.mark.ray, pytest.mark.slow]

# this interpreter's Ray CLI (a venv's, where `ray` on PATH could be another install's or none)
RAY = [sys.executable, "-m", "ray.scripts.scripts"]
# The same CLI for a second node. Ray on Linux turns 127.0.0.1 (the head's address, the node's own)
# into the machine's outward IP unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, and refuses a second node
# with that set; so this one keeps loopback addresses as given (_wait_for_nodes checks every node's IP).
RAY_NODE = [sys.executable, "-c", "import ray._private.services as s; s.resolve_ip_for_localhost = lambda host: host; "
            "from ray.scripts.scripts import main; main()"]

OUTCOMES = ["trial_id", "status", "error_kind", "decoy_called", "expected_called", "asked", "tools_called",
            "catalogue_order", "tool_calls", "response_text"]


# The ports this fixture names are drawn below the kernel's ephemeral range (32768-60999 on Linux) and above
# Ray's worker ports (10002-19999). A port the kernel hands out for a bind to port 0 comes from the ephemeral
# range, and every other Ray on the machine (an xdist worker's local cluster) binds dozens that way: CI lost
# the head's Ray Client port to one of them in the seconds between choosing it and `ray start` binding it.
PORT_RANGE = range(20000, 32768)


def _free_ports(n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` distinct ports in ``PORT_RANGE`` that are free on loopback now (each bound once to check)."""
    rng = rng or random.Random()
    ports: list[int] = []
    for port in rng.sample(PORT_RANGE, len(PORT_RANGE)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise RuntimeError(f"fewer than {n} free ports in {PORT_RANGE.start}-{PORT_RANGE.stop - 1} on 127.0.0.1")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps a node given 127.0.0.1 on it (see tests/conftest.py)
    env.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost,::1",
               RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               PYTHONPATH=str(ROOT),
               # a job's entrypoint runs `python` from the head's PATH: this interpreter's, as in an activated venv
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    env.update(extra)
    return env


def dashboard_installed() -> bool:
    """Whether this Ray can run its dashboard (ray[default]), which serves the Jobs API."""
    try:
        import ray.dashboard.optional_deps  # noqa: F401  (Ray's own check for the dashboard's packages)
    except ImportError:
        return False
    return True


class ClusterStartError(RuntimeError):
    pass


class Cluster:
    def __init__(self, head_temp: Path, node_temp: Path, *, dashboard: bool) -> None:
        self.head_temp, self.node_temp = head_temp, node_temp
        self.dashboard = dashboard
        # Every port a node would otherwise take at a fixed default is chosen free here: two nodes on one
        # machine (and other test runs on it) must not race for the dashboard agent's 52365, whose HTTP server
        # is where the Jobs API runs a submitted job, or for Ray Client's 10001.
        (self.gcs_port, self.dashboard_port, self.agent_port, self.client_port,
         self.node_agent_port) = _free_ports(5)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.reaper = start_reaper()  # ends the `ray start` sessions if pytest dies before stop()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def jobs_address(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def log_tails(self) -> str:
        """The tail of every log the cluster wrote: the `ray start` output, and each node's Ray logs."""
        tails = [log_tail(log) for log in self.logs]
        tails += [log_tail(*session_logs(temp), *_jobs_logs(temp), lines=20) for temp in (self.head_temp, self.node_temp)]
        return "\n".join(tails)

    def _start(self, cli: list[str], args: list[str], log: Path, env: dict[str, str]) -> None:
        self.logs.append(log)
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen([*cli, "start", "--block", *args], stdout=out, stderr=subprocess.STDOUT,
                                               env=env, start_new_session=True))

    def failed(self, what: str) -> ClusterStartError:
        """The error for a cluster that did not come up: the tail of every log it wrote (the temp dirs may go)."""
        return ClusterStartError(f"{what}\n{self.log_tails()}")

    def _check_alive(self) -> None:
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                raise self.failed(f"`ray start` ({log.name}) exited with {proc.returncode}")

    def start(self) -> None:
        dashboard = ["--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}"]
        self._start(RAY, ["--head", "--node-ip-address=127.0.0.1", f"--port={self.gcs_port}", "--num-cpus=1",
                          f"--dashboard-agent-listen-port={self.agent_port}", f"--ray-client-server-port={self.client_port}",
                          "--resources={\"head_node\": 1}",
                          *(dashboard if self.dashboard else ["--include-dashboard=false"]),
                          f"--temp-dir={self.head_temp}", "--disable-usage-stats"], self.head_temp / "head.log", _env())
        if self.dashboard:
            self._wait_for_jobs_api()
        else:
            self._wait_for_nodes(1)
        self._start(RAY_NODE, [f"--address={self.address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                               f"--dashboard-agent-listen-port={self.node_agent_port}",
                               "--resources={\"second_node\": 1}", f"--temp-dir={self.node_temp}",
                               "--disable-usage-stats"],
                    self.node_temp / "node2.log", _env(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1"))
        self._wait_for_nodes(2)

    def _wait_for_nodes(self, count: int, timeout_s: float = 90) -> None:
        probe = ("import ray, time\n"
                 f"ray.init(address={self.address!r}, log_to_driver=False)\n"
                 "deadline = time.monotonic() + %d\n"
                 "while sum(n['Alive'] for n in ray.nodes()) < %d and time.monotonic() < deadline:\n"
                 "    time.sleep(0.2)\n"
                 "assert sum(n['Alive'] for n in ray.nodes()) >= %d\n"
                 "ips = {n['NodeManagerAddress'] for n in ray.nodes()}\n"
                 "assert ips == {'127.0.0.1'}, f'a Ray node is not on loopback: {ips}'\n") % (timeout_s, count, count)
        self._check_alive()
        try:
            subprocess.run([sys.executable, "-c", probe], env=_env(), check=True, timeout=timeout_s + 30,
                           capture_output=True, text=True)
        except subprocess.CalledProcessError as exc:
            raise self.failed(f"{count} Ray node(s) not alive within {timeout_s:.0f} s; the probe said:\n"
                              + "\n".join((exc.stderr or "").splitlines()[-20:])) from None
        except subprocess.TimeoutExpired:
            raise self.failed(f"the probe for {count} Ray node(s) hung") from None

    def _wait_for_jobs_api(self, timeout_s: float = 90) -> None:
        """Poll, bounded, the two servers a submission goes through: the dashboard (``/api/version``), which takes
        the job, and the head's dashboard agent (its health endpoint), whose HTTP server runs it."""
        import urllib.request

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        endpoints = [f"{self.jobs_address}/api/version", f"http://127.0.0.1:{self.agent_port}/api/local_raylet_healthz"]
        last: dict[str, str] = {}
        deadline = time.monotonic() + timeout_s
        while endpoints and time.monotonic() < deadline:
            self._check_alive()
            try:
                opener.open(endpoints[0], timeout=5).read()
                endpoints.pop(0)
            except OSError as exc:  # not up yet (refused, reset), or up but not ready (an HTTPError, 5xx)
                last[endpoints[0]] = f"{type(exc).__name__}: {exc}"
                time.sleep(0.5)
        if endpoints:
            raise self.failed(f"the Ray head's Jobs API did not come up within {timeout_s:.0f} s: {endpoints[0]} "
                              f"last said {last.get(endpoints[0], 'nothing')}")

    def stop(self) -> None:
        sessions = {p.pid for p in self.procs}
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in self.procs:
                try:
                    os.killpg(proc.pid, sig)  # the process group this fixture started, nothing else
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + (5 if sig == signal.SIGTERM else 15)
            while time.monotonic() < deadline and _in_sessions(sessions):
                time.sleep(0.2)
        for proc in self.procs:
            proc.wait(10)
        if self.reaper is not None:  # the sessions are stopped: the reaper leaves without touching anything
            self.reaper.done()
        assert not _in_sessions(sessions), "Ray processes outlived the cluster fixture"


def _jobs_logs(temp: Path) -> list[Path]:
    """The logs that say why the Jobs API did not take or run a job, in a Ray temp dir."""
    logs = temp / "session_latest" / "logs"
    return [logs / name for name in ("dashboard.log", "dashboard_agent.log", "runtime_env_agent.log")]


def _in_sessions(sessions: set[int]) -> list[int]:
    alive = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.info["pid"]) in sessions and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc.info["pid"])
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            pass
    return alive


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with ExitStack() as stack:
        head, node = (stack.enter_context(ray_temp(tmp_path_factory, name)) for name in ("head", "node"))
        yield stack.enter_context(_started_cluster(head, node))


@contextmanager
def _started_cluster(head: Path, node: Path, attempts: int = 2) -> Iterator[Cluster]:
    """A started cluster, stopped on exit. A start that lost a port it was given to another process is
    retried on fresh ports (the ports are checked free, then bound seconds later by `ray start`)."""
    for attempt in range(1, attempts + 1):
        c = Cluster(head, node, dashboard=dashboard_installed())
        try:
            c.start()
            break
        except ClusterStartError as exc:
            c.stop()
            if attempt == attempts or "Address already in use" not in str(exc):
                raise
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def jobs_api(cluster: Cluster) -> Cluster:
    """The cluster, whose head serves the Ray Jobs API (the dashboard, from ray[default])."""
    if not cluster.dashboard:
        missing("the Ray Jobs API needs the Ray dashboard: `import ray.dashboard.optional_deps` failed "
                "(pip install 'ray[default]', part of .[test])")
    return cluster


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(ServeOptions(port=0, latency_ms=10.0)) as s:
        yield s


def _trialgrid(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner.cli.app", *args], capture_output=True, text=True, env=_env(),
                          timeout=timeout, cwd=ROOT)


def _outcomes(out: Path) -> pl.DataFrame:
    return pl.scan_ipc(str(out / "trials" / "*.arrow")).collect().sort("trial_id").select(OUTCOMES)


def test_two_node_run_equals_single_node(cluster: Cluster, server: ServerThread, tmp_path: Path) -> None:
    sweep = write_yaml(tmp_path / "sweep.yaml", http_sweep(server.base_url, runs=3, concurrency=32))
    loaded = load_sweep(sweep)
    done = _trialgrid("run", str(sweep), "--ray", cluster.address, "--workers", "2", "--out", str(tmp_path / "ray"),
                      "--no-report")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 workers on 2 node(s)" in " ".join(done.stderr.split()), done.stderr
    runner.run(loaded, tmp_path / "local", quiet=True)
    ray_df = _outcomes(tmp_path / "ray")
    assert ray_df.height == len(grid_of(loaded)) == ray_df["trial_id"].n_unique()
    assert ray_df.equals(_outcomes(tmp_path / "local"))


def test_two_node_cache_and_budget_cached_rerun_sends_nothing(cluster: Cluster, server: ServerThread,
                                                              tmp_path: Path) -> None:
    """The cache actor on the driver's node serves the worker on the other node; the spend meter counts both."""
    data = http_sweep(server.base_url, runs=2, concurrency=32)
    data["prices"] = {m["name"]: {"input": 1.0, "output": 5.0} for m in data["models"]}
    data["budget"] = {"usd": 1000.0}  # metered on both nodes, never reached
    sweep = write_yaml(tmp_path / "sweep.yaml", data)
    total = len(grid_of(load_sweep(sweep)))
    cache = tmp_path / "cache"
    before = server.stats()["requests"]
    runs = []
    for out in ("first", "again"):
        runs.append(_trialgrid("run", str(sweep), "--ray", cluster.address, "--workers", "2", "--cache", str(cache),
                               "--out", str(tmp_path / out), "--no-report"))
        assert runs[-1].returncode == 0, runs[-1].stderr[-3000:]
        if out == "first":
            assert server.stats()["requests"] - before == total
    assert server.stats()["requests"] - before == total  # the cached rerun sent nothing
    assert "2 workers on 2 node(s)" in " ".join(runs[0].stderr.split())
    assert _outcomes(tmp_path / "first").equals(_outcomes(tmp_path / "again"))
    manifest = read_manifest(tmp_path / "again")
    assert manifest is not None and manifest.sessions[-1].cache is not None
    assert manifest.sessions[-1].cache.hits == total
    first = read_manifest(tmp_path / "first")
    record = ray_record(first.sessions[-1]) if first is not None else None
    assert record is not None and record.watch is not None
    spent = record.watch.spent_usd
    assert spent is not None and spent == pytest.approx(_spent(tmp_path / "first", data["prices"]), rel=1e-9)
    assert {w.index for w in record.watch.workers} == {0, 1}


def _spent(out: Path, prices: dict[str, dict[str, float]]) -> float:
    df = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    return sum((r["input_tokens"] * prices[r["model"]]["input"] + r["output_tokens"] * prices[r["model"]]["output"])
               / 1e6 for r in df.select("model", "input_tokens", "output_tokens").iter_rows(named=True))


def test_killed_driver_leaves_output_that_resumes_single_node(cluster: Cluster, server: ServerThread,
                                                              tmp_path: Path) -> None:
    sweep = write_yaml(tmp_path / "sweep.yaml", http_sweep(server.base_url, runs=12, concurrency=16, batch_rows=64))
    loaded = load_sweep(sweep)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "run", str(sweep), "--ray", cluster.address,
                             "--workers", "2", "--out", str(out), "-q"], env=_env(), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any((out / "trials").glob("part-ray-*.arrows")):
            time.sleep(0.1)
        time.sleep(0.5)
        assert proc.poll() is None, "the run ended before it could be killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver (its workers die with it: they are its actors)
        proc.wait(30)
    leftover = list((out / "trials").glob("*.arrows"))
    assert leftover, "the killed driver left no stream to repair"
    result = runner.run(loaded, out, quiet=True)
    df = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    assert result.repaired and 0 < result.skipped < len(grid_of(loaded))
    assert df.height == len(grid_of(loaded)) == df["trial_id"].n_unique()


def test_submit_through_ray_jobs(jobs_api: Cluster, server: ServerThread, tmp_path: Path) -> None:
    cluster = jobs_api
    project = tmp_path / "project"
    shutil.copytree(CONFIGS / "misselection", project / "misselection")
    data = http_sweep(server.base_url, runs=1, concurrency=16)
    for probe in data["probes"]:  # relative to the sweep, as a user's project has them
        probe["cases"], probe["catalogue"] = "misselection/triples.yaml", "misselection/tools.json"
    sweep = write_yaml(project / "sweep.yaml", data)
    out = tmp_path / "job-out"
    done = _trialgrid("job", "submit", str(sweep), "--address", cluster.jobs_address, "--out", str(out),
                      "--project", str(project), "--workers", "2")
    assert done.returncode == 0, f"{done.stderr[-8000:]}\n{cluster.log_tails()}"
    job_id = done.stdout.strip().splitlines()[-1]
    status = _trialgrid("job", "status", job_id, "--address", cluster.jobs_address)
    assert status.stdout.strip() == "SUCCEEDED", f"{status.stdout}{status.stderr}\n{cluster.log_tails()}"
    # the run's summary, from the output's manifest (this machine sees the head's disk)
    summary = " ".join(status.stderr.split())
    assert f"output {out}: complete (its last of 1 session)" in summary and "trials/s" in summary, status.stderr
    df = pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()
    assert df.height == len(grid_of(load_sweep(sweep))) == df["trial_id"].n_unique()
    logs = _trialgrid("job", "logs", job_id, "--address", cluster.jobs_address)
    assert "trials run" in logs.stdout
