"""The budget stop: a row sink wrapper that adds each row's cost and says when the budget is spent.

Prices and the budget are what the sweep says (``runner.config.cost``); this is where
a run enforces them. The run's session (``runner.execution.session``) puts one meter in
front of its sink, whatever the backend, so every row that reaches the output is
counted once: rows one at a time (local, batch) or record batches (Ray's driver). The
engine asks ``exhausted`` before it starts a new trial and after each row: once spent,
the trials in flight are cancelled and write no row (a resume runs them), so what the
output records overshoots by at most the rows written at the same moment; the requests a
cancelled trial had sent may still be billed (at most one engine window).

Batch mode pays before it sees a row: a batch, once submitted, is answered whatever it
costs. So its trials are priced *before* they are submitted (``estimate``, from the
request each probe built) and ``reserve``\\ d; a reservation counts as spent until the
trial's row arrives with its real tokens, which then replace it. ``room`` is what is
left for the next reservation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from runner.config.cost import PER_MILLION, Budget, ModelPrice
from runner.core.types import ChatRequest
from runner.providers.estimate import estimate_usage


@dataclass
class CostMeter:
    """Counts spend as rows pass to the real sink; ``exhausted`` once a budget cap is reached."""

    sink: Any
    prices: Mapping[str, ModelPrice]
    budget: Budget
    usd: float = 0.0
    tokens: int = 0
    _by_model: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: trial id → (usd, tokens) estimated for a trial submitted but not yet written (batch mode)
    _reserved: dict[str, tuple[float, int]] = field(default_factory=dict)
    _reserved_usd: float = 0.0
    _reserved_tokens: int = 0

    def __post_init__(self) -> None:
        self._by_model = {m: (p.input / PER_MILLION, p.output / PER_MILLION) for m, p in self.prices.items()}

    def append(self, row: Mapping[str, Any]) -> None:
        self.sink.append(row)
        i, o = row.get("input_tokens") or 0, row.get("output_tokens") or 0
        self.tokens += i + o
        rate = self._by_model.get(row["model"])
        if rate is not None:
            self.usd += i * rate[0] + o * rate[1]
        self._settle(row.get("trial_id"))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """A record batch of rows (Ray's driver writes them so), counted as its rows would be."""
        self.sink.write_batch(batch)
        if batch.num_rows == 0:
            return
        names = batch.schema.names
        models = batch.column(names.index("model"))
        inp = pc.fill_null(batch.column(names.index("input_tokens")), 0)
        out = pc.fill_null(batch.column(names.index("output_tokens")), 0)
        self.tokens += int(pc.sum(inp).as_py() or 0) + int(pc.sum(out).as_py() or 0)
        for model, (rate_in, rate_out) in self._by_model.items():
            mine = pc.equal(models, model)
            self.usd += (int(pc.sum(pc.filter(inp, mine)).as_py() or 0) * rate_in
                         + int(pc.sum(pc.filter(out, mine)).as_py() or 0) * rate_out)
        if self._reserved:
            for trial_id in batch.column(names.index("trial_id")).to_pylist():
                self._settle(trial_id)

    def estimate(self, model: str, request: ChatRequest) -> tuple[float, int]:
        """(USD, tokens) one request of ``model`` may cost: input from its text, output from its cap.

        Deliberately on the high side (``runner.providers.estimate.estimate_usage``): a
        budget is a promise not to pass it.
        """
        i, o = estimate_usage(request)
        rate = self._by_model.get(model, (0.0, 0.0))
        return i * rate[0] + o * rate[1], i + o

    def room(self) -> tuple[float | None, int | None]:
        """What may still be reserved or spent before a cap is reached (None: that cap is not set)."""
        b = self.budget
        usd = None if b.usd is None else b.usd - self.usd - self._reserved_usd
        tokens = None if b.tokens is None else b.tokens - self.tokens - self._reserved_tokens
        return usd, tokens

    def fits(self, usd: float, tokens: int) -> bool:
        """Whether a further cost of ``usd`` and ``tokens`` stays within every cap."""
        room_usd, room_tokens = self.room()
        return (room_usd is None or usd <= room_usd) and (room_tokens is None or tokens <= room_tokens)

    def reserve(self, trial_id: str, usd: float, tokens: int) -> None:
        """Count ``trial_id``'s estimated cost as spent until its row is written."""
        self._settle(trial_id)
        self._reserved[trial_id] = (usd, tokens)
        self._reserved_usd += usd
        self._reserved_tokens += tokens

    def _settle(self, trial_id: str | None) -> None:
        held = self._reserved.pop(trial_id, None) if trial_id is not None else None
        if held is not None:
            self._reserved_usd -= held[0]
            self._reserved_tokens -= held[1]

    def exhausted(self) -> bool:
        b = self.budget
        usd, tokens = self.usd + self._reserved_usd, self.tokens + self._reserved_tokens
        return (b.usd is not None and usd >= b.usd) or (b.tokens is not None and tokens >= b.tokens)

    def reason(self) -> str:
        spent = f"${self.usd:,.4f} and {self.tokens:,} tokens spent"
        if self._reserved:
            spent += f", ${self._reserved_usd:,.4f} and {self._reserved_tokens:,} more estimated for submitted batches"
        return f"budget of {self.budget.describe()} reached ({spent})"
