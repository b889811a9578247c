"""Keys never reach what trialgrid writes: one scrubber, for every key of the run, on every written string.

A server may echo the key it was sent — whole (a misconfigured proxy, a hostile mock), or masked the
vendors' way (OpenAI's ``sk-abc***wxyz``) — in an error body *or in a 200 answer*, and one model's
server may echo another model's key. So scrubbing is not per provider: every key this process has
read (``remember``; ``runner.providers.secrets`` calls it for each key it reads, the sweep loader for
each ``api_key_env`` a sweep names) is removed from every string that is written:

- answers and error bodies as they arrive from the wire (``runner.providers.http_base``), so probes,
  the cache and the rows see scrubbed text;
- and, as the net under that, every record batch a sink writes (all text columns, nested steps and
  calls; local and Ray rows alike: ``runner.output.sink``), the response cache's stored values, the
  manifest, and every line the command line prints (errors, warnings, notes).

A key is removed by its exact value and by every run of ``FRAGMENT`` of its characters, which covers
the masked echoes vendors print (a prefix and a tail) and partial repeats, while leaving ordinary text
alone (keys are high-entropy). Lives in ``runner.core`` so every layer, the manifest's writer
included, uses this one copy.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyarrow is imported where batches are scrubbed: the command line's start-up stays light
    import pyarrow as pa

REDACTED = "[redacted]"
#: runs of this many characters of a key are scrubbed (a key shorter than twice this only as a whole)
FRAGMENT = 6
#: shorter values are no key anyone issues (a test's "k", a local server's "none"): scrubbing them would cut
#: every such letter out of every text
MIN_KEY = 8

_lock = threading.Lock()
_keys: set[str] = set()
#: the other forms of those keys a server may echo (``_encodings``)
_forms: set[str] = set()
#: what to look for, longest first: every remembered key whole, then each of its fragments
_patterns: tuple[str, ...] = ()
#: the same as one RE2 alternation (Arrow's regex kernels are linear-time): one pass over a column, not one per
#: pattern — the leftmost match is taken longest-first, so a whole key goes as one and what is left of a partial
#: echo is shorter than a fragment
_regex = ""


def remember(key: str) -> None:
    """Scrub ``key`` (and its fragments) from everything this process writes from now on."""
    global _patterns, _regex
    key = key.strip()
    if len(key) < MIN_KEY or key in _keys:
        return
    with _lock:
        _keys.add(key)
        # other forms are scrubbed whole, never by fragment: a fragment of a case-folded key ("PREFLI") is
        # ordinary text too often (an environment variable's name)
        _forms.update(v for v in _encodings(key) if len(v) >= MIN_KEY)
        found: dict[str, None] = {}
        for k in sorted(_keys | _forms, key=len, reverse=True):
            found[k] = None
        for k in sorted(_keys, key=len, reverse=True):
            if len(k) >= 2 * FRAGMENT:
                for i in range(len(k) - FRAGMENT + 1):
                    found.setdefault(k[i:i + FRAGMENT], None)
        _patterns = tuple(found)
        _regex = "|".join(re.escape(p) for p in _patterns)


def _encodings(key: str) -> set[str]:
    """The forms a server may echo a key in besides its own: upper and lower case, percent-encoded, and base64
    (standard and URL-safe) at each of the three alignments it can sit at inside a longer encoded text (a Basic
    credential, a JSON blob), keeping only the characters the neighbours cannot change."""
    import base64
    from urllib.parse import quote

    forms = {key.upper(), key.lower(), quote(key, safe="")}
    raw = key.encode()
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * shift + raw + b"\0\0").decode()
            start = -(-4 * shift // 3) + (1 if shift else 0)  # past the characters the prefix shares
            stable = (4 * (shift + len(raw))) // 3  # before those the suffix shares
            forms.add(text[start:stable])
    forms.discard(key)
    return forms


def remember_env(names: Iterable[str | None]) -> None:
    """Remember the keys held by the environment variables ``names`` (unset ones are skipped)."""
    for name in names:
        if name:
            value = os.environ.get(name, "")
            if value.strip():
                remember(value)


def active() -> bool:
    """Whether any key is remembered (when none is, scrubbing is free)."""
    return bool(_patterns)


def scrub(text: str) -> str:
    """``text`` with every remembered key, and every fragment of one, replaced by ``[redacted]``."""
    patterns = _patterns
    if not patterns or not text:
        return text
    for piece in patterns:
        if piece in text:
            text = text.replace(piece, REDACTED)
    return text


def scrub_bytes(data: bytes) -> bytes:
    """``scrub`` for a UTF-8 body as it came off the wire (bytes that do not decode are kept as they were)."""
    patterns = _patterns
    if not patterns or not data:
        return data
    encoded = [p.encode() for p in patterns]
    if not any(p in data for p in encoded):
        return data
    return scrub(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def scrub_value(value: Any) -> Any:
    """``scrub`` applied to every string inside ``value`` (dicts, lists and tuples rebuilt; keys too)."""
    if not _patterns:
        return value
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_value(k): scrub_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub_value(v) for v in value)
    return value


def scrub_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with every string in it scrubbed, nested lists and structs included (the same batch when no
    key is remembered or none occurs)."""
    if not _patterns:
        return batch
    import pyarrow as pa

    columns = [_scrub_array(column) for column in batch.columns]
    if all(new is old for new, old in zip(columns, batch.columns, strict=True)):
        return batch
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _scrub_array(array: pa.Array) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if array.offset:  # a slice: rebuilt from its own values so children line up
        array = pa.concat_arrays([array.take(pa.array(range(len(array)), pa.int64()))])
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if pc.any(pc.match_substring_regex(array, _regex)).as_py():
            return pc.replace_substring_regex(array, _regex, REDACTED)
        return array
    if pa.types.is_struct(kind):
        children = [array.field(i) for i in range(kind.num_fields)]
        scrubbed = [_scrub_array(child) for child in children]
        if all(new is old for new, old in zip(scrubbed, children, strict=True)):
            return array
        return pa.StructArray.from_arrays(scrubbed, fields=list(kind), mask=array.is_null() if array.null_count else None)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        values = array.values
        scrubbed_values = _scrub_array(values)
        if scrubbed_values is values:
            return array
        cls = pa.ListArray if pa.types.is_list(kind) else pa.LargeListArray
        return cls.from_arrays(array.offsets, scrubbed_values, type=kind,
                               mask=array.is_null() if array.null_count else None)
    return array


def forget_all() -> None:
    """Forget every remembered key (tests; a long-lived process that starts another run keeps them)."""
    global _patterns, _regex
    with _lock:
        _keys.clear()
        _forms.clear()
        _patterns = ()
        _regex = ""
