"""Case files checked against their catalogue at load: each mistake one located line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.config.sweep import load_sweep
from tests.helpers.cli import invoke, invoke_error_line
from tests.helpers.files import CONFIGS, bundled_sweep, write_yaml

TOOLS = [
    {"name": "find_prospect", "description": "Find a prospect.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                    "required": ["query"]}},
    {"name": "charge", "description": "Charge an account.",
     "parameters": {"type": "object", "properties": {
         "account_id": {"type": "string"}, "amount": {"type": "number"},
         "currency": {"type": "string", "enum": ["EUR", "USD"]},
         "meta": {"type": "object", "properties": {"note": {"type": "string"}}}},
         "required": ["account_id", "amount"]}},
]
POSITIVE = {"id": "charge-ok", "positive": True, "user": "Charge ACC-1042 100 EUR.", "expect_action": "charge",
            "expect_args": {"account_id": "ACC-1042", "amount": 100, "currency": "EUR"}}
NEGATIVE = {"id": "charge-no-amount", "user": "Charge ACC-1042.", "expect_action": "ask_user",
            "must_not_infer": ["amount"], "allow_ask_fields": ["amount"]}


def _negative_sweep(tmp_path: Path, *cases: dict[str, Any]) -> Path:
    write_yaml(tmp_path / "tools.yaml", TOOLS)
    write_yaml(tmp_path / "cases.yaml", {"cases": list(cases)})
    return write_yaml(tmp_path / "sweep.yaml", {
        "name": "crm", "models": [{"name": "a", "provider": "sim", "model": "typical"}],
        "probes": [{"kind": "negative", "cases": "cases.yaml", "catalogue": "tools.yaml", "runs": 5}]})


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_clean_case_file_loads(tmp_path: Path) -> None:
    loaded = load_sweep(_negative_sweep(tmp_path, POSITIVE, NEGATIVE, POSITIVE | {"id": "p2"}))
    assert not [w for w in loaded.warnings if "case" in w]


@pytest.mark.parametrize(("case", "key", "located", "words"), [
    (NEGATIVE | {"must_not_infer": ["amout"]}, "cases[1].must_not_infer[0]", "- amout",
     "must_not_infer names 'amout', a field no tool of the case has"),
    (NEGATIVE | {"must_not_infer": {"find_prospect.amount": None}}, "cases[1].must_not_infer.find_prospect.amount",
     "find_prospect.amount", "must_not_infer names 'amount', a field no tool of the case has"),
    (POSITIVE | {"id": "p", "expect_args": {"qeury": "x"}, "expect_action": "find_prospect"}, "cases[1].expect_args.qeury",
     "qeury", "expect_args key 'qeury' is not an argument of find_prospect"),
    (POSITIVE | {"id": "p", "expect_args": {"account_id": "A", "amount": 5, "currency": "JPY"}},
     "cases[1].expect_args.currency", "currency: JPY", "'JPY' is not one of the schema's enum (EUR, USD)"),
    (POSITIVE | {"id": "p", "expect_args": {"account_id": "A", "amount": "a hundred"}},
     "cases[1].expect_args.amount", "amount: a hundred", "'a hundred' cannot be a value of type number"),
    (POSITIVE | {"id": "p", "expect_calls": [{"tool": "charge", "args": {"acount_id": "A"}}], "expect_action": None},
     "cases[1].expect_calls[0].args.acount_id", "acount_id", "expect_args key 'acount_id' is not an argument of charge"),
])
def test_an_unpassable_case_is_one_located_error(tmp_path: Path, case: dict[str, Any], key: str, located: str,
                                                 words: str) -> None:
    sweep = _negative_sweep(tmp_path, POSITIVE, case)
    for command in ("validate", "run"):
        line = invoke_error_line(invoke(command, str(sweep)))
        assert words in line, line
        assert f"cases.yaml:{_line_of(tmp_path / 'cases.yaml', located)} {key}:" in line, line


def test_several_mistakes_are_listed_and_counted(tmp_path: Path) -> None:
    sweep = _negative_sweep(tmp_path, POSITIVE, NEGATIVE | {"must_not_infer": ["amout", "ammount"]})
    result = invoke("validate", str(sweep))  # validate lists every problem on a line of its own
    lines = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 2
    assert "must_not_infer[0]" in lines[0] and "'amout'" in lines[0] and "must_not_infer[1]" in lines[1]
    assert "+1 more problem" in invoke_error_line(invoke("run", str(sweep)))  # run: the first, and a count


def test_a_value_the_scorer_matches_as_text_is_no_mistake(tmp_path: Path) -> None:
    # "100" for a number, 7 for a string: the scorer compares scalar text, so a schema-legal call passes
    case = POSITIVE | {"id": "p", "expect_args": {"account_id": 7, "amount": "100", "currency": {"one_of": ["JPY", "EUR"]}}}
    load_sweep(_negative_sweep(tmp_path, POSITIVE, case))


def test_allow_ask_fields_outside_the_schema_is_a_warning(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match=r"cases.yaml:\d+: case 'charge-no-amount': allow_ask_fields names 'sum'"):
        load_sweep(_negative_sweep(tmp_path, POSITIVE, NEGATIVE | {"allow_ask_fields": ["sum"]}, POSITIVE | {"id": "p"}))


def test_expected_tool_not_in_the_catalogue_is_an_error_in_misselection_too(tmp_path: Path) -> None:
    triples = write_yaml(tmp_path / "triples.yaml", {"triples": [{
        "id": "t1", "expected_tool": "fetch_invoice", "ungroundable": "Pull invoices from our billing provider.",
        "groundable_unknown": "Pull invoices from Vantrel Billing.", "groundable_known": "Pull invoices from Stripe."}]})
    sweep = write_yaml(tmp_path / "sweep.yaml", {
        "name": "m", "models": [{"name": "a", "provider": "sim", "model": "typical"}],
        "probes": [{"kind": "misselection", "cases": str(triples),
                    "catalogue": str(CONFIGS / "misselection/tools.json"), "runs": 5}]})
    line = invoke_error_line(invoke("validate", str(sweep)))
    assert f"triples.yaml:{_line_of(triples, 'fetch_invoice')} triples[0].expected_tool:" in line
    assert "expected_tool 'fetch_invoice' is not a tool in the catalogue" in line and "did you mean 'fetch_invoices'" in line


@pytest.mark.parametrize("name", ["quickstart.yaml", "negatives.yaml", "phantom.yaml", "propagation.yaml",
                                  "local-model.yaml"])
def test_every_bundled_sweep_lints_clean(tmp_path: Path, name: str) -> None:
    import warnings

    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        load_sweep(bundled_sweep(tmp_path, name, runs=5))
    assert not [str(w.message) for w in heard if "case " in str(w.message) or "triple" in str(w.message)]


def test_an_unknown_key_of_probes_1_lists_that_probes_own_keys(tmp_path: Path) -> None:
    sweep = _negative_sweep(tmp_path, POSITIVE, NEGATIVE)
    # probes[0] a misselection probe (it has decoy_name), probes[1] a negative one given decoy_name by mistake
    write_yaml(sweep, {"name": "crm", "models": [{"name": "a", "provider": "sim", "model": "typical"}], "probes": [
        {"kind": "misselection", "cases": str(CONFIGS / "misselection/triples.yaml"),
         "catalogue": str(CONFIGS / "misselection/tools.json")},
        {"kind": "negative", "cases": "cases.yaml", "catalogue": "tools.yaml", "decoy_name": "x"}]})
    line = invoke_error_line(invoke("validate", str(sweep)))
    assert "probes[1].decoy_name: unknown key (valid keys: kind, name, runs, conditions, cases, catalogue, " \
           "mcp_server, system)" in line, line
