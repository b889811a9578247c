"""BFCL's installed data: every category imported, and every ground-truth answer passes both verdicts.

Skipped without bfcl-eval (a test-only dependency: ``pip install --no-deps bfcl-eval==2026.3.23``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from runner.core.types import ChatResponse, ToolCall
from runner.importers import import_bfcl
from runner.probes.negative import NegativeCase, score_response
from tests.importers.bfcl_outputs import Output, bfcl_ast_checker, bfcl_data, ground_truth_output

DATA = bfcl_data() or Path("bfcl_eval-not-installed")
pytestmark = pytest.mark.skipif(bfcl_data() is None, reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval)")

#: answers BFCL's own checker rejects too: a required parameter missing from the key, a parameter outside
#: the function's schema, Java "any" list items compared with typed values, a HashMap key not given as options
ANSWER_KEY_DEFECTS = {
    "live_multiple_507-149-4", "live_multiple_964-207-0", "live_simple_106-63-0", "live_simple_112-68-0",
    "live_multiple_862-181-3", "simple_java_36", "simple_java_65", "simple_java_64",
}


def response(output: Output) -> ChatResponse:
    return ChatResponse(tool_calls=tuple(
        ToolCall(name=n, raw_arguments=json.dumps(a), arguments=a) for n, a in output))


@pytest.mark.slow  # the whole bundled BFCL data set: seconds of work by its nature
def test_every_category_bfcl_scores_by_its_ast_or_relevance_checker_is_imported_whole() -> None:
    result = import_bfcl([DATA])
    imported = Counter(c["origin"].split(":")[1] for c in result.negative)
    assert imported == result.in_files, {k: (imported[k], n) for k, n in result.in_files.items() if imported[k] != n}
    assert set(imported) == {
        "irrelevance", "live_irrelevance", "live_relevance", "simple_python", "simple_java", "simple_javascript",
        "multiple", "live_simple", "live_multiple", "parallel", "parallel_multiple", "live_parallel",
        "live_parallel_multiple", "multi_turn_miss_param", "multi_turn_miss_func"}
    assert set(result.skipped_files) == {f"BFCL_v4_{c}.json" for c in (
        "multi_turn_base", "multi_turn_long_context", "memory", "web_search", "format_sensitivity")}
    assert all(result.skipped_files.values())


@pytest.mark.slow  # the whole bundled BFCL data set: seconds of work by its nature
def test_every_ground_truth_answer_passes_both_verdicts() -> None:
    reference = bfcl_ast_checker()
    failed_strict, failed_bfcl, differ, n = [], set(), [], 0
    for raw in import_bfcl([DATA]).negative:
        key = raw["bfcl"]
        if "ground_truth" not in key:
            if raw["expect_action"] in ("no_call", "ask_user"):
                # the answer to an irrelevance case, or to a multi-turn turn whose ground truth is empty:
                # no call (and, for trialgrid's must-ask stance, a question)
                case = NegativeCase.model_validate(raw)
                verdict = score_response(case, ChatResponse(text="Which one do you mean?"), set(), "")
                assert verdict["passed"] and verdict["bfcl_passed"], case.id
            continue
        n += 1
        case = NegativeCase.model_validate(raw)
        output = ground_truth_output(key)
        verdict = score_response(case, response(output), {t["name"] for t in raw["tools"]}, "")
        theirs = reference(key["functions"], output, key["ground_truth"], key["category"])
        if not verdict["passed"]:
            failed_strict.append((case.id, verdict["reasons"]))
        if not verdict["bfcl_passed"]:
            failed_bfcl.add(case.id.removeprefix("bfcl-"))
        if verdict["bfcl_passed"] != theirs:
            differ.append(case.id)
    assert n == 2501  # every AST-scored entry of the wheel
    assert failed_strict == []
    assert failed_bfcl == ANSWER_KEY_DEFECTS
    assert differ == []
