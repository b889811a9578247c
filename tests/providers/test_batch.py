"""Batch mode against ``trialgrid serve``'s batch APIs: same outcomes as live, resume after SIGKILL, failures as rows.

Every server here is a real loopback ``trialgrid serve`` app (127.0.0.1, port 0,
stopped by the fixture); nothing mocks the client.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from tests.conftest import CONFIGS, ROOT
from tests.helpers import invoke
from tests.providers.conftest import CELL, http_sweep, trials, write

NEGATIVE = {"kind": "negative", "cases": str(CONFIGS / "negative/cases.yaml"),
            "catalogue": str(CONFIGS / "negative/tools.json"), "runs": 2}
PHANTOM = {"kind": "phantom", "traces": str(CONFIGS / "phantom/traces.yaml"), "runs": 2}


def batch_sweep(base_url: str, provider: str, **engine: Any) -> dict[str, Any]:
    """Quickstart misselection plus the negative suite, two models, polled fast."""
    data = http_sweep(base_url, provider, runs=2)
    data["models"] = data["models"][:2]
    data["probes"].append(dict(NEGATIVE))
    data["engine"] = {"batch_poll_s": 0.05, **engine}
    return data


def same_outcomes(a: pl.DataFrame, b: pl.DataFrame, columns: list[str]) -> None:
    left, right = a.select(columns).sort(CELL), b.select(columns).sort(CELL)
    assert left.equals(right), "batch outcomes differ from live outcomes"


COMPARED = ["model", "probe", "case_id", "condition", "run", "seed", "status", "error_kind", "tool_calls",
            "response_text", "input_tokens", "output_tokens"]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai-responses"])
def test_batch_mode_gives_the_live_outcomes(serve, tmp_path: Path, provider: str) -> None:  # type: ignore[no-untyped-def]
    server = serve()
    path = write(tmp_path, batch_sweep(server.base_url, provider))
    live = runner.run(load_sweep(path), tmp_path / "live", quiet=True)
    before = server.stats()
    batch = runner.run(path, tmp_path / "batch", mode="batch", quiet=True)
    after = server.stats()
    assert batch.status == "complete" and batch.stats.done == live.total
    assert after["requests"] == before["requests"]  # no live chat request in batch mode
    api = "anthropic" if provider == "anthropic" else "openai"  # the server counts OpenAI Batch for both endpoints
    assert after["batches"] == {api: 2} and after["batch_requests"] == {api: live.total}
    a, b = trials(tmp_path / "live"), trials(tmp_path / "batch")
    probe_columns = [c for c in a.columns if c in ("decoy_called", "expected_called", "asked", "catalogue_order",
                                                   "passed", "invented_tokens", "inferred_fields", "action")]
    same_outcomes(a, b, COMPARED + probe_columns)
    ledger = json.loads((tmp_path / "batch" / "batches.json").read_text())
    assert [e["state"] for e in ledger["batches"]] == ["collected", "collected"]
    manifest = json.loads((tmp_path / "batch" / "manifest.json").read_text())
    assert [b["id"] for b in manifest["batches"]] == [e["remote"]["id"] for e in ledger["batches"]]


@pytest.mark.parametrize("entry", ["path", "loaded"])
def test_a_mode_batch_model_goes_through_the_batch_api_from_the_python_api(serve, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                        entry: str) -> None:
    """``runner.run`` (given a file or a loaded sweep) picks batch mode from the sweep: batches created, no live
    request."""
    server = serve()
    data = batch_sweep(server.base_url, "openai")
    for m in data["models"]:
        m["mode"] = "batch"
    path = write(tmp_path, data)
    result = runner.run(path if entry == "path" else load_sweep(path), tmp_path / "out", quiet=True)
    stats = server.stats()
    assert result.status == "complete" and result.stats.done == result.total
    assert stats["requests"] == 0
    assert stats["batches"] == {"openai": 2} and stats["batch_requests"] == {"openai": result.total}


def test_mixed_modes_batch_one_model_and_run_the_other_live(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve()
    data = batch_sweep(server.base_url, "anthropic")
    data["models"][0]["mode"] = "batch"
    result = runner.run(write(tmp_path, data), tmp_path / "out", quiet=True)
    stats = server.stats()
    assert result.status == "complete" and result.stats.done == result.total
    assert stats["batches"] == {"anthropic": 1} and stats["batch_requests"] == {"anthropic": result.total // 2}
    assert stats["requests"] == result.total // 2  # the live model's trials, one request each
    assert set(trials(tmp_path / "out")["status"].unique().to_list()) == {"ok"}


def test_anthropic_base_url_with_or_without_v1_reaches_the_batch_api(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``base_url`` written the SDK's way (no ``/v1``) means in batch mode what it means live."""
    server = serve()
    for i, base in enumerate((server.url, server.base_url)):
        result = runner.run(write(tmp_path, batch_sweep(base, "anthropic"), f"s{i}.yaml"), tmp_path / f"out{i}",
                            mode="batch", quiet=True)
        assert result.status == "complete" and result.stats.done == result.total
        assert set(trials(tmp_path / f"out{i}")["status"]) == {"ok"}
    stats = server.stats()
    assert stats["requests"] == 0 and stats["batches"] == {"anthropic": 4}
    same_outcomes(trials(tmp_path / "out0"), trials(tmp_path / "out1"), COMPARED)


def test_phantom_auditor_runs_in_batch_mode(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve()
    data = http_sweep(server.base_url, "openai")
    data["models"] = [{"name": "auditor", "model": "auditor-balanced", "provider": "openai",
                       "base_url": server.base_url, "api_key_env": None}]
    data["probes"] = [dict(PHANTOM)]
    data["engine"] = {"batch_poll_s": 0.05}
    path = write(tmp_path, data)
    runner.run(load_sweep(path), tmp_path / "live", quiet=True)
    runner.run(path, tmp_path / "batch", mode="batch", quiet=True)
    columns = COMPARED + ["pred_fields", "auditor_error", "auditor_exact", "baseline_fields"]
    same_outcomes(trials(tmp_path / "live"), trials(tmp_path / "batch"), columns)


@pytest.mark.slow
def test_sigkill_during_polling_then_rerun_submits_nothing_twice(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(batch_delay_s=4.0)
    path = write(tmp_path, batch_sweep(server.base_url, "openai"))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "run", str(path), "--batch", "--out", str(out), "-q"],
                            cwd=ROOT, env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ledger = out / "batches.json"
        for _ in range(600):  # until both batches are recorded (the run is then polling)
            if ledger.exists() and len(json.loads(ledger.read_text())["batches"]) == 2:
                break
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.05)
        else:
            pytest.fail("the run never recorded its two batches")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if proc.stderr:
            proc.stderr.close()
    assert server.stats()["batches"] == {"openai": 2}
    states = {e["state"] for e in json.loads((out / "batches.json").read_text())["batches"]}
    assert states == {"submitted"}
    result = runner.run(path, out, mode="batch", quiet=True)
    assert server.stats()["batches"] == {"openai": 2}  # polled, not resubmitted
    df = trials(out)
    assert result.status == "complete" and df.height == result.total and df["trial_id"].n_unique() == df.height
    assert df["status"].unique().to_list() == ["ok"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_expired_and_failed_requests_become_error_rows(serve, tmp_path: Path, provider: str) -> None:  # type: ignore[no-untyped-def]
    server = serve(batch_error_rate=0.2, batch_expire_rate=0.2, fault_seed=7)
    path = write(tmp_path, batch_sweep(server.base_url, provider))
    result = runner.run(path, tmp_path / "out", mode="batch", quiet=True)
    df = trials(tmp_path / "out")
    assert df.height == result.total and df["trial_id"].n_unique() == df.height
    fates = server.call(lambda s: {tid: s.batches.fate(tid) for tid in df["trial_id"].to_list()})
    expected = {"ok": None, "error": "transient", "expired": "expired"}
    got = dict(zip(df["trial_id"].to_list(), df["error_kind"].to_list(), strict=True))
    assert got == {tid: expected[f] for tid, f in fates.items()}
    assert {"transient", "expired"} <= set(got.values())
    errors = df.filter(pl.col("status") == "error")
    assert errors.height == sum(f != "ok" for f in fates.values())
    # never scored: every outcome column of an error row is null
    assert errors.select(["decoy_called", "expected_called", "passed"]).null_count().row(0) == (errors.height,) * 3
    assert errors["error"].str.contains("batch").all()


def test_multi_turn_probes_and_sim_models_are_refused(tmp_path: Path) -> None:
    data = http_sweep("http://127.0.0.1:9/v1", "openai")
    data["probes"] = [{"kind": "propagation", "tasks": [str(CONFIGS / "propagation/weather.yaml")], "runs": 1}]
    refused = _cli(write(tmp_path, data), tmp_path)
    assert refused.returncode == 2 and "multi-turn" in refused.stderr
    sim = _cli(write(tmp_path, {**http_sweep("x", "openai"), "models": [{"name": "s", "provider": "sim",
                                                                         "model": "typical"}]}, "sim.yaml"), tmp_path)
    assert sim.returncode == 2 and "no batch API" in sim.stderr


def _cli(path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:  # in-process: a refusal needs no process
    done = invoke("run", str(path), "--batch", "--out", str(tmp_path / "refused"), "-q")
    return subprocess.CompletedProcess([], done.exit_code, done.stdout, done.stderr)


def test_a_results_file_with_lines_that_do_not_read_answers_only_the_trials_it_names() -> None:
    """A server may send anything: a line that is not JSON, not an object or names no request answers no trial
    (that trial gets the missing-answer error), and never stops the collection."""
    from runner.providers.batches import _result_lines

    content = b'{"custom_id": "a", "x": 1}\nnot json\n[1]\n{"custom_id": 5}\n\n{"custom_id": "b", "result": "x"}\n'
    assert [item["custom_id"] for item in _result_lines(content)] == ["a", "b"]


def test_googles_own_client_runs_a_batch_on_trialgrid_serve(wire) -> None:  # type: ignore[no-untyped-def]
    """The Gemini API's batch mode as ``google-genai`` speaks it: create with the requests inline, get until it
    ends, the answers inline with their keys; each equals the live answer to the same request."""
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    from runner.sim import SimProvider
    from tests.providers.invoices import SYSTEM, TOOLS, USER, ask

    server, _, _ = wire("gemini", batch_delay_s=0.3)
    client = genai.Client(api_key=os.environ["WIRE_TEST_KEY"],
                          http_options=types.HttpOptions(base_url=server.url, api_version="v1beta"))
    tools = [types.Tool(function_declarations=[types.FunctionDeclaration(
        name=t.name, description=t.description, parameters_json_schema=t.parameters) for t in TOOLS])]
    seeds = range(6)
    job = client.batches.create(model="typical", src=[types.InlinedRequest(
        contents=USER, metadata={"key": f"trial-{seed}"},
        config=types.GenerateContentConfig(system_instruction=SYSTEM, tools=tools, seed=seed)) for seed in seeds])
    assert job.name and job.name.startswith("batches/") and job.state == "JOB_STATE_RUNNING"
    deadline = time.monotonic() + 10
    while (job := client.batches.get(name=job.name)).state == "JOB_STATE_RUNNING" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job.state == "JOB_STATE_SUCCEEDED" and job.dest is not None and job.dest.inlined_responses
    sim = SimProvider()
    got = {r.metadata["key"]: r.response for r in job.dest.inlined_responses if r.metadata and r.response}
    assert sorted(got) == [f"trial-{seed}" for seed in seeds]
    for seed in seeds:
        want = sim.respond(ask("typical", seed))
        answer = got[f"trial-{seed}"]
        assert [c.name for c in answer.function_calls or []] == [c.name for c in want.tool_calls]
        assert (answer.text or "") == want.text
    assert server.stats()["batches"] == {"gemini": 1}
    assert [j.name for j in client.batches.list()] == [job.name]


def test_gemini_batch_mode_gives_the_live_outcomes(wire, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server, base_url, fields = wire("gemini")
    data = batch_sweep(base_url, "gemini")
    for m in data["models"]:
        m.update(fields)
    path = write(tmp_path, data)
    live = runner.run(load_sweep(path), tmp_path / "live", quiet=True)
    before = server.stats()
    batch = runner.run(path, tmp_path / "batch", mode="batch", quiet=True)
    after = server.stats()
    assert batch.status == "complete" and batch.stats.done == live.total
    assert after["requests"] == before["requests"]  # no live request in batch mode
    assert after["batches"] == {"gemini": 2} and after["batch_requests"] == {"gemini": live.total}
    a, b = trials(tmp_path / "live"), trials(tmp_path / "batch")
    same_outcomes(a, b, [*COMPARED, "decoy_called", "expected_called", "passed"])


def test_gemini_expired_and_failed_requests_become_error_rows(wire, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server, base_url, fields = wire("gemini", batch_error_rate=0.2, batch_expire_rate=0.2, fault_seed=7)
    data = batch_sweep(base_url, "gemini")
    for m in data["models"]:
        m.update(fields)
    result = runner.run(write(tmp_path, data), tmp_path / "out", mode="batch", quiet=True)
    df = trials(tmp_path / "out")
    assert df.height == result.total and df["trial_id"].n_unique() == df.height
    fates = server.call(lambda s: {tid: s.batches.fate(tid) for tid in df["trial_id"].to_list()})
    expected = {"ok": None, "error": "transient", "expired": "expired"}
    got = dict(zip(df["trial_id"].to_list(), df["error_kind"].to_list(), strict=True))
    assert got == {tid: expected[f] for tid, f in fates.items()} and {"transient", "expired"} <= set(got.values())


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"batch": []}', b'{"batch": {"inputConfig": {}}}',
                                  b'{"batch": {"inputConfig": {"requests": {"requests": []}}}}',
                                  b'{"batch": {"inputConfig": {"requests": {"requests": [1]}}}}',
                                  b'{"batch": {"inputConfig": {"requests": {"requests": [{"request": {}, '
                                  b'"metadata": [1]}, {"request": {}, "metadata": "x"}]}}}}'])
def test_trialgrid_serves_a_gemini_batch_of_anything_without_a_server_error(wire, body: bytes) -> None:  # type: ignore[no-untyped-def]
    import httpx

    _, base_url, _ = wire("gemini")
    answer = httpx.post(f"{base_url}/models/typical:batchGenerateContent", content=body, trust_env=False,
                        headers={"x-goog-api-key": os.environ["WIRE_TEST_KEY"], "content-type": "application/json"})
    assert answer.status_code in (200, 400), answer.text
    assert answer.json()["error" if answer.status_code == 400 else "name"]
