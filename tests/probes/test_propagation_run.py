"""The propagation probe end to end: offline run, determinism, errors as errors, and over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

import runner
from runner.config.sweep import load_sweep
from runner.core.types import ChatRequest, ChatResponse, TrialSpec
from runner.execution.trial import ModelBinding, TrialRunner
from runner.providers.errors import ErrorKind, ProviderError
from runner.reporting.terminal import print_report
from runner.sim import SimProvider
from tests.conftest import CONFIGS

OUTCOMES = ["model", "case_id", "condition", "run", "status", "reached_s1", "reached_s2", "stage_reached", "correct",
            "wrong_answer", "hallucinated", "fabricated", "tool_called", "abstained", "abstain_reason", "final_answer",
            "n_tool_calls"]


def small_sweep(tmp_path: Path, runs: int = 2, models: list[dict[str, Any]] | None = None) -> Path:
    data = yaml.safe_load((CONFIGS / "propagation.yaml").read_text())
    data["probes"][0]["tasks"] = [str(CONFIGS / t) for t in data["probes"][0]["tasks"]]
    data["probes"][0]["runs"] = runs
    if models is not None:
        data["models"] = models
    path = tmp_path / "propagation.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def outcomes(out: Path) -> pl.DataFrame:
    return pl.scan_ipc([str(p) for p in sorted((out / "trials").glob("*.arrow"))]).collect().select(OUTCOMES).sort(
        "model", "case_id", "condition", "run")


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("prop")
    runner.run(load_sweep(small_sweep(tmp)), tmp / "out", quiet=True)
    return tmp / "out"


def test_bundled_sweep_runs_offline_and_every_trial_is_ok(offline_run: Path) -> None:
    rows = pl.scan_ipc([str(p) for p in sorted((offline_run / "trials").glob("*.arrow"))]).collect()
    assert rows.height == 3 * 18 * 8 * 2
    assert set(rows["status"]) == {"ok"}
    # every step of every trial is kept as data
    steps = rows.filter(pl.col("tool_called"))["steps"].to_list()
    assert all(any(s["role"] == "result" for s in trial) for trial in steps)


def test_personas_order_as_designed(offline_run: Path) -> None:
    rows = pl.scan_ipc([str(p) for p in sorted((offline_run / "trials").glob("*.arrow"))]).collect()
    by = rows.group_by("model").agg(pl.col("fabricated").mean(), pl.col("tool_called").mean(),
                                   pl.col("wrong_answer").filter(pl.col("condition") == "control").mean().alias("ctl"))
    r = {m["model"]: m for m in by.to_dicts()}
    assert r["sim-careful"]["fabricated"] < r["sim-typical"]["fabricated"] < r["sim-reckless"]["fabricated"]
    assert r["sim-careful"]["tool_called"] > r["sim-reckless"]["tool_called"]
    assert r["sim-careful"]["ctl"] < 0.15
    # injection only differs from control by the injection: same seed, so control trials with no tool call
    # never reach S1 in the injected arm either
    inj = rows.filter(pl.col("condition") == "param.semantic_wrong")
    assert inj.filter(~pl.col("tool_called"))["reached_s1"].sum() == 0


def test_rerun_gives_identical_outcomes(offline_run: Path, tmp_path: Path) -> None:
    runner.run(load_sweep(small_sweep(tmp_path)), tmp_path / "again", quiet=True)
    assert outcomes(tmp_path / "again").equals(outcomes(offline_run))


def test_report_prints_hop_rates_fabrication_and_interceptor(offline_run: Path) -> None:
    from rich.console import Console

    console = Console(record=True, width=160)
    print_report(offline_run, console)
    text = console.export_text()
    for heading in ("hop rates", "rejection vs recovery", "fabricated tool use", "interceptor (arm − its control"):
        assert heading in text


class FailsOnSecondTurn:
    """A provider whose second call of a trial fails: the trial must end as an error, not an answer."""

    name = "flaky"

    def __init__(self) -> None:
        self._sim = SimProvider()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if any(m.role == "tool" for m in request.messages):
            raise ProviderError(ErrorKind.FATAL, "HTTP 401 from the server", status_code=401)
        return self._sim.respond(request)

    async def aclose(self) -> None:
        return None


def test_a_failed_provider_call_is_status_error_never_a_wrong_answer(tmp_path: Path) -> None:
    loaded = load_sweep(small_sweep(tmp_path, runs=1))
    probe = loaded.probes[0]
    binding = ModelBinding("m", "flaky", FailsOnSecondTurn(), "careful", {})

    async def one() -> dict[str, Any]:
        runner = TrialRunner({probe.name: probe}, {"m": binding}, 30.0)
        try:
            spec = TrialSpec("s", "t1", "m", probe.name, "weather-lisbon-temperature", "control", 0, 7, 7)
            return await runner(spec)
        finally:
            await runner.aclose()

    row = asyncio.run(one())
    assert row["status"] == "error" and row["error_kind"] == "fatal"
    assert "turn 2 of the agent loop" in row["error"] and "get_weather ok" in row["error"]
    assert "wrong_answer" not in row and "correct" not in row


def test_over_http_the_outcomes_are_identical(offline_run: Path, tmp_path: Path) -> None:
    serve = pytest.importorskip("runner.sim.serve")
    from runner.sim.serve.thread import ServerThread

    with ServerThread(serve.ServeOptions(port=0)) as server:
        models = [{"name": f"sim-{m}", "provider": "openai", "model": m, "base_url": server.base_url,
                   "api_key_env": None, "concurrency": 32} for m in ("careful", "typical", "reckless")]
        # one run per cell over HTTP (a trial's seed does not depend on how many runs the sweep has), against
        # the same runs of the offline output: every multi-turn exchange goes over the wire as well as with two
        runner.run(load_sweep(small_sweep(tmp_path, runs=1, models=models)), tmp_path / "http", quiet=True)
    http = outcomes(tmp_path / "http")
    assert http.height and set(http["run"]) == {0}
    assert http.equals(outcomes(offline_run).filter(pl.col("run") == 0))
