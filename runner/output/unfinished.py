"""Reading a part that has no footer yet: one still being written, or one a crash cut short.

A trial part is an Arrow IPC file written batch by batch (``runner.output.sink``); until
it is finished its body is an IPC stream: the file magic, the schema, then one message
per record batch, each carrying its checksum (``runner.output.checksums``). Two readers
need its complete batches: crash repair (``salvage_part``), which copies them into a
finished part, and the viewer's live view, which shows a run as it writes. They read
through ``UnfinishedPart``, so they agree on which trials exist: a batch cut short is
not read (it is read again once complete), a batch whose checksum fails is left out
(repair drops it and its trials run again, so the live view never shows a trial that
will not exist), and the seal a finished part carries is not a batch of trials.

Reading resumes where the last read ended: the live view polls a part of up to a
million rows and reads only what was written since.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from runner.output.checksums import batch_verdict, is_seal

__all__ = ["FILE_MAGIC", "TORN", "UnfinishedPart"]

#: an Arrow IPC file's magic (6 bytes, padded to 8) before the stream body
FILE_MAGIC = b"ARROW1"
#: what reading a part cut short (or replaced under its name) raises
TORN = (pa.ArrowInvalid, OSError, EOFError)


class UnfinishedPart:
    """The complete, verified record batches of the part at ``path``, read incrementally (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.schema: pa.Schema | None = None
        #: where the next batch's message starts in the file
        self.offset = 0
        #: the next batch's place in the part (a checksum names the place it was written at)
        self.index = 0
        #: the last read ended at a batch not (yet) complete
        self.torn = False
        #: batches whose checksum failed, left out
        self.failed = 0
        self._schema_message = b""

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The complete batches written past the last read's end whose checksum holds (a batch that carries none
        is taken as it is); ``offset`` and ``index`` move past each. Stops at the end or at a batch cut short."""
        self.torn = False
        try:
            with open(self.path, "rb") as raw:
                if self.schema is None and not self._read_schema(raw):
                    return
                raw.seek(self.offset)
                joined = _Joined(self._schema_message, raw)
                reader = ipc.open_stream(pa.PythonFile(joined, mode="r"))
                while True:
                    try:
                        batch, metadata = reader.read_next_batch_with_custom_metadata()
                        batch.validate()
                    except StopIteration:
                        return
                    except TORN:
                        self.torn = True
                        return
                    index = self.index
                    self.offset, self.index = raw.tell(), index + 1
                    assert self.schema is not None
                    if is_seal(metadata):
                        continue  # the seal closes a finished part: it holds no trials
                    if batch_verdict(batch, metadata, index, self.schema) is False:
                        self.failed += 1  # its trials are not kept: repair drops them and they run again
                        continue
                    yield batch
        except TORN:
            self.torn = True  # the writer finalized and renamed it since the listing, or it does not read

    def _read_schema(self, raw: io.BufferedReader) -> bool:
        """Read the schema message after the magic; False (torn if the file holds anything) when it is not there."""
        head = raw.read(8)
        if not head.startswith(FILE_MAGIC):
            self.torn = bool(head)
            return False
        source = pa.PythonFile(raw, mode="r")
        try:
            message = ipc.MessageReader.open_stream(source).read_next_message()
            schema = ipc.read_schema(message)
        except (StopIteration, *TORN):
            self.torn = True
            return False
        self.schema, self.offset = schema, raw.tell()
        raw.seek(8)
        self._schema_message = raw.read(self.offset - 8)
        return True


class _Joined(io.RawIOBase):
    """The schema message followed by the file from its current position: a stream ``ipc.open_stream`` reads
    from the middle of a part, so a re-read starts at the first batch not read yet."""

    def __init__(self, head: bytes, rest: io.BufferedReader) -> None:
        self._head, self._at, self._rest = head, 0, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._at < len(self._head):
            n = min(len(buffer), len(self._head) - self._at)
            buffer[:n] = self._head[self._at:self._at + n]
            self._at += n
            return n
        return self._rest.readinto(buffer)
