"""``trialgrid rescore``: stored answers scored again by the probes themselves, no model asked.

The negative probe runs against a real ``trialgrid serve`` on 127.0.0.1 (stopped by
the test); a forbidden token is then added to one case and the output re-scored —
``/stats`` must not move and exactly the rows whose tool calls hold the token change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from runner.core.types import ChatResponse
from runner.execution import replay
from runner.execution.replay import ReplayAgent, ReplayExhausted
from runner.execution.rescore import rescore
from runner.output import Output
from runner.sim.serve import ServeOptions, ServerThread
from tests.conftest import CONFIGS
from tests.helpers.rows import without_calls

CELL = ["model", "case_id", "condition", "run"]


def _copy_sweep(tmp_path: Path, name: str, runs: int, **model: Any) -> Path:
    """A bundled sweep with its case files copied beside it (so a test may edit them)."""
    data = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    for probe in data["probes"]:
        probe["runs"] = runs
        for key in ("cases", "catalogue", "traces"):
            if key in probe:
                target = tmp_path / Path(probe[key]).name
                target.write_text((CONFIGS / probe[key]).read_text())
                probe[key] = target.name
        if "tasks" in probe:
            probe["tasks"] = [str(CONFIGS / t) for t in probe["tasks"]]
    for m in data["models"]:
        m.update(model)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _rows(out: Path) -> pl.DataFrame:
    return pl.scan_ipc(str(out / "trials" / "*.arrow")).collect().sort(CELL)


def _calls_holding(row: dict[str, Any], token: str) -> bool:
    return any(token.lower() in (c["arguments"] or "").lower() for c in row["tool_calls"] or ())


def test_a_new_forbidden_token_changes_exactly_the_rows_that_hold_it(tmp_path: Path) -> None:
    server = ServerThread(ServeOptions(host="127.0.0.1", port=0, faults={"500": 0.1}, fault_seed=3)).start()
    try:
        sweep = _copy_sweep(tmp_path, "negatives", 4, provider="openai", base_url=server.base_url, api_key_env=None,
                            retry={"max_attempts": 1})
        runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
        before = _rows(tmp_path / "out")
        errors = before.filter(pl.col("status") == "error")
        assert errors.height > 0
        # a value the agent put into a call of some negative case, in some trials of it but not all
        ok = before.filter((pl.col("status") == "ok") & (pl.col("condition") == "negative"))
        case_id, token = _token_in_some_calls(ok.to_dicts())
        cases_path = tmp_path / "cases.yaml"
        cases = yaml.safe_load(cases_path.read_text())
        case = next(c for c in cases["cases"] if c.get("id", c.get("name")) == case_id)
        case["forbidden"] = [*case.get("forbidden", []), token]
        cases_path.write_text(yaml.safe_dump(cases, sort_keys=False))
        sent = server.stats()["requests"]

        result = CliRunner().invoke(app, ["rescore", str(tmp_path / "out"), "--out", str(tmp_path / "new")])
        assert result.exit_code == 0, result.output
        assert server.stats()["requests"] == sent  # no model was asked anything
    finally:
        server.stop()

    after = _rows(tmp_path / "new")
    assert after.height == before.height
    outcome = ["passed", "invented", "invented_tokens", "reasons", "action", "inferred_fields", "tripwire_ids"]
    expect = {tuple(r[k] for k in CELL) for r in before.to_dicts()
              if r["status"] == "ok" and r["case_id"] == case_id and _calls_holding(r, token)}
    changed = {tuple(a[k] for k in CELL) for a, b in zip(after.to_dicts(), before.to_dicts(), strict=True)
               if any(a[k] != b[k] for k in outcome)}
    assert changed == expect and expect
    for row in (r for r in after.to_dicts() if tuple(r[k] for k in CELL) in expect):
        assert row["invented"] and row["passed"] is False
        assert any(f"forbidden {token!r}" in t for t in row["invented_tokens"])
    # error rows stay error rows, untouched; common columns are copied
    kept = after.filter(pl.col("status") == "error")
    assert kept.select(CELL + ["error_kind", "error"]).equals(errors.select(CELL + ["error_kind", "error"]))
    assert after.select(CELL + ["tool_calls", "response_text", "attempts"]).equals(
        before.select(CELL + ["tool_calls", "response_text", "attempts"]))
    manifest = json.loads((tmp_path / "new" / "manifest.json").read_text())
    source = manifest["rescored_from"]
    assert source["out"] == str((tmp_path / "out").resolve()) and source["changed"] == len(expect)
    assert source["errors_kept"] == errors.height and manifest["status"] == "complete"
    assert manifest["sweep_id"] != source["sweep_id"]  # a changed case file is a changed sweep


def _token_in_some_calls(rows: list[dict[str, Any]]) -> tuple[str, str]:
    by_case: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_case.setdefault(r["case_id"], []).append(r)
    for case_id, group in sorted(by_case.items()):
        for r in group:
            for call in r["tool_calls"] or ():
                try:
                    args = json.loads(call["arguments"])
                except json.JSONDecodeError:
                    continue
                for value in (args.values() if isinstance(args, dict) else ()):
                    if isinstance(value, str) and len(value) >= 4:
                        holding = sum(_calls_holding(x, value) for x in group)
                        if holding < len(group):
                            return case_id, value
    raise AssertionError("no tool-call value held by some but not all trials of a case")


@pytest.mark.parametrize("name", ["propagation", "phantom", "quickstart"])
def test_an_unchanged_sweep_rescores_to_the_same_outcomes(tmp_path: Path, name: str) -> None:
    sweep = _copy_sweep(tmp_path, name, 1)
    runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    result = rescore(tmp_path / "out", tmp_path / "new")
    before, after = _rows(tmp_path / "out"), _rows(tmp_path / "new")
    # every call is replayed as it went, an auditor's failed one included: every column the same (the blobs are
    # kept once per batch, so which row carries them depends on the batching; the content is the same)
    same = [c for c in before.columns if c not in ("finished_at", "call_blobs")]
    assert before.select(same).equals(after.select(same))
    assert Output.open(tmp_path / "out").blobs().content_ids() == Output.open(tmp_path / "new").blobs().content_ids()
    assert result.changed == 0 and result.rows == before.height


def test_propagation_rescores_from_the_recorded_calls_not_from_the_injection_notes(tmp_path: Path) -> None:
    """The model's own arguments are on the row (``calls``); the loop's prose notes are never parsed back."""
    assert not hasattr(replay, "_uninjected")
    sweep = _copy_sweep(tmp_path, "propagation", 2)
    runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    before = _rows(tmp_path / "out")
    injected = 0
    for row in before.filter(pl.col("status") == "ok").iter_rows(named=True):
        executed = [s for s in row["steps"] if s["role"] == "call"]
        sent = [c for call in row["calls"] for c in call["response"]["tool_calls"]]
        assert [c["name"] for c in sent] == [s["tool"] for s in executed]
        for step, call in zip(executed, sent, strict=True):
            if step["injected"]:  # the step holds the corrupted argument; the call the model's own
                injected += 1
                assert step["arguments"] != call["arguments"]
            else:
                assert step["arguments"] == call["arguments"]
    assert injected > 0
    rescore(tmp_path / "out", tmp_path / "new")
    after = _rows(tmp_path / "new")
    outcome = [f.name for f in load_sweep(sweep).probes[0].outcome_fields]
    assert after.select(CELL + outcome).equals(before.select(CELL + outcome))


def test_an_output_that_records_no_calls_is_refused_in_one_line(tmp_path: Path) -> None:
    """Trials imported from another harness carry no model calls: nothing to replay, said before anything is
    written."""
    sweep = _copy_sweep(tmp_path, "quickstart", 1)
    runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    old = without_calls(tmp_path / "out", tmp_path / "old")
    with pytest.raises(UserError, match="records no model calls"):
        rescore(old, tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_a_probe_asking_for_more_than_was_stored_is_refused() -> None:
    import asyncio

    agent = ReplayAgent([ChatResponse("one")], "m", "t1")
    assert asyncio.run(agent.chat(())).text == "one"
    with pytest.raises(ReplayExhausted, match="asked for model answer 2, but the row stores 1"):
        asyncio.run(agent.chat(()))


def test_a_changed_seed_or_a_missing_source_is_refused_clearly(tmp_path: Path) -> None:
    sweep = _copy_sweep(tmp_path, "negatives", 1)
    runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    data = yaml.safe_load(sweep.read_text())
    data["seed"] += 1
    reseeded = tmp_path / "reseeded.yaml"
    reseeded.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="stored answer is to a different request"):
        rescore(tmp_path / "out", tmp_path / "new", reseeded)
    assert not (tmp_path / "new").exists()
    result = CliRunner().invoke(app, ["rescore", str(tmp_path / "nothing"), "--out", str(tmp_path / "n2")])
    assert result.exit_code == 2 and "not a trialgrid output directory" in result.output


@pytest.mark.parametrize("name", ["quickstart", "negatives"])
def test_calls_read_from_the_text_are_still_from_the_text_after_rescore(tmp_path: Path, name: str) -> None:
    sweep = _copy_sweep(tmp_path, name, 2, provider="callable", function="tests.execution.text_call_agents:hermes_text",
                        tool_call_parser="hermes")
    runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    before = _rows(tmp_path / "out")
    assert before["calls_from_text"].sum() > 0  # the sweep really has calls read from text
    result = rescore(tmp_path / "out", tmp_path / "new")
    after = _rows(tmp_path / "new")
    assert after["calls_from_text"].to_list() == before["calls_from_text"].to_list()
    assert result.changed == 0
