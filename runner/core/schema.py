"""The common columns every trial row carries, whatever the probe.

Probe outcome columns are appended after these (see ``Probe.outcome_fields``). The
README's "Output schema" section documents both; keep them in step.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from runner.core.columns import Column

TOOL_CALL = pa.struct([
    pa.field("id", pa.string()),
    pa.field("name", pa.string()),
    pa.field("arguments", pa.string()),     # the raw argument string as the model sent it
    pa.field("parse_error", pa.string()),   # null when the arguments parsed as a JSON object
])

#: one message of a recorded request (``runner.core.calls``): a system message's text is in ``call_blobs``
MESSAGE = pa.struct([
    pa.field("role", pa.string()),
    pa.field("content", pa.string()),        # null when the text is stored once, under ``content_id``
    pa.field("content_id", pa.string()),     # a ``call_blobs`` id (system messages)
    pa.field("tool_calls", pa.list_(TOOL_CALL)),
    pa.field("tool_call_id", pa.string()),
    pa.field("name", pa.string()),
])

REQUEST = pa.struct([
    pa.field("prefix", pa.int32()),          # messages taken over from the trial's previous request, before ``messages``
    pa.field("messages", pa.list_(MESSAGE)),
    pa.field("tools", pa.string()),          # the catalogue's ``call_blobs`` id (null: no tools)
    pa.field("tool_order", pa.list_(pa.int16())),  # the offered order, as positions in the stored catalogue
    pa.field("params", pa.string()),         # the model params' ``call_blobs`` id (null: none)
    pa.field("seed", pa.int64()),
    pa.field("tool_choice", pa.string()),
])

RESPONSE = pa.struct([
    pa.field("text", pa.string()),
    pa.field("tool_calls", pa.list_(TOOL_CALL)),
    pa.field("finish_reason", pa.string()),
    pa.field("input_tokens", pa.int64()),
    pa.field("output_tokens", pa.int64()),
    pa.field("cached", pa.bool_()),
    pa.field("calls_from_text", pa.int32()),
    pa.field("remedies", pa.list_(pa.string())),
])

#: one ``Agent.chat`` of the trial: the request as sent and the response (null when the call failed)
CALL = pa.struct([
    pa.field("request", REQUEST),
    pa.field("response", RESPONSE),
    pa.field("attempts", pa.int32()),
    pa.field("latency_ms", pa.float64()),
    pa.field("error_kind", pa.string()),
    pa.field("error", pa.string()),
])

#: content stored once per record batch: system texts, tool catalogues (JSON lists), params (JSON objects)
BLOB = pa.struct([
    pa.field("id", pa.string()),
    pa.field("kind", pa.string()),
    pa.field("content", pa.string()),
])

COMMON_FIELDS: tuple[pa.Field, ...] = (
    pa.field("sweep_id", pa.string(), nullable=False),
    pa.field("trial_id", pa.string(), nullable=False),
    pa.field("model", pa.string(), nullable=False),
    pa.field("provider", pa.string(), nullable=False),
    pa.field("model_id", pa.string(), nullable=False),
    pa.field("probe", pa.string(), nullable=False),
    pa.field("case_id", pa.string(), nullable=False),
    pa.field("condition", pa.string(), nullable=False),
    pa.field("run", pa.int32(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("status", pa.string(), nullable=False),      # "ok" | "error"
    pa.field("error_kind", pa.string()),                  # runner.providers.ErrorKind value
    pa.field("error", pa.string()),
    pa.field("attempts", pa.int32()),
    pa.field("cache_hits", pa.int32()),                   # calls the response cache answered (0: all live)
    pa.field("remedies", pa.list_(pa.string())),          # learned parameter remedies applied; null if none
    pa.field("latency_ms", pa.float64()),
    pa.field("input_tokens", pa.int64()),
    pa.field("output_tokens", pa.int64()),
    pa.field("tool_calls", pa.list_(TOOL_CALL)),
    pa.field("response_text", pa.string()),
    pa.field("finished_at", pa.timestamp("ms", tz="UTC")),
    pa.field("calls", pa.list_(CALL)),                    # every model call, in order (format 2; runner.core.calls)
    pa.field("call_blobs", pa.list_(BLOB)),               # content the calls name, once per record batch
)

#: the columns that record the exchange rather than an outcome (absent from trials imported from another harness)
CALL_COLUMNS = ("calls", "call_blobs")
#: columns whose values the writer keeps once per record batch (``runner.core.calls.first_in_batch``)
ONCE_PER_BATCH = frozenset({"call_blobs"})

STATUS_OK = "ok"
STATUS_ERROR = "error"


def trial_schema(outcome_fields: Iterable[Column], metadata: dict[str, str] | None = None) -> pa.Schema:
    return pa.schema([*COMMON_FIELDS, *(c.field() for c in outcome_fields)], metadata=metadata)
