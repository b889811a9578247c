"""The grounding columns against 100 hand-labelled calls of the bundled sweeps (tests/probes/grounding_agreement.py).

The figures are asserted as floors, and every disagreement must be one the label file explains as a limit of
the rule: a new disagreement fails here until someone reads the call and says which side is wrong.
"""

from __future__ import annotations

import pytest

from tests.probes.grounding_agreement import Agreement, bundled_probes, labelled_calls, measure


@pytest.fixture(scope="module")
def agreement() -> Agreement:
    return measure(bundled_probes(), labelled_calls())


def test_the_sample_is_a_hundred_distinct_calls_from_both_probes() -> None:
    calls = labelled_calls()
    assert len(calls) == 100
    assert {c["probe"] for c in calls} == {"misselection", "negative"}
    keys = {(c["case_id"], c["condition"], c["tool"], str(sorted(c["arguments"].items()))) for c in calls}
    assert len(keys) == 100
    # both verdicts are represented, so agreement is not one class
    assert 10 <= sum(not c["ungrounded"] for c in calls) <= 90


def test_the_rule_agrees_with_the_hand_labels(agreement: Agreement) -> None:
    assert agreement.calls == 100
    assert agreement.calls_agree >= 97 and agreement.kappa() >= 0.9
    assert agreement.fields_agree / agreement.fields >= 0.98


def test_every_disagreement_is_a_documented_limit(agreement: Agreement) -> None:
    assert all(d["limit"] for d in agreement.disagreements), [d for d in agreement.disagreements if not d["limit"]]
