"""The oracle persona (``provider: sim, model: oracle``) and ``trialgrid validate --oracle``."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import runner
from runner.analysis.proof import unpassable_cases
from runner.config.prove import oracle_sweep
from runner.config.sweep import load_sweep
from runner.core.types import ChatRequest, Message
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim import SimProvider
from tests.helpers.cli import invoke
from tests.helpers.files import bundled_sweep, write_yaml
from tests.helpers.rows import written_rows


@pytest.mark.parametrize("name", ["quickstart.yaml", "negatives.yaml", "phantom.yaml", "propagation.yaml"])
def test_the_oracle_passes_every_case_of_a_bundled_sweep(tmp_path: Path, name: str) -> None:
    proof = oracle_sweep(load_sweep(bundled_sweep(tmp_path, name, runs=5)))
    assert proof.skipped == ()
    result = runner.run(proof.loaded, tmp_path / "out", quiet=True)
    assert result.output is not None
    asked, failed = unpassable_cases(result.output, {p.name: p.kind for p in proof.loaded.probes})
    rows = written_rows(tmp_path / "out")
    judged = rows.filter(pl.col("injection").is_null()).height if "injection" in rows.columns else rows.height
    assert failed == [] and asked == judged > 0
    assert rows.height == sum(p.n_cells for p in proof.loaded.probes)
    assert (rows["status"] == "ok").all()
    if "injection" in rows.columns:  # propagation: the reference call, then every expected value, uninjected
        control = rows.filter(pl.col("injection").is_null())
        assert control["correct"].all() and not control["fabricated"].any() and not control["abstained"].any()
        assert control["tool_called"].all() and (control["turns"] == 2).all()
    if "passed" in rows.columns:  # the negative probe: every case, the pinning ones included
        assert rows["passed"].all() and (rows["condition"] == "positive").any()
    if "expected_called" in rows.columns:
        assert rows["expected_called"].all() and not rows["decoy_called"].any()
    if "auditor_exact" in rows.columns:
        assert rows["auditor_exact"].all()


def test_the_oracle_persona_in_a_sweep_of_ones_own(tmp_path: Path) -> None:
    data = {"name": "o", "models": [{"name": "oracle", "provider": "sim", "model": "oracle"}],
            "probes": [{"kind": "negative", "cases": str(Path(__file__).parents[2] / "configs/negative/cases.yaml"),
                        "catalogue": str(Path(__file__).parents[2] / "configs/negative/tools.json"), "runs": 1}]}
    result = invoke("run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(tmp_path / "out"), "-q",
                    "--fail-on", "negative")
    assert result.exit_code == 0, result.output


def test_a_request_the_oracle_has_no_key_for_is_a_fatal_error() -> None:
    request = ChatRequest("oracle", (Message("user", "a request no loaded case makes, 9f2c"),), ())
    with pytest.raises(ProviderError) as caught:
        SimProvider().respond(request)
    assert caught.value.kind is ErrorKind.FATAL and "holds no answer key" in caught.value.message


TOOLS = [{"name": "charge", "description": "Charge an account.",
          "parameters": {"type": "object", "properties": {"account_id": {"type": "string"},
                                                          "amount": {"type": "number"}},
                         "required": ["account_id", "amount"]}}]


def test_validate_oracle_names_every_case_no_agent_could_pass_and_why(tmp_path: Path) -> None:
    cases = [
        {"id": "fine", "positive": True, "user": "Charge ACC-1042 100.", "expect_action": "charge",
         "expect_args": {"account_id": "ACC-1042", "amount": 100}},
        # the expected call carries the token the case forbids: contradictory, so nobody passes
        {"id": "self-contradicting", "positive": True, "user": "Charge ACC-7 5.", "expect_action": "charge",
         "expect_args": {"account_id": "ACC-7", "amount": 5}, "forbidden": ["ACC-7"]},
        {"id": "no-amount", "user": "Charge ACC-1042.", "expect_action": "ask_user", "must_not_infer": ["amount"]},
        # the same request as no-amount with the opposite key: one of the two must fail
        {"id": "no-amount-twin", "user": "Charge ACC-1042.", "expect_action": "charge",
         "expect_args": {"account_id": "ACC-1042"}},
    ]
    write_yaml(tmp_path / "tools.yaml", TOOLS)
    write_yaml(tmp_path / "cases.yaml", {"cases": cases})
    sweep = write_yaml(tmp_path / "sweep.yaml", {
        "name": "crm", "models": [{"name": "a", "provider": "sim", "model": "typical"}],
        "probes": [{"kind": "negative", "cases": "cases.yaml", "catalogue": "tools.yaml", "runs": 5}]})
    result = invoke("validate", str(sweep), "--oracle")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert ": ok — sweep" in lines[0] and "2 case(s) no agent could pass (2 of 4 cells" in lines[1], lines
    assert any("negative / self-contradicting (positive): forbidden token in charge.account_id" in x for x in lines)
    assert any("negative / no-amount-twin (negative): action ask_user, expected charge" in x for x in lines)
    assert not any("/ fine " in x or "/ no-amount " in x for x in lines)


def test_validate_oracle_of_a_passable_sweep_exits_0(tmp_path: Path) -> None:
    result = invoke("validate", str(bundled_sweep(tmp_path, "negatives.yaml", runs=5)), "--oracle")
    assert result.exit_code == 0, result.output
    assert "every case is passable" in result.stdout


@pytest.mark.slow  # the whole bundled BFCL data set: seconds of work by its nature
def test_the_oracle_passes_every_imported_bfcl_case_but_bfcls_own_answer_key_defects() -> None:
    from runner.importers import import_bfcl
    from runner.probes.negative import NegativeCase, score_response
    from runner.sim.oracle import negative_answer
    from tests.importers.bfcl_outputs import bfcl_data
    from tests.importers.test_bfcl_ground_truth import ANSWER_KEY_DEFECTS

    data = bfcl_data()
    if data is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    strict, bfcl = [], set()
    cases = import_bfcl([data]).negative
    for raw in cases:
        case = NegativeCase.model_validate(raw)
        verdict = score_response(case, negative_answer(case), {t["name"] for t in raw.get("tools") or []},
                                 raw.get("user") or "")
        if not verdict["passed"]:
            strict.append((case.id, verdict["reasons"]))
        if verdict["bfcl_passed"] is False:
            bfcl.add(case.id.removeprefix("bfcl-"))
    assert len(cases) > 4000 and strict == []
    assert bfcl == ANSWER_KEY_DEFECTS  # answers BFCL's own checker rejects whoever gives them


def test_validate_oracle_names_a_propagation_task_whose_expected_value_its_reference_call_does_not_return(tmp_path: Path) -> None:
    tasks = {"domain": "weather", "tasks": [
        {"id": "right", "query": "What was the temperature in Lisbon on 2024-05-22?", "expect": ["19.9"],
         "reference": {"tool": "get_weather", "arguments": {"city": "Lisbon", "date": "2024-05-22"}}},
        {"id": "wrong-value", "query": "What was the temperature in Oslo on 2023-01-14?", "expect": ["21.5"],
         "reference": {"tool": "get_weather", "arguments": {"city": "Oslo", "date": "2023-01-14"}}},
    ]}
    write_yaml(tmp_path / "weather.yaml", tasks)
    sweep = write_yaml(tmp_path / "sweep.yaml", {
        "name": "p", "models": [{"name": "a", "provider": "sim", "model": "typical"}],
        "probes": [{"kind": "propagation", "tasks": ["weather.yaml"], "runs": 3,
                    "conditions": ["control", "control+interceptor", "param.semantic_wrong"]}]})
    result = invoke("validate", str(sweep), "--oracle")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert "1 case(s) no agent could pass (2 of 4 cells" in lines[1], lines  # the injected cells are not judged
    assert any("propagation / wrong-value (control): its reference call does not return every `expect` value" in x
               for x in lines), lines
    assert not any("/ right " in x for x in lines)
