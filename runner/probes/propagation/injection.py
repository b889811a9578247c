"""Parameter-error injection: corrupt one argument of the first tool call, or one field of a result.

Four kinds, after AgentProp-Bench's taxonomy:

- ``type_mismatch``: the right value in the wrong JSON type (``"2024-05-22"`` → ``20240522``,
  ``19.9`` → ``"19.9 units"``).
- ``out_of_range``: the right type, outside what the field allows (a date before the
  archive, ``days = 30`` where 1-7 is allowed, a negative total).
- ``missing_required``: the field is removed.
- ``semantically wrong but valid-looking``: a value the schema accepts that means
  something else — a shifted date or time, a swapped city, a neighbouring id, a
  nudged number, another enum member.

Every corruption is deterministic (a function of the value alone), so the injected
arm of a task differs from its control only by the injection.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("type_mismatch", "out_of_range", "missing_required", "semantic_wrong")
_TARGETS = ("param", "result")
MISSING: Any = object()  # sentinel: the field is removed

# a fixed neighbour for every city the weather simulator knows, and a few more
_CITY_SWAP = {
    "lisbon": "Madrid", "madrid": "Lisbon", "oslo": "Reykjavik", "reykjavik": "Oslo", "toronto": "Chicago",
    "chicago": "Toronto", "dubai": "Mumbai", "mumbai": "Dubai", "istanbul": "Lisbon", "nairobi": "Dubai",
    "tokyo": "Sydney", "sydney": "Tokyo", "london": "Paris", "paris": "London", "new york": "Boston",
}
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME_RE = re.compile(r"\d{2}:\d{2}")
_ID_TAIL_RE = re.compile(r"^(.*?)(\d+)$")


@dataclass(frozen=True)
class Injection:
    target: str  # param | result
    kind: str

    @property
    def label(self) -> str:
        return f"{self.target}.{self.kind}"


def parse_condition(condition: str) -> tuple[Injection | None, bool]:
    """``"param.semantic_wrong+interceptor"`` → (Injection(param, semantic_wrong), True)."""
    base, _, suffix = condition.partition("+")
    interceptor = suffix == "interceptor"
    if base == "control":
        return None, interceptor
    target, _, kind = base.partition(".")
    return Injection(target, kind), interceptor


def all_conditions() -> tuple[str, ...]:
    bases = ("control", *(f"{t}.{k}" for t in _TARGETS for k in KINDS))
    return tuple(c for b in bases for c in (b, f"{b}+interceptor"))


def _shift_date(text: str, days: int) -> str:
    try:
        return (dt.date.fromisoformat(text) + dt.timedelta(days=days)).isoformat()
    except ValueError:
        return text


def corrupt(kind: str, value: Any, schema: Mapping[str, Any] | None = None) -> Any:
    """The corrupted form of ``value`` (``MISSING`` to remove it). ``schema`` informs range and enums."""
    schema = schema or {}
    if kind == "missing_required":
        return MISSING
    is_num = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "type_mismatch":
        if is_num:
            return f"{value} units"
        if isinstance(value, str):
            digits = re.sub(r"\D", "", value)
            return int(digits) if digits else [value]
        if isinstance(value, bool):
            return "yes" if value else "no"
        return json.dumps(value)
    if kind == "out_of_range":
        if is_num:
            if "maximum" in schema:
                bound = schema["maximum"]
                return type(value)(bound * 10 + 7) if bound > 0 else type(value)(bound + 1000)
            if "minimum" in schema:
                return type(value)(schema["minimum"] - 100)
            return type(value)(value * 1000 + 999)
        if isinstance(value, str):
            if _DATE_RE.fullmatch(value):
                return "1899-12-31"
            if _TIME_RE.fullmatch(value):
                return "27:75"
            if schema.get("enum"):
                return "unspecified"
            m = _ID_TAIL_RE.match(value)
            if m:
                return m.group(1) + "9" * len(m.group(2))
            return value * 40  # longer than any real field
        return value
    if kind == "semantic_wrong":
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + max(1, abs(value) // 2)
        if isinstance(value, float):
            return round(value + max(1.0, abs(value) * 0.3), 1)
        if isinstance(value, str):
            if _DATE_RE.fullmatch(value):
                return _shift_date(value, 1)
            if _TIME_RE.fullmatch(value):
                hours = (int(value[:2]) + 1) % 24
                return f"{hours:02d}{value[2:]}"
            if schema.get("enum") and len(schema["enum"]) > 1:
                options = list(schema["enum"])
                return options[(options.index(value) + 1) % len(options)] if value in options else options[0]
            if value.lower() in _CITY_SWAP:
                return _CITY_SWAP[value.lower()]
            m = _ID_TAIL_RE.match(value)
            if m:
                return f"{m.group(1)}{int(m.group(2)) + 1:0{len(m.group(2))}d}"
            words = value.split()
            return " ".join(words[1:] + words[:1]) if len(words) > 1 else value + " (copy)"
        return value
    raise ValueError(f"unknown injection kind {kind!r}: expected one of {', '.join(KINDS)}")


def describe(field: str, before: Any, after: Any, kind: str) -> str:
    shown = "(removed)" if after is MISSING else json.dumps(after, ensure_ascii=False)
    return f"{field}: {json.dumps(before, ensure_ascii=False)} -> {shown} ({kind})"


def apply(kind: str, data: Mapping[str, Any], field: str, schema: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """A copy of ``data`` with ``field`` corrupted, and a description of the change."""
    out = dict(data)
    props = (schema or {}).get("properties", {}) if schema else {}
    new = corrupt(kind, out[field], props.get(field))
    note = describe(field, out[field], new, kind)
    if new is MISSING:
        del out[field]
    else:
        out[field] = new
    return out, note


def pick_field(data: Mapping[str, Any], preferred: str | None, schema: Mapping[str, Any] | None) -> str | None:
    """The field to corrupt: the task's choice if present, else the first required scalar field present."""
    if preferred and preferred in data:
        return preferred
    required = list((schema or {}).get("required", ())) + list(data)
    for name in required:
        if name in data and not isinstance(data[name], (dict, list)):
            return name
    return None
