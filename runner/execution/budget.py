"""The budget stop: a row sink wrapper that adds each row's cost and says when the budget is spent.

Prices and the budget are what the sweep says (``runner.config.cost``); this is where
a run enforces them. The engine asks ``meter.exhausted`` before it starts a new trial;
trials already in flight still finish and are written, so a run overshoots by at most
one engine window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.config.cost import PER_MILLION, Budget, ModelPrice


@dataclass
class CostMeter:
    """Counts spend as rows pass to the real sink; ``exhausted`` once a budget cap is reached."""

    sink: Any
    prices: Mapping[str, ModelPrice]
    budget: Budget
    usd: float = 0.0
    tokens: int = 0
    _by_model: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_model = {m: (p.input / PER_MILLION, p.output / PER_MILLION) for m, p in self.prices.items()}

    def append(self, row: Mapping[str, Any]) -> None:
        self.sink.append(row)
        i, o = row.get("input_tokens") or 0, row.get("output_tokens") or 0
        self.tokens += i + o
        rate = self._by_model.get(row["model"])
        if rate is not None:
            self.usd += i * rate[0] + o * rate[1]

    def exhausted(self) -> bool:
        b = self.budget
        return (b.usd is not None and self.usd >= b.usd) or (b.tokens is not None and self.tokens >= b.tokens)

    def reason(self) -> str:
        spent = f"${self.usd:,.4f} and {self.tokens:,} tokens spent"
        return f"budget of {self.budget.describe()} reached ({spent})"
