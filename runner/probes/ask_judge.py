"""An opt-in LLM judge of asking, and its agreement with the deterministic rule (``replies.py``).

The rule in ``runner.probes.replies`` is what every probe scores with: deterministic,
documented, the same on every machine. A judge model reads more than a rule can (a
question phrased as a statement, a request in another language), but is neither of
those things, so it never replaces the rule: it is asked beside it, and what is
reported is how often the two agree (raw agreement and Cohen's kappa), so a reader
can see whether the rule misses what a careful reader would count.

``judge_messages`` builds the request; ``parse_verdict`` reads ``ASKS: YES|NO``;
``agreement`` compares the two columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from runner.core.types import Message

SYSTEM = (
    "You check one reply of an assistant to a user's request. Answer ASKS: YES if the reply, in the "
    "assistant's own words, asks the user for information or a decision that the request did not give. "
    "Answer ASKS: NO if it asks nothing, only repeats the user's own question, is an empty reply, is "
    "chat-template debris (text after markers such as <USER>, [INST], <<SYS>>, <start_of_turn>user), "
    "or only offers further help. Reply with one line: ASKS: YES or ASKS: NO."
)

_VERDICT_RE = re.compile(r"ASKS\s*:\s*(YES|NO)\b", re.IGNORECASE)


def judge_messages(request: str, reply: str) -> tuple[Message, ...]:
    return (Message("system", SYSTEM),
            Message("user", f"REQUEST:\n{request}\n\nREPLY:\n{reply if reply.strip() else '(empty)'}"))


def parse_verdict(text: str) -> bool | None:
    """True / False from ``ASKS: YES|NO``; None when the judge gave no verdict line."""
    m = _VERDICT_RE.search(text or "")
    return None if m is None else m.group(1).upper() == "YES"


@dataclass(frozen=True)
class Agreement:
    n: int            # pairs where the judge gave a verdict
    unparsed: int     # judge replies without a verdict (left out of n)
    agree: float      # share of the n where judge and rule agree
    kappa: float      # Cohen's kappa (nan when one side is constant)


def agreement(rule: Sequence[bool], judge: Sequence[bool | None]) -> Agreement:
    pairs = [(r, j) for r, j in zip(rule, judge, strict=True) if j is not None]
    n = len(pairs)
    if n == 0:
        return Agreement(0, len(judge), float("nan"), float("nan"))
    po = sum(r == j for r, j in pairs) / n
    pr = sum(r for r, _ in pairs) / n
    pj = sum(j for _, j in pairs) / n
    pe = pr * pj + (1 - pr) * (1 - pj)
    kappa = (po - pe) / (1 - pe) if pe < 1 else float("nan")
    return Agreement(n, len(judge) - n, po, kappa)
