"""Case files as records, each with a way back to its line: YAML / JSON lists and JSON lines.

The negative and phantom probes (and their importers' output) accept three layouts:
a YAML or JSON file holding a list, a mapping with one list under ``key`` (``cases:``,
``traces:``), or JSON lines (``.jsonl`` / ``.ndjson``: one record per line, the form
BFCL and most eval tooling write). Whatever the layout, every record comes with the
``Source`` and key-path prefix that ``validate`` needs to name file, line and field.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.core.jsonlines import BadLine, json_lines
from runner.core.sources import Problems, Source, load_source, read_text

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
#: bad lines of a JSON lines case file named one by one; past these, one line counts the rest
_MAX_BAD_LINES = 10


@dataclass(frozen=True)
class Record:
    data: Any
    source: Source
    prefix: tuple

    def line(self, *sub: Any) -> int | None:
        return self.source.line_of(self.prefix + tuple(sub))

    def error(self, message: str, *sub: Any, hint: str | None = None) -> UserError:
        return UserError(message, file=self.source.path, line=self.line(*sub), key_path=self.prefix + tuple(sub), hint=hint)


def load_records(path: Path, *, what: str, key: str) -> tuple[list[Record], str]:
    """The records in ``path`` and the file's sha256. Raises a located ``UserError``."""
    if path.suffix.lower() in _JSONL_SUFFIXES:
        return _jsonl(path, what=what)
    source = load_source(path, what=what)
    prefix: tuple[str, ...]
    data, prefix = source.data, ()
    if isinstance(data, dict):
        if key not in data:
            raise UserError(f"expected a {key!r} list (or a top-level list)", file=path, line=1, key_path=(key,))
        data, prefix = data[key], (key,)
    if not isinstance(data, list):
        raise UserError(f"{key} must be a list, got {type(data).__name__}", file=path,
                        line=source.line_of(prefix), key_path=prefix or None)
    if not data:
        raise UserError(f"no {key}: the file is empty", file=path, line=source.line_of(prefix), key_path=prefix or None,
                        hint="add at least one entry; `trialgrid template` writes an example")
    return [Record(item, source, prefix + (i,)) for i, item in enumerate(data)], source.sha256


def _jsonl(path: Path, *, what: str) -> tuple[list[Record], str]:
    """The records of a JSON lines case file; every bad line is a problem, listed all at once (``Problems``)."""
    _text, raw = read_text(path, what=what)  # within the size cap, UTF-8
    records, bad = [], []
    for number, item in json_lines(io.BytesIO(raw)):
        if isinstance(item, BadLine):
            bad.append(UserError(f"{item.reason}: {item.detail}", file=path, line=number,
                                 hint="JSON lines files hold one complete JSON object per line"))
        elif not isinstance(item, dict):
            bad.append(UserError(f"each line must be a JSON object, got {type(item).__name__}", file=path,
                                 line=number))
        else:  # every key of a one-line record lives on that line
            records.append(Record(item, Source(path=path, data=item, lines={(): number}), ()))
    if len(bad) > _MAX_BAD_LINES:  # a binary or wrong file: the first few say what it is
        rest = len(bad) - _MAX_BAD_LINES
        bad = [*bad[:_MAX_BAD_LINES], UserError(f"{rest:,} more line{'s' if rest > 1 else ''} that do not read",
                                                file=path, hint="is this the JSON lines file you meant?")]
    if bad:
        raise Problems(bad)
    if not records:
        raise UserError(f"{what} has no records", file=path)
    return records, hashlib.sha256(raw).hexdigest()
