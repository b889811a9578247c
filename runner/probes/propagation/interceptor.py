"""The runtime interceptor: checks each step of the loop and abstains, with a reason, when one fails.

It runs in two places. After every tool result: a result that breaks the tool's
declared output schema (wrong type, out of range, a required field missing) stops
the trial at once (``invalid_result``) — letting the agent go on would ground its
answer on a corrupt observation. At the final answer, in this order (the first that
fires is the reason given):

1. ``no_tool_claim``: a fabrication rule fires (see ``fabrication.py``).
2. ``success_after_failure``: the answer claims an action succeeded while the last
   tool call failed and no later call succeeded.
3. ``tool_error``: a tool call failed, no later call succeeded, and the answer does
   not acknowledge the failure ("could not", "already shipped", "not found"...).
4. ``ungrounded_number``: the answer states a number no observation and no request
   message contains (list markers like "2." are not numbers; dates, times and ids
   are whole tokens; the parts of a grounded date ground "May 22nd, 2024").

Every arm computes these flags (``interceptor_flags``), so the control arm shows what
the interceptor *would* have stopped; only the ``+interceptor`` arms act on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runner.probes.answertext import ACKNOWLEDGES_FAILURE_RE, claims_action, ungrounded_numbers
from runner.probes.propagation.fabrication import fabrication_rules
from runner.probes.propagation.toolsim.validation import problems
from runner.probes.propagation.trace import Step, observations

RULES = ("invalid_result", "no_tool_claim", "success_after_failure", "tool_error", "ungrounded_number")


def check_result(step: Step, returns: Mapping[str, Any] | None) -> str | None:
    """The ``invalid_result`` reason for a successful result that breaks its declared schema."""
    if not step.ok or not returns:
        return None
    data = step.data
    found = problems(returns, data) if data is not None else ["the body is not JSON"]
    return f"invalid_result: {step.tool} returned {found[0]}" if found else None


def check_final(steps: list[Step], answer: str, request_texts: Iterable[str]) -> list[str]:
    """Reasons to abstain on ``answer``, most specific first (empty: let it through)."""
    request_texts = list(request_texts)
    reasons: list[str] = []
    fabricated = fabrication_rules(steps, answer, request_texts)
    if fabricated:
        reasons.append(f"no_tool_claim: {', '.join(fabricated)}")
    results = [s for s in steps if s.role == "result"]
    last_ok = max((i for i, s in enumerate(results) if s.ok), default=-1)
    failed_after = [s for i, s in enumerate(results) if not s.ok and i > last_ok]
    if failed_after:
        failure = failed_after[-1]
        if claims_action(answer):
            reasons.append(f"success_after_failure: the answer claims success but {failure.tool} failed ({failure.code})")
        elif not ACKNOWLEDGES_FAILURE_RE.search(answer):
            reasons.append(f"tool_error: {failure.tool} failed ({failure.code}) and the answer does not say so")
    loose = ungrounded_numbers(answer, [*observations(steps), *request_texts])
    if loose:
        reasons.append(f"ungrounded_number: {', '.join(loose[:3])} in no observation or request")
    return reasons


def rule_of(reason: str) -> str:
    return reason.split(":", 1)[0]
