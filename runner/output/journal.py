"""Write-ahead journal: every finished trial reaches the OS before its record batch does.

Why: a sink buffers rows and writes them as one Arrow record batch every ``batch_rows``
rows or ``flush_seconds`` (``runner.output.sink``), so a kill -9 used to lose every
answer of the batch in flight — up to 2 s of answers, paid for and then paid again on
resume (192 of ~1,000 answered trials re-sent). The journal closes that gap:
``TrialSink`` writes the rows appended in one turn of the event loop to
``trials/journal-W.jsonl`` together (one ``os.write`` on an ``O_APPEND`` descriptor, no
Python buffer) before the loop's next turn, and at the latest every ``JOURNAL_ROWS`` (64)
rows (``TrialSink.append`` without a running loop writes at once), so a row survives the
process dying from the end of the loop turn that appended it: a kill loses at most that
turn's rows. One write per row cost about 9 µs of a ~100 µs simulated trial. When the buffer is written as a batch the
journal is truncated: it only ever holds the rows not yet in a part (the batch in
flight), a few MB at most, never a second copy of the output. The next session's open
replays it (``runner.output.repair.replay_journals``) into a part of the session that
wrote it, before the resume set is read, so those trials are done, not re-sent.

Like the parts, the journal survives the process, not the machine: it is not fsynced
(an fsync per trial would cost more than the trial).

Format, one line each, a tag byte then JSON (``orjson``):

- ``h{"metadata": {...}}`` first: the schema metadata of the sink's parts (sweep id and
  the session's ``PartRecord``), so replayed rows count as the session that wrote them;
- ``b[blob, ...]``: ``call_blobs`` content not yet journaled since the last truncation
  (a catalogue repeats in every row; journaling it once per batch, as the parts store
  it, is what keeps the journal cheap: about 1.5 KB and a few µs a row);
- ``r{row}``: a row without its ``call_blobs``.

A line cut off by the kill (the last one) is dropped; any other damage stops the read
there. The journal is the writer's own file: a hostile one can only yield rows that the
replay converts with the trial schema (a bad value is refused like any bad row) and
dedupes against the parts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from runner.core.redact import scrub_bytes

__all__ = ["JOURNAL_GLOB", "Journal", "JournalContent", "journal_path", "read_journal"]

JOURNAL_GLOB = "journal-*.jsonl"
_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY
_MAX_LINE = 64 << 20  # a line longer than this is damage, not a row


def journal_path(trials_dir: Path, worker: str) -> Path:
    return Path(trials_dir) / f"journal-{worker}.jsonl"


class Journal:
    """The write side, owned by one ``TrialSink``: ``append`` before buffering, ``clear`` after each batch."""

    def __init__(self, path: Path, metadata: Mapping[str, str]) -> None:
        self.path = path
        if path.exists() and path.stat().st_size:
            raise RuntimeError(f"{path} holds rows not yet replayed; open the output with a session (it replays "
                               "them) before writing to it")
        self._header = b"h" + orjson.dumps({"metadata": dict(metadata)}, option=_OPTIONS)
        self._fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_TRUNC, 0o644)
        self._blob_ids: set[str] = set()
        self._empty = True

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row (raises ``OSError`` when the disk refuses, ``TypeError`` for a value JSON cannot hold)."""
        self.append_many((row,))

    def append_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write ``rows`` in one ``os.write``; all or none of them (``TypeError``: some value JSON cannot hold,
        and nothing was written; ``OSError``: the disk refused)."""
        parts = [self._header] if self._empty else []
        seen = self._blob_ids
        added: set[str] = set()
        for row in rows:
            blobs = row.get("call_blobs")
            if blobs:
                new = [b for b in blobs if b["id"] not in seen and b["id"] not in added]
                row = {**row, "call_blobs": None}
                if new:
                    parts.append(b"b" + orjson.dumps(new, option=_OPTIONS))
                    added.update(b["id"] for b in new)
            parts.append(b"r" + orjson.dumps(row, option=_OPTIONS))
        data = memoryview(scrub_bytes(b"".join(parts)))  # no key reaches the disk (core.redact)
        while data:  # a regular file takes it whole; a short write (a signal) goes on where it stopped
            data = data[os.write(self._fd, data):]
        seen |= added
        self._empty = False

    def clear(self) -> None:
        """The journaled rows are in a part now: forget them."""
        if not self._empty:
            os.ftruncate(self._fd, 0)
            self._blob_ids.clear()
            self._empty = True

    def close(self, *, remove: bool) -> None:
        """Close; ``remove``: delete the file (every row is in a part), else keep it for the next replay."""
        if self._fd < 0:
            return
        os.close(self._fd)
        self._fd = -1
        if remove:
            self.path.unlink(missing_ok=True)


@dataclass
class JournalContent:
    """What a journal holds: its parts' schema metadata, its rows (each with the blobs journaled before it on
    the first row that follows them) and whether a torn or damaged tail was dropped."""

    metadata: dict[str, str] | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    torn: bool = False


def _lines(path: Path) -> Iterator[tuple[bytes, bool]]:
    """(line, complete) for each line; the last is incomplete when the kill cut it."""
    with open(path, "rb") as handle:
        while True:
            line = handle.readline(_MAX_LINE)
            if not line:
                return
            yield line, line.endswith(b"\n")


def read_journal(path: Path) -> JournalContent:
    """The rows of one journal; never raises on damage (the rest from the first bad line is dropped)."""
    content = JournalContent(None)
    pending: list[Any] = []  # blobs journaled since the last row: they go on the next row
    for line, complete in _lines(path):
        tag, body = line[:1], line[1:]
        try:
            if not complete:
                raise ValueError("cut off")
            value = orjson.loads(body)
        except (ValueError, orjson.JSONDecodeError):
            content.torn = True
            break
        if tag == b"h" and isinstance(value, dict) and isinstance(value.get("metadata"), dict):
            metadata = value["metadata"]
            if content.metadata is None and all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in metadata.items()):
                content.metadata = metadata
                continue
        elif tag == b"b" and isinstance(value, list) and content.metadata is not None:
            pending.extend(value)
            continue
        elif tag == b"r" and isinstance(value, dict) and content.metadata is not None:
            if pending:
                value["call_blobs"] = pending
                pending = []
            content.rows.append(value)
            continue
        content.torn = True  # an unknown tag, or a row before the header: damage
        break
    return content
