"""Parts that know they are damaged: a CRC-32 per record batch, written with the part, checked by every reader.

A flipped bit in a finished part used to be caught only when it broke Arrow's framing ("offsets must be
monotonically increasing"); a flip inside a value read back as a different value, and every report counted it.
PostgreSQL's data checksums are the model: the writer stores a checksum beside each page, every reader checks it.

What is checked is what a reader decodes, not the bytes on disk: a batch's checksum is the CRC-32 of its
canonical IPC encoding (``RecordBatch.serialize()``), computed by the writer before the write and by the reader
after decoding. So a flip the decoder ignores (padding, the schema copy at the file's start that file readers
skip) reads back the same values (``tests/output/test_bit_flips.py`` checks that through polars, the readers'
scan), and any flip that changes a value, a null or a row count changes the
encoding. Each batch's custom metadata (in its own IPC message) holds ``index crc schema-crc``: its place in the
part (so a footer pointing twice at one batch is caught), its CRC, and the CRC of the part's schema as written
(a flip in a column's name or type, or in the sweep id, changes the schema the reader decodes). A last,
empty *seal* batch records the batch and row counts, so a footer that lost a batch is caught too. The schema
metadata carries ``trialgrid.checksums`` (the scheme), so a part whose footer lost every batch is refused.

Every part trialgrid writes carries them (the sink, crash repair, rescore and the importers all write through
``ChecksummedWriter``), so a part without any is refused like a damaged one: written by another tool, or by a
trialgrid before 0.2.0. A part where some batches carry one and others not is refused too.

Cost (``python benchmarks/part_checksums.py --rows 100000 --out OUT``, 2 shared cores at load 11–12): a sink
writing checksums keeps 0.973 of the rows/s of one that does not; a report's CPU is 1.004 of the unverified one on the quickstart
output (2.4 MiB of parts) and 1.044 on a 100k-trial output (103 MiB), where verifying every batch costs
``Output.open`` 0.11 CPU s. CRC-32 (``zlib``) ran at about 0.8 GB/s here, 3.4 times BLAKE2b. At 1M trials (1 GB of parts) verifying is
about a CPU-second on every open, so readers verify a part once per change of it (``runner.output.verified``).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.ipc as ipc

__all__ = ["CHECKSUMS_KEY", "SCHEME", "ChecksummedWriter", "batch_crc", "sealed_rows", "verify_part", "with_scheme"]

CHECKSUMS_KEY = b"trialgrid.checksums"
SCHEME = b"crc32-ipc/1"
_BATCH_KEY = b"trialgrid.crc"
_SEAL_KEY = b"trialgrid.seal"


def batch_crc(batch: pa.RecordBatch) -> int:
    """CRC-32 of the batch's canonical IPC encoding (what a reader decodes, independent of slicing)."""
    return zlib.crc32(batch.serialize())


def schema_crc(schema: pa.Schema) -> int:
    return zlib.crc32(schema.serialize())


def with_scheme(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the checksum scheme in its metadata (what a checksummed part's schema carries)."""
    metadata = dict(schema.metadata or {})
    if metadata.get(CHECKSUMS_KEY) == SCHEME:
        return schema
    metadata[CHECKSUMS_KEY] = SCHEME
    return schema.with_metadata(metadata)


class ChecksummedWriter:
    """An Arrow IPC file writer that stores each batch's CRC in the batch's metadata and seals the part on close.

    ``schema`` must already carry the scheme (``with_scheme``); the sink and the salvage write through this."""

    def __init__(self, sink: pa.NativeFile, schema: pa.Schema) -> None:
        self._writer = ipc.new_file(sink, schema)
        self._schema = schema
        self._schema_crc = schema_crc(schema)
        self._batches = 0
        self._rows = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        meta = f"{self._batches} {batch_crc(batch)} {self._schema_crc}".encode()
        self._writer.write_batch(batch, custom_metadata={_BATCH_KEY: meta})
        self._batches += 1
        self._rows += batch.num_rows

    def close(self) -> None:
        """Write the seal (an empty batch holding the batch and row counts) and the footer."""
        seal = f"{self._batches} {self._rows} {self._schema_crc}".encode()
        empty = pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in self._schema], schema=self._schema)
        self._writer.write_batch(empty, custom_metadata={_SEAL_KEY: seal})
        self._writer.close()


#: the problem of a part that carries no checksum at all: not damage, a part trialgrid 0.2.0 did not write
NO_CHECKSUMS = "it carries no checksums (written by another tool, or by a trialgrid before 0.2.0)"


@dataclass(frozen=True)
class Verdict:
    """What checking a part found: ``problem`` None when it verifies; ``good``: the indices of the batches whose
    checksum holds (all of them for a part that verifies)."""

    problem: str | None
    good: tuple[int, ...]


def _fields(metadata: Mapping[bytes, bytes] | None, key: bytes) -> list[int] | None:
    raw = (metadata or {}).get(key)
    if raw is None:
        return None
    try:
        values = [int(x) for x in raw.split()]
    except ValueError:
        return None
    return values if len(values) == 3 else None


def verify_part(reader: ipc.RecordBatchFileReader) -> Verdict:
    """Check every batch of an opened part against its recorded CRC, the schema, and the seal.

    Never raises for damage: a batch that does not decode is a failed batch."""
    n = reader.num_record_batches
    claims = (reader.schema.metadata or {}).get(CHECKSUMS_KEY) is not None
    written_schema = schema_crc(reader.schema)
    good: list[int] = []
    rows = bare = 0
    first_problem: str | None = None
    seal: list[int] | None = None
    any_metadata = False
    for i in range(n):
        try:
            batch, metadata = reader.get_batch_with_custom_metadata(i)
        except (pa.ArrowException, OSError, ValueError) as exc:
            first_problem = first_problem or f"batch {i + 1} of {n} does not decode ({_first_line(exc)})"
            continue
        raw = dict(metadata) if metadata is not None else {}
        if raw:
            any_metadata = True
        if i == n - 1 and _SEAL_KEY in raw:
            seal = _fields(raw, _SEAL_KEY)
            if seal is None or batch.num_rows:
                first_problem = first_problem or "its seal is damaged"
            continue
        fields = _fields(raw, _BATCH_KEY)
        if fields is None:
            if raw:
                first_problem = first_problem or f"batch {i + 1} of {n} has lost its checksum"
            else:
                bare += 1
            continue
        index, crc, schema = fields
        try:
            actual = batch_crc(batch)
        except (pa.ArrowException, OSError, ValueError) as exc:
            first_problem = first_problem or f"batch {i + 1} of {n} does not decode ({_first_line(exc)})"
            continue
        if index != i or crc != actual:
            first_problem = first_problem or f"batch {i + 1} of {n} fails its checksum"
            continue
        if schema != written_schema:
            first_problem = first_problem or "its schema fails its checksum"
            continue
        good.append(i)
        rows += batch.num_rows
    if not any_metadata and (n or not claims):
        # no batch carries a checksum (a single flip cannot strip every batch's metadata, the seal's included)
        return Verdict(NO_CHECKSUMS, ())
    if bare and first_problem is None:
        first_problem = f"{bare} of its {n} batches have lost their checksums"
    if first_problem is None:
        if seal is None:
            first_problem = "its seal is missing (the part lost batches at its end)"
        elif seal[0] != n - 1 or seal[2] != written_schema:
            first_problem = "its footer does not match its seal (a batch is missing or repeated)"
        elif seal[1] != rows:
            first_problem = "its row count does not match its seal"
    return Verdict(first_problem, tuple(good))


def batch_verdict(batch: pa.RecordBatch, metadata: Mapping[bytes, bytes] | None, index: int,
                  schema: pa.Schema) -> bool | None:
    """For a reader of a part as a stream: True when the batch's checksum holds, False when it fails, None when
    it carries none (the seal)."""
    fields = _fields(metadata, _BATCH_KEY)
    if fields is None:
        return None
    try:
        return fields[0] == index and fields[1] == batch_crc(batch) and fields[2] == schema_crc(schema)
    except (pa.ArrowException, OSError, ValueError):
        return False


def sealed_rows(reader: ipc.RecordBatchFileReader) -> int | None:
    """The row count a part's seal records (its last batch alone is read), or None when it has no seal. Trust it
    only for a part that verified: ``verify_part`` checks the seal against the batches."""
    n = reader.num_record_batches
    if not n:
        return None
    try:
        batch, metadata = reader.get_batch_with_custom_metadata(n - 1)
    except (pa.ArrowException, OSError, ValueError):
        return None
    seal = _fields(metadata, _SEAL_KEY)
    return seal[1] if seal is not None and not batch.num_rows else None


def is_seal(metadata: Mapping[bytes, bytes] | None) -> bool:
    return metadata is not None and _SEAL_KEY in dict(metadata)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:120]
