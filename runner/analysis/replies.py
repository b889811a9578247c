"""What the model actually sent, per model and condition: a view every probe's report carries.

A rate says how often an outcome fired; it cannot say that a third of the replies
were empty, that calls arrived with arguments that do not parse, that calls were
read from text, or that a model's trials timed out while its server was still
busy. This view counts those from the common columns (``tool_calls``,
``response_text``, ``status``, ``error_kind``, ``attempts``) and from the probe's
``calls_from_text`` column where it has one, so it exists for every probe kind and
reaches every renderer — terminal, JSON, CSV, HTML — like any other probe view.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from runner.analysis.windows import summed
from runner.core.views import Format, ProbeView, ViewColumn
from runner.probes.replies import TOKEN_PATTERN, is_empty

KEY = "replies"

COLUMNS = (
    ViewColumn("model", "model"), ViewColumn("condition", "condition"),
    ViewColumn("trials", "trials", Format.COUNT),
    ViewColumn("empty_reply", "empty replies", Format.COUNT),
    ViewColumn("empty_rate", "empty", Format.RATE),
    ViewColumn("empty_with_tokens", "empty, tokens dropped", Format.COUNT),
    ViewColumn("unparsable_calls", "unparsable calls", Format.COUNT),
    ViewColumn("calls_from_text", "calls from text", Format.COUNT),
    ViewColumn("errors", "errors", Format.COUNT),
    ViewColumn("error_kinds", "error kinds"),
)

#: trials per model that time out with a request out before a note says the server queues them
_QUEUE_NOTE_MIN = 1


#: text on which polars' regex engine and Python's ``re`` agree for ``strip_tokens``: printable ASCII and the
#: ASCII whitespace both call whitespace (Python's ``\s`` and ``str.strip`` also take U+001C–U+001F, and its
#: ``\w`` differs from Rust's outside ASCII). Other texts go through ``is_empty`` itself, once per distinct text.
_SAFE_TEXT = r"^[\x20-\x7e\t\n\r\x0b\x0c]*$"


def _empty_expr(text: pl.Expr, n_calls: pl.Expr) -> pl.Expr:
    """``runner.probes.replies.is_empty`` as an expression, on the texts where the two regex engines agree."""
    stripped = text.fill_null("").str.replace_all(TOKEN_PATTERN, " ").str.strip_chars()
    return (n_calls == 0) & (stripped == "")


def _last_output_tokens(names: list[str]) -> pl.Expr:
    """Output tokens of the trial's last model call (the reply the verdict read): from the recorded calls where
    ``names`` has them, else the trial's total. A single-turn probe's trial is one call, so its caller leaves
    ``calls`` out of ``names``: reading every recorded request cost 390 MB and 1.5 CPU s of a 1M-trial report."""
    if "calls" in names:
        last = pl.col("calls").list.last().struct.field("response").struct.field("output_tokens")
        return pl.coalesce(last, pl.col("output_tokens") if "output_tokens" in names else pl.lit(None))
    return pl.col("output_tokens") if "output_tokens" in names else pl.lit(None, dtype=pl.Int64)


def _flags(frame: pl.LazyFrame, text_col: bool, names: list[str]) -> pl.LazyFrame:
    """Per trial, as columns: ok, empty reply, empty reply the server billed tokens for, unparsable calls, calls
    from text, error kind, timed out with a request sent. Texts the expression cannot decide exactly
    (``_SAFE_TEXT``) are marked ``unsure``.

    An empty reply with output tokens is the server's, not the model's: the model wrote something (llama.cpp's
    ``chatml-function-calling`` answered 6 tokens and no text, 12 of 13 times) that the server's
    tool-call parser consumed and did not return as text or as a call."""
    calls = pl.col("tool_calls")
    n_calls = calls.list.len().fill_null(0)
    text = pl.col("response_text").fill_null("")
    ok = pl.col("status") == "ok"
    kind = pl.when(pl.col("error_kind").fill_null("") == "").then(pl.lit("unknown")).otherwise(pl.col("error_kind"))
    empty = ok & _empty_expr(text, n_calls)
    return frame.select(
        "model", "condition", ok.alias("ok"),
        empty.alias("empty"),
        (empty & (_last_output_tokens(names).fill_null(0) > 0)).alias("empty_tokens"),
        (ok & (n_calls == 0) & ~text.str.contains(_SAFE_TEXT)).alias("unsure"),
        pl.when(ok).then(text).otherwise(None).alias("text"),
        pl.when(ok).then(calls.list.eval(pl.element().struct.field("parse_error").is_not_null()).list.sum())
        .otherwise(0).fill_null(0).alias("broken"),
        (ok & pl.col("calls_from_text").cast(pl.Boolean).fill_null(False) if text_col else pl.lit(False))
        .alias("from_text"),
        pl.when(~ok).then(kind).otherwise(None).alias("kind"),
        (~ok & (kind == "timeout") & (pl.col("attempts").fill_null(0) > 0)).alias("timeout_sent"),
    )


def _reply_table(frame: pl.LazyFrame, probe: str, multi_turn: bool = False,
                 windows: Sequence[pl.LazyFrame] | None = None) -> pl.DataFrame:
    """Per (model, condition): trials, empty replies, unparsable calls, calls read from text, errors by kind.

    Per-cell aggregates of per-trial expressions, collected from the lazy scan: no Python loop over trials (it
    took 7.4 of ≈ 10 CPU s of a 1M-trial report). Only distinct texts the expression cannot decide exactly go
    through ``is_empty`` in Python. ``windows``: ``frame`` as row windows (``runner.analysis.windows``), each
    summed on its own, so the reply columns' pages are held one window at a time."""
    names = frame.collect_schema().names()
    cols = ["model", "condition", "status", "error_kind", "tool_calls", "response_text", "attempts"]
    if any(c not in names for c in cols):
        return pl.DataFrame()
    parts = [frame] if windows is None else windows
    text_col, read = "calls_from_text" in names, names if multi_turn else [n for n in names if n != "calls"]

    def flags(window: pl.LazyFrame) -> pl.LazyFrame:
        return _flags(window.filter(pl.col("probe") == probe), text_col, read)

    cell = ["model", "condition"]
    table = summed(parts, lambda w: flags(w).group_by(cell).agg(
        pl.len().alias("trials"), pl.col("empty").sum().alias("empty_reply"),
        pl.col("empty_tokens").sum().alias("empty_with_tokens"),
        pl.col("broken").sum().cast(pl.Int64).alias("unparsable_calls"),
        pl.col("from_text").sum().alias("calls_from_text"), (~pl.col("ok")).sum().alias("errors"),
        pl.col("timeout_sent").sum().alias("timeouts_sent"),
        # undecided texts, and those of them the expression called empty: a second pass only when there are any
        pl.col("unsure").sum().alias("unsure"), (pl.col("unsure") & pl.col("empty")).sum().alias("was")), cell)
    if int(table["unsure"].sum()):  # exact emptiness of the texts Python's re reads differently, once per text
        unsure = summed(parts, lambda w: flags(w).filter(pl.col("unsure")).group_by([*cell, "text"])
                        .agg(pl.len().alias("n")), [*cell, "text"])
        texts = unsure["text"].unique()
        verdict = pl.DataFrame({"text": texts, "exact": [is_empty(t, 0) for t in texts.to_list()]},
                               schema={"text": pl.String, "exact": pl.Boolean})
        fixed = (unsure.join(verdict, on="text", how="left", nulls_equal=True)
                 .group_by(cell).agg(pl.col("n").filter(pl.col("exact")).sum().alias("exact_empty")))
        table = (table.join(fixed, on=cell, how="left")
                 .with_columns((pl.col("empty_reply") - pl.col("was")
                                + pl.col("exact_empty").fill_null(0)).alias("empty_reply"))
                 .drop("exact_empty"))
    table = table.drop("unsure", "was")
    kinds = summed(parts, lambda w: flags(w).filter(~pl.col("ok")).group_by([*cell, "kind"])
                   .agg(pl.len().alias("n")), [*cell, "kind"])
    lines = {(m, c): ", ".join(f"{k} {n}" for k, n in sorted(zip(g["kind"].to_list(), g["n"].to_list(), strict=True)))
             for (m, c), g in kinds.group_by(cell)}
    ok = pl.col("trials") - pl.col("errors")
    # never more than the empty replies (an undecided text the exact rule found not empty)
    table = table.with_columns(pl.min_horizontal("empty_with_tokens", "empty_reply").alias("empty_with_tokens"))
    table = table.sort(cell).with_columns(
        pl.when(ok > 0).then(pl.col("empty_reply") / ok).otherwise(None).alias("empty_rate"),
        pl.Series("error_kinds", [lines.get((m, c), "") for m, c in table.sort(cell).select(cell).iter_rows()],
                  dtype=pl.String))
    schema = {"model": pl.String, "condition": pl.String, "trials": pl.Int64, "empty_reply": pl.Int64,
              "empty_rate": pl.Float64, "empty_with_tokens": pl.Int64, "unparsable_calls": pl.Int64, "calls_from_text": pl.Int64,
              "errors": pl.Int64, "error_kinds": pl.String, "timeouts_sent": pl.Int64}
    return table.select([pl.col(name).cast(dtype) for name, dtype in schema.items()])


def _queue_notes(table: pl.DataFrame) -> list[str]:
    """A warning per model whose trials timed out with requests out: the server is likely queueing them."""
    if table.is_empty():
        return []
    notes = []
    per_model = table.group_by("model").agg(pl.col("timeouts_sent").sum()).sort("model")
    for model, n in per_model.iter_rows():
        if n >= _QUEUE_NOTE_MIN:
            notes.append(f"{model}: {n} trial(s) timed out with requests sent. A server that runs one request at a "
                         "time (llama.cpp, a small vLLM or Ollama) queues the rest, and a retry re-sends to a busy "
                         "server: set concurrency: 1, retry: {max_attempts: 1} and a longer timeout_s "
                         "(see docs/local-models.md).")
    return notes


#: how a server finding's line starts, in the view's notes and at the top of every report (analysis.completeness)
SERVER_FINDING = "server finding:"


def server_findings(table: pl.DataFrame, probe: str) -> list[str]:
    """One line per model whose empty replies came with output tokens: a finding about its server, not its model."""
    if table.is_empty() or "empty_with_tokens" not in table.columns:
        return []
    per_model = (table.group_by("model").agg(pl.col("empty_with_tokens").sum(), pl.col("empty_reply").sum())
                 .sort("model"))
    return [f"{SERVER_FINDING} model {model}: {dropped:,} of its {empty:,} empty replies in {probe} came with output "
            "tokens the server returned as neither text nor a call — its tool-call parser dropped what the model "
            "wrote, so those trials measure the server, not the model (docs/local-models.md)"
            for model, dropped, empty in per_model.iter_rows() if dropped]


def replies_view(frame: pl.LazyFrame, probe: str, *, multi_turn: bool = False,
                 windows: Sequence[pl.LazyFrame] | None = None) -> list[ProbeView]:
    """The replies view of one probe; ``multi_turn``: its trials hold several model calls (then the last call's
    tokens, not the trial's, say whether an empty final reply was billed); ``windows``: ``frame`` as row windows
    (``runner.analysis.windows.windows_of``)."""
    table = _reply_table(frame, probe, multi_turn, windows)
    if table.is_empty():
        return []
    return [ProbeView(
        KEY, f"{probe} · replies: what the model sent",
        "Per model and condition: empty replies (no tool call, no text once template tokens are removed: never a "
        "pass, an abstention or a question), of which the server billed output tokens for (its tool-call parser "
        "dropped what the model wrote: a server finding), calls whose arguments do not parse, trials whose calls were read "
        "from the reply's text (tool_call_parser), and error rows by kind.",
        table, COLUMNS, tuple(server_findings(table, probe) + _queue_notes(table)))]
