"""Remedy learning: one rejection per (rule, model, parameter), applied everywhere after, on record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.providers.errors import Remedy
from runner.providers.managed import remedy_params
from runner.sim.serve import parse_rule
from tests.helpers.messages import heard
from tests.providers.conftest import http_sweep, trials, write

# per API: a realistic rename for each (Anthropic requires max_tokens, and calls "stop" "stop_sequences")
CASES = {
    "openai": (["drop:temperature", "rename:max_tokens:max_completion_tokens", "require:reasoning_effort=none:tools"],
               {"temperature": 0.2, "max_tokens": 300, "reasoning_effort": "low"},
               {"drop temperature", "rename max_tokens -> max_completion_tokens", "set reasoning_effort = 'none'"}),
    "anthropic": (["drop:temperature", "rename:stop:stop_sequences", "require:reasoning_effort=none:tools"],
                  {"temperature": 0.2, "stop": ["END"], "reasoning_effort": "low"},
                  {"drop temperature", "rename stop -> stop_sequences", "set reasoning_effort = 'none'"}),
}


# the 1,053-trial openai herd is the full suite's; the fast subset races the same rules with 351 anthropic trials
@pytest.mark.parametrize("api, runs", [pytest.param("openai", 9, marks=pytest.mark.slow), ("anthropic", 3)])
def test_one_rejection_per_rule_model_and_parameter(serve, tmp_path: Path, api: str, runs: int) -> None:  # type: ignore[no-untyped-def]
    RULES, PARAMS, EXPECTED = CASES[api]
    server = serve(rules=[parse_rule(r) for r in RULES], latency_ms=2)
    data = http_sweep(server.base_url, api, runs=runs, params=PARAMS, concurrency=64)
    data["engine"] = {"concurrency": 192}
    loaded = load_sweep(write(tmp_path, data))
    with heard(notes=True) as lines:
        result = runner.run(loaded, tmp_path / "out", quiet=True)
    assert result.total >= (1000 if api == "openai" else 300)
    assert result.counts == {"ok": result.total}

    stats = server.stats()
    models = {m["model"] for m in data["models"]}
    for rule in RULES:
        param = parse_rule(rule).param
        assert stats["rejections"][rule] == {m: {param: 1} for m in models}, rule
    assert stats["by_status"] == {"200": result.total, "400": len(RULES) * len(models)}

    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    learned = {(r["model_id"], r["remedy"]) for r in manifest["remedies"]}
    assert learned == {(m, e) for m in models for e in EXPECTED} and len(manifest["remedies"]) == len(learned)
    assert len(lines) == len(learned)  # one line when each was first learned
    assert all("remedy learned" in line for line in lines)

    df = trials(tmp_path / "out")
    assert df["remedies"].list.len().min() == 3
    assert set(df["remedies"].explode().unique().to_list()) == EXPECTED


def test_strict_params_fails_trials_instead(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(rules=[parse_rule("drop:temperature")])
    data = http_sweep(server.base_url, "openai", runs=1, params={"temperature": 0.2})
    with heard(notes=True) as lines:
        result = runner.run(load_sweep(write(tmp_path, data)), tmp_path / "out", quiet=True, strict_params=True)
    df = trials(tmp_path / "out")
    assert df.height == result.total and (df["status"] == "error").all()
    assert (df["error_kind"] == "rejected_param").all() and df["decoy_called"].is_null().all()
    assert df["error"].str.contains("--strict-params").all()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["remedies"] == [] and manifest["strict_params"] is True and not lines


def test_resume_applies_remedies_already_learned(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rules = [parse_rule("drop:temperature")]
    first = serve(rules=rules)
    path = write(tmp_path, http_sweep(first.base_url, "openai", runs=1, params={"temperature": 0.2}))
    out = tmp_path / "out"
    runner.run(load_sweep(path), out, quiet=True)
    assert len(json.loads((out / "manifest.json").read_text())["remedies"]) == 3
    # lose every row (as if killed before the first flush) and resume against a fresh server on the same port
    shutil.rmtree(out / "trials")
    first.stop()
    second = serve(rules=rules, port=first.port)
    with heard(notes=True) as lines:
        result = runner.run(load_sweep(path), out, quiet=True)
    assert result.counts == {"ok": result.total}
    assert second.stats()["by_status"] == {"200": result.total} and not lines
    assert trials(out)["remedies"].to_list() == [["drop temperature"]] * result.total


def test_remedies_on_plain_params() -> None:
    params, applied = remedy_params({"temperature": 0.2, "max_tokens": 5, "top_p": 1},
                                    [Remedy("drop", "temperature"), Remedy("rename", "max_tokens", "max_output_tokens"),
                                     Remedy("set", "top_p", value=1), Remedy("drop", "absent")])
    assert params == {"max_output_tokens": 5, "top_p": 1}
    assert applied == ["drop temperature", "rename max_tokens -> max_output_tokens"]
    assert pl.Series(applied).dtype == pl.String


#: per vendor: the rule the server answers in the vendor's words (the parameter named as sent), the params sent,
#: the remedy learned
VENDORS = {
    "gemini": ("drop:topK", {"top_k": 5}, "drop topK"),
    "vertex": ("drop:topK", {"top_k": 5}, "drop topK"),
    "bedrock": ("drop:top_k", {"top_k": 5}, "drop top_k"),
    "azure-openai": ("drop:temperature", {"temperature": 0.2}, "drop temperature"),
}


@pytest.mark.parametrize("provider", sorted(VENDORS))
def test_each_vendors_own_rejection_is_learned_once_per_model(wire, tmp_path: Path, provider: str) -> None:  # type: ignore[no-untyped-def]
    rule, params, expected = VENDORS[provider]
    server, base_url, fields = wire(provider, rules=[parse_rule(rule)])
    data = http_sweep(base_url, provider, runs=1, params=params, **fields)
    result = runner.run(load_sweep(write(tmp_path, data)), tmp_path / "out", quiet=True)
    assert result.counts == {"ok": result.total}  # every trial answered, after its model's one rejection
    models = {m["model"] for m in data["models"]}
    assert server.stats()["rejections"][rule] == {m: {parse_rule(rule).param: 1} for m in models}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {(r["model_id"], r["remedy"]) for r in manifest["remedies"]} == {(m, expected) for m in models}
