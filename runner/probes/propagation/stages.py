"""Stage reach of an injected error: did it enter a call (S1), get executed unrejected (S2)?

S3 (the final answer is wrong) is scored against the task's reference elsewhere; hop
rates P(S3 | S2) and P(S3 | S1) combine the two. The rules, each pinned by a test:

- **S1**: a step carries the injection. For a parameter injection that is the first
  tool call (a trial in which the agent called no tool never reaches S1, which is why
  a model that avoids tools looks "robust"); for a result injection, the first
  successful tool result.
- **S2**: the corrupted value was executed and the agent did not reject it:
  - *param*: the injected call's result is a success (a 4xx means the service
    refused it: ``tool_refused``);
  - and no later step rejects it: a later call of the same tool with a different
    value in the injected field (``recalled``; for a result injection any later call
    of that tool), an assistant reply that flags the value (``flagged``: "doesn't
    match", "seems wrong", "inconsistent"...), or the interceptor stopping the trial
    right there (``interceptor``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.probes.propagation.trace import Step

_FLAG_RE = re.compile(
    r"\b(?:invalid|inconsisten(?:t|cy)|does(?:n't| not) match|mismatch(?:ed)?|(?:seems|looks|appears) (?:to be )?"
    r"(?:wrong|off|incorrect|implausible|odd)|implausible|unexpected|not (?:the (?:one|date|city|order) )?what (?:you|i) asked|"
    r"instead of the|suspicious|corrupt(?:ed)?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Reach:
    s1: bool
    s2: bool
    #: how the corrupted value was stopped: tool_refused | recalled | flagged | interceptor (None if not stopped)
    rejected_by: str | None = None

    @property
    def stage(self) -> int:
        return 2 if self.s2 else 1 if self.s1 else 0


_MISSING = object()


def reach(steps: list[Step], target: str) -> Reach:
    at = next((i for i, s in enumerate(steps) if s.injected), None)
    if at is None:
        return Reach(False, False)
    injected = steps[at]
    after = steps[at + 1:]
    if target == "param":
        result = next((s for s in after if s.role == "result" and s.call_id == injected.call_id), None)
        if result is None or not result.ok:
            return Reach(True, False, "tool_refused")
        field = injected.injected_field
        bad = (injected.args or {}).get(field, _MISSING) if field else _MISSING
        later = after[after.index(result) + 1:]
        for s in later:
            if s.role == "call" and s.tool == injected.tool and field is not None and (s.args or {}).get(field, _MISSING) != bad:
                return Reach(True, False, "recalled")
    else:
        later = after
        for s in later:
            if s.role == "call" and s.tool == injected.tool:
                return Reach(True, False, "recalled")
    for s in later:
        if s.role == "interceptor":
            return Reach(True, False, "interceptor")
        if s.role == "assistant" and _FLAG_RE.search(s.text):
            return Reach(True, False, "flagged")
        if s.role == "call":
            break  # a flag after the agent moved on is about something else
    return Reach(True, True)
