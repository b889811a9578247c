"""Reading JSON lines files: one reader, one policy for a bad line, whatever the file holds.

Case files, BFCL data, imported traces and audited traces are all JSON lines, and all
of them can be huge, binary or hand-edited. Every reader of them goes through here, so
they agree on what a line is and what a bad one is:

- lines are numbered from 1; blank lines are skipped;
- a line is never held whole beyond ``limit`` bytes: a longer one is a ``BadLine``
  (``line too long``), drained in chunks;
- a line parses with orjson, and what orjson refuses but Python's ``json`` reads (NaN,
  integers beyond 64 bits, a BOM) is read by ``json``; a line neither reads is a
  ``BadLine`` (``not JSON``) with the parser's message;
- a bad line never stops the reading: it is yielded, numbered, in its place. Whether a
  bad line is fatal (a case file: every bad line is listed, the command exits 2) or
  counted and skipped (production traces) is the caller's to say, not the reader's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from runner.core.errors import UserError
from runner.core.safety import ReadsLines, bounded_lines, check_regular_file

__all__ = ["MAX_LINE_BYTES", "BadLine", "NotJSON", "json_lines", "parse_line", "raw_lines", "read_json_lines"]

#: the longest line read (a trace with its whole conversation fits many times over)
MAX_LINE_BYTES = 32 << 20


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a JSON value: ``reason`` is the short key it is counted under (``line too long``,
    ``not JSON``), ``detail`` the specifics; ``raw`` the line as read (None when it was too long to hold)."""

    number: int
    reason: str
    detail: str
    raw: bytes | None = None


class NotJSON(ValueError):
    """``parse_line``'s refusal; its message is the parser's, cut short."""


def parse_line(raw: bytes) -> Any:
    """The JSON value of one line; ``NotJSON`` when neither orjson nor ``json`` reads it."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:  # what orjson refuses and json reads (NaN, huge integers, a BOM), or json's message with a column
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise NotJSON(f"{exc.msg} (column {exc.colno})") from None
    except UnicodeDecodeError:
        raise NotJSON("not UTF-8 text") from None
    except (RecursionError, ValueError) as exc:  # nested too deep, an integer too long to convert
        raise NotJSON(f"{type(exc).__name__}: {str(exc).split(';')[0][:100]}") from None


def raw_lines(fh: ReadsLines, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes | BadLine]]:
    """``(line number, bytes or BadLine)`` of each non-blank line of a binary file, unparsed (a caller that parses
    in worker processes ships the bytes)."""
    for number, line, size in bounded_lines(fh, limit):
        if line is None:
            yield number, BadLine(number, "line too long", f"{size:,} bytes on one line (the limit is {limit:,})")
        elif line.strip():
            yield number, line


def json_lines(fh: ReadsLines, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Any]]:
    """``(line number, value or BadLine)`` of each non-blank line of a binary file (see the module's policy)."""
    for number, line in raw_lines(fh, limit):
        if isinstance(line, BadLine):
            yield number, line
            continue
        try:
            yield number, parse_line(line)
        except NotJSON as exc:
            yield number, BadLine(number, "not JSON", str(exc), line)


def read_json_lines(path: Path, *, what: str, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Any]]:
    """``json_lines`` of the regular file ``path``; a file that is not one, or cannot be opened, is a ``UserError``
    naming ``what`` it should have been."""
    check_regular_file(path, what=what)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read the {what}: {exc.strerror}", file=path) from None
    with fh:
        yield from json_lines(fh, limit)
