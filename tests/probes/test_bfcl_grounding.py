"""BFCL's right answers read as grounded: ≥ 99% of ground-truth calls whose values all occur in the question.

A bounded sample (four of the imported categories' files); ``python -m tests.probes.bfcl_grounding`` prints
the figure over every category with each exception. Skipped without bfcl-eval (``pip install --no-deps``).
"""

from __future__ import annotations

import pytest

from runner.probes.grounding import GroundingContext, check_call
from runner.probes.negative import NegativeCase, case_messages
from tests.importers.bfcl_outputs import bfcl_data
from tests.probes.bfcl_grounding import _SKIP, _choose, bfcl_cases, expected_calls, measure

pytestmark = pytest.mark.skipif(bfcl_data() is None, reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
SAMPLE = ("simple_java", "simple_javascript", "live_simple", "live_parallel_multiple")


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    return bfcl_cases(SAMPLE)


def test_ground_truth_calls_with_their_values_in_the_question_are_grounded(cases: list[dict]) -> None:
    fig = measure(cases)
    assert set(fig.by_category) == set(SAMPLE)
    assert fig.eligible >= 250
    assert fig.rate >= 0.99, fig.exceptions
    # the one known exception of the sample: a list of sentences, one per line, the last after "my accounts"
    assert {case for case, _ in fig.exceptions} <= {"bfcl-live_simple_105-62-0"}


def test_the_same_calls_with_one_value_invented_are_not(cases: list[dict]) -> None:
    """The rate above is not the rule waving everything through: swap one string for an invented one."""
    checked = flagged = 0
    for raw in cases:
        if "ground_truth" not in raw["bfcl"]:
            continue
        case = NegativeCase.model_validate(raw)
        context = GroundingContext.of_messages(case_messages(case))
        question = "\n".join(m.content for m in case_messages(case) if m.role == "user").lower()
        for tool, expected in expected_calls(raw):
            args = _choose(expected, question)
            name = next((k for k, v in args.items() if isinstance(v, str)), None) if args is not _SKIP else None
            if name is None:
                continue
            checked += 1
            flagged += bool(check_call(tool, {**args, name: "Zorvath-5521 Quillby"}, context))
    assert checked >= 200 and flagged == checked
