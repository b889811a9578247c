"""What trials cost: a price table per model, spend from token counts, and a budget that stops a run.

Every row already carries ``input_tokens`` and ``output_tokens`` (summed over the
trial's calls). A sweep's ``prices`` turn them into dollars; ``budget`` caps what a
sweep may spend over all its sessions. Neither is part of the sweep's identity (like
``engine``): raising a budget or correcting a price must not turn the same
measurement into a different sweep, so a stopped run resumes with a raised budget.

The budget is enforced by ``runner.execution.budget.CostMeter``, a row sink wrapper: every row that reaches
the sink adds its cost, and the engine asks ``meter.exhausted`` before it starts a
new trial. Trials already in flight when the budget is reached still finish and are
written (a trial is never cut off half-paid), so a run can overshoot by at most the
trials in flight — one engine window (``engine.concurrency``).

What an output already spent is read by ``runner.output.Output.spend`` (each trial once, its newest row):
pricing lives here, reading an output one layer up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.core.errors import CONNECTION_FAILED

if TYPE_CHECKING:  # polars loads when a cost is computed: validate and the sweep's loading do not pay for it
    import polars as pl

PER_MILLION = 1_000_000.0


class ModelPrice(BaseModel):
    """US dollars per million tokens, as provider price lists quote them."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input: float = Field(ge=0, description="USD per million input (prompt) tokens")
    output: float = Field(ge=0, description="USD per million output (completion) tokens")
    source: str | None = Field(default=None, description="where the numbers came from, when not the sweep's own "
                               "(a list price: the table and its version)")

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / PER_MILLION


class Budget(BaseModel):
    """Stop scheduling new trials once the sweep's spend reaches either cap."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    usd: float | None = Field(default=None, gt=0, description="dollars, from token counts and `prices`")
    tokens: int | None = Field(default=None, gt=0, description="input + output tokens over all models")

    @model_validator(mode="after")
    def _one_cap(self) -> Budget:
        if self.usd is None and self.tokens is None:
            raise ValueError("a budget needs `usd`, `tokens` or both")
        return self

    def describe(self) -> str:
        parts = ([f"${self.usd:,.2f}"] if self.usd is not None else []) + \
                ([f"{self.tokens:,} tokens"] if self.tokens is not None else [])
        return " / ".join(parts)


#: a sweep's price for a model that is its vendor's list price (``list_price``), looked up when the sweep loads
LIST_PRICE = "list"
#: trialgrid's provider → the provider id of genai-prices' table
_LIST_PROVIDERS = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic",
                   "azure-openai": "azure", "gemini": "google", "vertex": "google", "bedrock": "aws"}
#: tokens a list price is read at: a small request, below the long-context tiers some models charge more from
_PRICED_TOKENS = 1_000


def list_price(provider: str, model_id: str) -> ModelPrice:
    """The vendor's current list price of ``model_id`` (standard tier, a small request), from genai-prices'
    table (the ``prices`` extra). Why a library: a price list kept here would be stale by the next release;
    genai-prices is kept against the vendors' pages. ``ValueError`` (one line) when it cannot be had."""
    provider_id = _LIST_PROVIDERS.get(provider)
    if provider_id is None:
        raise ValueError(f"no list prices for provider {provider} (give its price as {{input: USD, output: USD}})")
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        raise ValueError(f"a list price needs the prices extra: pip install 'trialgrid[prices]' (or give "
                         f"{model_id!r} its price as {{input: USD, output: USD}})") from None
    try:
        inp = calc_price(Usage(input_tokens=_PRICED_TOKENS), model_ref=model_id, provider_id=provider_id)
        out = calc_price(Usage(output_tokens=_PRICED_TOKENS), model_ref=model_id, provider_id=provider_id)
    except LookupError:
        raise ValueError(f"genai-prices has no list price for {provider} model {model_id!r} (for a deployment "
                         "or an alias, give its price as {input: USD, output: USD})") from None
    from importlib.metadata import version

    scale = PER_MILLION / _PRICED_TOKENS
    return ModelPrice(input=float(inp.input_price) * scale, output=float(out.output_price) * scale,
                      source=f"list price of {provider_id} {model_id!r} in genai-prices {version('genai-prices')}")


def with_list_prices(prices: Any, models: Mapping[str, tuple[str, str]]) -> Any:
    """A sweep's raw ``prices`` with each entry that says ``list`` replaced by the numbers of ``list_price`` for
    its model's (provider, model id) in ``models``, so the sweep and the manifest hold the numbers it ran with.
    Entries naming no model of the sweep are left for the sweep's own check to refuse."""
    if not isinstance(prices, dict) or LIST_PRICE not in prices.values():
        return prices
    out = dict(prices)
    for name, price in prices.items():
        if price == LIST_PRICE and name in models:
            try:
                out[name] = list_price(*models[name]).model_dump()
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
    return out


def prices_from(raw: Mapping[str, Any] | None) -> dict[str, ModelPrice]:
    """Prices as stored in a manifest's sweep (plain dicts) → ``ModelPrice`` per model label."""
    return {name: ModelPrice.model_validate(p) for name, p in (raw or {}).items()}


def _cost_expr(prices: Mapping[str, ModelPrice]) -> pl.Expr:
    """Per-row cost in USD; null for a model without a price (unknown, not free)."""
    import polars as pl

    if not prices:
        return pl.lit(None, dtype=pl.Float64)
    models = list(prices)
    inp = pl.col("model").replace_strict(models, [prices[m].input for m in models], default=None,
                                         return_dtype=pl.Float64)
    outp = pl.col("model").replace_strict(models, [prices[m].output for m in models], default=None,
                                          return_dtype=pl.Float64)
    return (pl.col("input_tokens").fill_null(0) * inp + pl.col("output_tokens").fill_null(0) * outp) / PER_MILLION


def usage_by_model(trials: pl.LazyFrame, prices: Mapping[str, ModelPrice],
                   by: tuple[str, ...] = ("model",)) -> pl.DataFrame:
    """Per model (or per ``by`` group): trials, errors, ``unreachable`` (error rows whose request reached no
    server), tokens, cost (null when unpriced), cost per trial."""
    import polars as pl

    failed = pl.col("status") != "ok"
    # a table written by hand or an old importer may lack the error text: then nothing counts as unreachable
    unreachable = (failed & pl.col("error").str.starts_with(CONNECTION_FAILED).fill_null(False)
                   if "error" in trials.collect_schema().names() else pl.lit(False))
    return (
        trials.group_by(*by)
        .agg(pl.len().cast(pl.Int64).alias("trials"),
             failed.sum().cast(pl.Int64).alias("errors"),
             unreachable.sum().cast(pl.Int64).alias("unreachable"),
             pl.col("input_tokens").fill_null(0).sum().cast(pl.Int64).alias("input_tokens"),
             pl.col("output_tokens").fill_null(0).sum().cast(pl.Int64).alias("output_tokens"),
             _cost_expr(prices).sum().alias("cost_usd"))
        .with_columns(pl.when(pl.col("model").is_in(list(prices))).then(pl.col("cost_usd"))
                      .otherwise(None).alias("cost_usd"))
        .with_columns((pl.col("cost_usd") / pl.col("trials")).alias("cost_per_trial_usd"))
        .sort(*by)
        .collect()
    )
