"""bfcl_passed: BFCL's rules, unit by unit, and agreement with BFCL's own AST checker on perturbed outputs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from runner.importers import import_bfcl
from runner.probes.negative.bfcl_checker import BfclKey, check, standardise
from tests.importers.bfcl_outputs import bfcl_ast_checker, bfcl_data, perturbations

FN = {"name": "math.area", "parameters": {"type": "dict", "required": ["shape"], "properties": {
    "shape": {"type": "string"}, "size": {"type": "integer"}, "scale": {"type": "float"},
    "exact": {"type": "boolean"}, "note": {"type": "string"},
    "meta": {"type": "dict"}, "parts": {"type": "array", "items": {"type": "dict"}}}}}
TRUTH = [{"math.area": {"shape": ["Circle"], "size": [10], "scale": [2.0, ""], "exact": [True, ""], "note": [""],
                        "meta": [{"unit": ["cm", ""], "label": ["Science"]}, ""],
                        "parts": [[{"name": ["a"], "w": [1, ""]}], ""]}}]
KEY = BfclKey(category="simple_python", functions=[FN], ground_truth=TRUTH)
OK = {"shape": "circle", "size": 10}


def passes(args: dict[str, Any] | None, *more: dict[str, Any], name: str = "math_area") -> bool:
    return check(KEY, [(name, args), *((name, m) for m in more)]) is None


def test_option_lists_nested_dicts_and_lists_of_dicts() -> None:
    assert passes(OK)
    assert passes({**OK, "meta": {"label": "science"}})                      # optional key left out
    assert not passes({**OK, "meta": {"label": ["Science"]}})               # an option list is not a value
    assert not passes({**OK, "meta": {"label": "Science", "x": 1}})         # key outside the answer
    assert passes({**OK, "parts": [{"name": "a"}]})
    assert not passes({**OK, "parts": [{"name": "a"}, {"name": "a"}]})


def test_omitted_only_count_and_types() -> None:
    assert not passes({**OK, "note": "hi"})                                  # [""] alone: must be left out
    assert not passes(OK, OK)                                                # one call, exactly
    assert not passes({**OK, "size": "10"}) and not passes({**OK, "size": 10.0})
    assert passes({**OK, "scale": 2}) and passes({**OK, "scale": 2.0})     # an int is a float in Python
    assert not passes({**OK, "exact": "true"}) and not passes({**OK, "exact": None})
    assert not passes({**OK, "extra": None}) and not passes({**OK, "extra": ""})
    assert not passes(OK, name="math_volume") and not passes(None)


def test_string_normalisation_is_bfcls() -> None:
    assert standardise("3x**2 + 2x - 1") == standardise("3x**2+2x-1")
    assert passes({**OK, "shape": " CIR-cle."})
    assert not passes({**OK, "shape": "circles"})


def test_irrelevance_relevance_and_parallel() -> None:
    irrelevant = BfclKey(category="irrelevance")
    assert check(irrelevant, []) is None and check(irrelevant, [("f", None)]) is None   # undecodable: no call
    assert check(irrelevant, [("f", {})]) is not None
    relevant = BfclKey(category="live_relevance")
    assert check(relevant, [("f", {})]) is None and check(relevant, [("f", None)]) is not None
    par = BfclKey(category="parallel", functions=[FN], ground_truth=[
        {"math.area": {"shape": ["circle"]}}, {"math.area": {"shape": ["square"]}}])
    assert check(par, [("math_area", {"shape": "square"}), ("math_area", {"shape": "circle"})]) is None
    assert check(par, [("math_area", {"shape": "square"}), ("math_area", {"shape": "square"})]) is not None


def test_java_and_javascript_values_are_source_text() -> None:
    fn = {"name": "Cache.put", "parameters": {"type": "dict", "required": ["ttl"], "properties": {
        "ttl": {"type": "long"}, "keys": {"type": "ArrayList", "items": {"type": "String"}},
        "on": {"type": "boolean"}}}}
    java = BfclKey(category="simple_java", functions=[fn],
                   ground_truth=[{"Cache.put": {"ttl": [30], "keys": [["a", "b"]], "on": [True, ""]}}])
    good = {"ttl": "30L", "keys": 'new ArrayList<>(Arrays.asList("a", "b"))', "on": "true"}
    assert check(java, [("Cache_put", good)]) is None
    assert check(java, [("Cache_put", {**good, "ttl": 30})]) is not None                # not a string
    assert check(java, [("Cache_put", {**good, "ttl": "30"})]) is not None              # an int, not a long


@pytest.mark.slow  # the whole bundled BFCL data set, 37,306 perturbed outputs: seconds of work by its nature
@pytest.mark.skipif(bfcl_data() is None, reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
def test_bfcl_passed_agrees_with_bfcls_own_ast_checker_on_perturbed_outputs() -> None:
    reference = bfcl_ast_checker()
    outcomes: Counter[tuple[bool, bool]] = Counter()
    disagreements: Counter[tuple[str, str]] = Counter()
    data = bfcl_data()
    assert data is not None
    for raw in import_bfcl([data]).negative:
        key = raw["bfcl"]
        if "ground_truth" not in key:
            continue
        parsed = BfclKey.model_validate(key)
        for label, output in perturbations(key):
            mine = check(parsed, output) is None
            agree = mine == reference(key["functions"], output, key["ground_truth"], key["category"])
            outcomes[(label == "truth", agree)] += 1
            if not agree:
                disagreements[(key["category"], label)] += 1
    total = sum(outcomes.values())
    agreed = outcomes[(True, True)] + outcomes[(False, True)]
    assert total - outcomes[(True, True)] - outcomes[(True, False)] >= 2000
    assert agreed / total >= 0.995, disagreements.most_common(10)
    assert not disagreements, disagreements.most_common(10)   # measured: 37,306 of 37,306 agree
