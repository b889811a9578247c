"""Walking tool-call arguments as JSON trees, and the text normalisation grounding checks share.

Grounding failures hide at any depth: an invented id inside ``{"items": [{"sku": ...}]}``
is as much a leak as one at the top. So scoring never looks at ``str(arguments)``; it
walks the parsed JSON and reports every leaf with its path, so a finding names the
field and the concrete value (``refund.items[0].sku = "SKU-1"``).

Normalisation (used by forbidden-token checks, expected-value checks and the phantom
containment baseline) folds what does not change meaning: letter case, runs of
whitespace, and number formatting (``64.50``, ``64.5``, ``1,064.50`` → one form).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

Leaf = tuple[str, Any]  # (path, scalar value)
_SCALARS = frozenset({str, int, float, bool, type(None)})

_WS_RE = re.compile(r"\s+")
# a number as people write it: optional sign, thousands separators, decimals
# (no leading zeros: "05" in a date or "0199" in a phone number is a digit string, not a number)
_NUMBER_RE = re.compile(r"(?<![\w.])[-+]?(?:[1-9]\d{0,2}(?:,\d{3})+|[1-9]\d*|0)(?:\.\d+)?(?![\w])")


def leaves(value: Any, path: str = "") -> Iterator[Leaf]:
    """Every scalar inside ``value`` with its path: ``a.b[0].c``. Empty containers yield nothing."""
    cls = value.__class__
    if cls in _SCALARS:  # the common leaves, without the abstract-class checks below (a grounding hot path)
        yield path, value
    elif cls is dict or isinstance(value, Mapping):
        for key, sub in value.items():
            yield from leaves(sub, f"{path}.{key}" if path else str(key))
    elif cls is list or isinstance(value, (list, tuple)):
        for i, sub in enumerate(value):
            yield from leaves(sub, f"{path}[{i}]")
    else:
        yield path, value


def top_field(path: str) -> str:
    """The argument a leaf belongs to: ``items[0].sku`` → ``items``."""
    cut = len(path)
    for sep in (".", "["):
        i = path.find(sep)
        if i >= 0:
            cut = min(cut, i)
    return path[:cut]


def key_names(path: str) -> list[str]:
    """The object keys along a leaf's path: ``a[0].b`` → ``["a", "b"]``."""
    return [part for part in re.split(r"\.|\[\d+\]", path) if part]


@lru_cache(maxsize=1 << 16)
def canonical_number(text: str) -> str:
    """``"1,064.50"`` → ``"1064.5"``; ``"7.0"`` → ``"7"``; ``"-0"`` → ``"0"``. Remembered: a grounding context
    reads each number it holds three times (normalising, and its two number patterns)."""
    raw = text.replace(",", "").lstrip("+")
    try:
        number = float(raw)
    except ValueError:
        return text
    if number.is_integer() and abs(number) < 1e16:
        return str(int(number))
    return repr(number)


def normalise(text: str) -> str:
    """Fold case, whitespace and number formatting so equal meanings compare equal."""
    lowered = _WS_RE.sub(" ", text.lower()).strip()
    return _NUMBER_RE.sub(lambda m: canonical_number(m.group(0)), lowered)


def scalar_text(value: Any) -> str | None:
    """The normalised text of a scalar leaf; ``None`` for values with nothing to ground.

    Booleans and nulls carry no token that could occur in the context, so a
    containment check cannot judge them; empty strings say nothing.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return canonical_number(repr(value) if isinstance(value, float) else str(value))
    if isinstance(value, str):
        text = normalise(value)
        return text or None
    return normalise(json.dumps(value))


def numbers_in(text: str) -> set[str]:
    """Canonical forms of every number written in ``text``."""
    return {canonical_number(m.group(0)) for m in _NUMBER_RE.finditer(text)}


def contained(value: Any, haystack: str, haystack_numbers: set[str]) -> bool:
    """Is ``value``'s normalised form present in ``haystack`` (already normalised)?

    A number must match a whole number in the context (``5`` is not found in
    ``2025``); any other value is a normalised substring check.
    """
    text = scalar_text(value)
    if text is None:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return text in haystack_numbers
    number = number_form(text)
    if number is not None:
        return number in haystack_numbers
    return text in haystack


def number_form(text: str) -> str | None:
    """The canonical number a normalised text is, when all of it is one number (``"1,064.50"`` → ``"1064.5"``)."""
    return canonical_number(text) if _NUMBER_RE.fullmatch(text) else None


def format_value(value: Any) -> str:
    """A leaf value as a finding shows it: JSON, so strings are quoted and types visible."""
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."
