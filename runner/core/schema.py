"""The common columns every trial row carries, whatever the probe.

Probe outcome columns are appended after these (see ``Probe.outcome_fields``). The
README's "Output schema" section documents both; keep them in step.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

TOOL_CALL = pa.struct([
    pa.field("id", pa.string()),
    pa.field("name", pa.string()),
    pa.field("arguments", pa.string()),     # the raw argument string as the model sent it
    pa.field("parse_error", pa.string()),   # null when the arguments parsed as a JSON object
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
)

STATUS_OK = "ok"
STATUS_ERROR = "error"


def trial_schema(outcome_fields: Iterable[pa.Field], metadata: dict[str, str] | None = None) -> pa.Schema:
    return pa.schema([*COMMON_FIELDS, *outcome_fields], metadata=metadata)
