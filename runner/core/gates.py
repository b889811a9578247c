"""What a gate on an interval says, parsed: ``upper(decoy_called | ungroundable) <= 0.20``.

Why this exists apart from checking (``runner.analysis.gates``): a sweep's ``gates:`` are
checked for form when the sweep loads (the config layer), long before any summary exists.
A gate is ``BOUND(RATE [| CONDITION]) OP THRESHOLD``: BOUND is ``upper``, ``lower`` or
``rate``, OP one of ``<= < >= >``, THRESHOLD a proportion (``0.2``) or a percentage (``20%``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from runner.core.errors import UserError

_GATE = re.compile(r"^\s*(upper|lower|rate)\s*\(\s*([^|()]+?)\s*(?:\|\s*([^()]+?)\s*)?\)\s*(<=|>=|<|>)\s*"
                   r"([0-9]*\.?[0-9]+)\s*(%?)\s*$")
_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, "<": operator.lt, ">=": operator.ge,
                                                   ">": operator.gt}


@dataclass(frozen=True)
class Gate:
    """One parsed gate: the bound of a rate (in one condition, or every one) must satisfy ``op threshold``."""

    text: str
    bound: str
    rate: str
    condition: str | None
    op: str
    threshold: float

    def holds(self, value: float) -> bool:
        return _OPS[self.op](value, self.threshold)


def parse_gate(text: str, where: str = "gate") -> Gate:
    """``upper(decoy_called | ungroundable) <= 0.20`` → a ``Gate``. Raises ``UserError`` saying what is expected."""
    m = _GATE.match(text)
    if m is None:
        raise UserError(f"{where} {text!r} is not a gate",
                        hint='write BOUND(RATE | CONDITION) OP THRESHOLD, e.g. "upper(decoy_called | ungroundable) '
                             '<= 0.20"; BOUND is upper, lower or rate; the condition is optional')
    bound, rate, condition, op, number, pct = m.groups()
    threshold = float(number) / (100.0 if pct else 1.0)
    if not 0.0 <= threshold <= 1.0:
        raise UserError(f"{where} {text!r}: the threshold {number}{pct} is not a proportion in [0, 1]",
                        hint="write 0.2 or 20%")
    return Gate(text.strip(), bound, rate, condition, op, threshold)
