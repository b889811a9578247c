"""How values leave the viewer: JSON a browser reads exactly, and the error a request it cannot answer gets."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

__all__ = ["ViewError", "plain"]

_EXACT = 2**53  # the largest integer a JavaScript number holds exactly


class ViewError(ValueError):
    """A request the viewer cannot answer as asked (unknown column, bad value): the server's 400."""


def plain(value: Any) -> Any:
    """A polars value as JSON: floats that are not numbers become null, times ISO text, and integers a
    browser's number cannot hold exactly (seeds are 64-bit) their decimal text."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _EXACT:
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
