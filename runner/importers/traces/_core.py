"""The shared core of trace import: bounded record reading, messages → per-call context, ids, skips, output.

Every reader (one module per format) turns its records into the same few things — normalised
messages (``Msg``), the calls a model made (``Call``), the tools offered — and hands each call to
``Sink.emit`` with the messages the model had seen. That keeps one rule for what a context is:

- ``system``: every system / developer instruction, joined by a blank line;
- ``user``: every user turn's text, in order;
- ``tool_results``: every earlier tool result of the same conversation, as ``{tool, result}``
  (the tool's name found through its call id; a result that is a JSON object or array is parsed);
- the assistant's own earlier words are *not* context: they ground nothing (``runner.probes.grounding``).

Reading is bounded: a file is read record by record (a JSON line; or, for a file that is one
pretty-printed JSON document, the document — its array's items are then the records), and no
record over ``max_record_bytes`` is ever held: it is drained and skipped in one line. Parsed values
whose trace would nest deeper than ``MAX_DEPTH`` are refused: a sweep's loader refuses such a file
whole (``runner.core.sources``), and the baseline walks values recursively. Ids are made
here and only here: ``<tool>-<16 hex>``, a hash of the call's *key*, so they are stable across imports and
safe as file names whatever the source holds.

A call's key says where it sits, never what a provider named it: (trace, span, position) for a span,
(conversation, response, turn, position) for a logged pair, (sample, position) for an inspect log. A
provider's call ids repeat (many servers number them ``call_0``, ``call_1``… in every response), so a
call id alone identifies nothing; the same key seen again (a span exported twice, a pair logged twice)
is imported once, within the last ``DEDUPE_WINDOW`` calls, so memory does not grow with the input; a
file given twice is read once.

A call whose context the source cut short — the OTel SDK's attribute limit dropped attributes, the
input messages are null or absent — is kept, not audited: it goes to ``traces-incomplete.jsonl``
with its reason (``context_incomplete``), and ``import.json`` counts it apart. Audited as it
stands, every argument of it would look invented.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from runner.core.jsonlines import BadLine, json_lines
from runner.core.skips import Skips

MAX_RECORD_BYTES = 32 * 1024 * 1024
MAX_ID_CHARS = 1024
#: the nesting a sweep's loader accepts in a trace file (``runner.core.sources``; a test keeps the two equal)
MAX_DEPTH = 64
#: call keys remembered to import each call once (a span exported twice, a pair logged twice): the most recent this
#: many, so memory does not grow with the input
DEDUPE_WINDOW = 200_000
_PRINTED_PER_REASON = 5
_SLUG_RE = re.compile(r"[^A-Za-z0-9_]+")


class BadRecord(ValueError):
    """A record (or one span / item of it) that cannot be imported: ``reason`` is the short key it is counted
    under, ``detail`` the specifics for the one line that names it."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call as the source wrote it: ``args`` is a JSON object or the string that should hold one."""
    id: str | None
    name: str
    args: Any


@dataclass(slots=True)
class Msg:
    """A normalised message: role ``system`` | ``user`` | ``assistant`` | ``tool``."""
    role: str
    text: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    result_of: str | None = None     # a tool message: the call id it answers
    result_name: str | None = None   # ... and the tool's name, where the source says it
    result: Any = None


@dataclass(frozen=True, slots=True)
class Where:
    """Where a record sits: the file as given and its record number (JSON line, or array index)."""
    file: str
    record: int


# -- values ----------------------------------------------------------------------------------------------------------

def loads(text: str | bytes, what: str, detail: str = "") -> Any:
    """``text`` parsed; ``BadRecord`` counted under "``what`` is not JSON" (``what`` names a kind of field, never a
    value, so the per-reason cap on printed lines holds), ``detail`` (which one) in its line."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise BadRecord(f"{what} is not JSON", f"{detail}: {str(exc)[:120]}" if detail else str(exc)[:120]) from None


def maybe_json(value: Any) -> Any:
    """A string that holds a JSON object or array, parsed; anything else as it is."""
    if isinstance(value, str) and value[:1] in ("{", "[") and value[-1:] in ("}", "]"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def args_of(call: Call) -> dict[str, Any]:
    """The call's arguments as a JSON object, or ``BadRecord``."""
    args = call.args
    if args is None or args == "":
        return {}
    if isinstance(args, str):
        args = loads(args, "arguments", f"{call.name[:80]!r}")
    if not isinstance(args, dict):
        raise BadRecord("arguments not a JSON object", f"{call.name!r} has a JSON {type(args).__name__}")
    return args


def _depth_ok(value: Any, limit: int) -> bool:
    """Iteratively (a nesting bomb must not recurse here): no container deeper than ``limit``, the root at 1."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            if d > limit:
                return False
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            if d > limit:
                return False
            stack.extend((x, d + 1) for x in v)
    return True


def text_of(value: Any) -> str:
    """Message content as text: a string, or the text parts of a content list (OpenAI / Anthropic / GenAI parts)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        out = []
        for part in value:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                t = part.get("text", part.get("content")) if part.get("type", "text") in (
                    "text", "input_text", "output_text") else None
                if isinstance(t, str):
                    out.append(t)
        return "\n".join(out)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"]
    raise BadRecord("wrong type", f"message content is a JSON {type(value).__name__}")


def sid(value: Any, what: str) -> str | None:
    """A source id as a string (OTLP writes ints as strings already), bounded."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise BadRecord("wrong type", f"{what} is a JSON {type(value).__name__}, not a string")
    text = str(value)
    if len(text) > MAX_ID_CHARS:
        raise BadRecord("id too long", f"{what} has {len(text):,} characters (at most {MAX_ID_CHARS})")
    return text


# -- context ---------------------------------------------------------------------------------------------------------

def context_of(messages: Iterable[Msg]) -> dict[str, Any]:
    """The phantom trace context the model had: system, user turns, earlier tool results (see the module doc)."""
    system: list[str] = []
    user: list[str] = []
    results: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "system":
            system.extend(t for t in m.text if t)
        elif m.role == "user":
            user.extend(t for t in m.text if t)
        elif m.role == "assistant":
            for c in m.calls:
                if c.id:
                    names[c.id] = c.name
        elif m.role == "tool":
            name = m.result_name or (names.get(m.result_of) if m.result_of else None)
            results.append({"tool": name, "result": maybe_json(m.result)})
    return {"system": "\n\n".join(system), "user": user, "tool_results": results}


def tools_of(tools: Any) -> list[dict[str, Any]] | None:
    """Tools offered, in any vendor's shape (OpenAI chat / Responses, Anthropic, GenAI definitions, a JSON schema
    string) → ``[{name, description, parameters}]``; None when the source has none."""
    if isinstance(tools, dict):
        tools = [tools[k] for k in sorted(tools)] if all(isinstance(k, int) for k in tools) else [tools]
    if not isinstance(tools, list) or not tools:
        return None
    out = []
    for t in tools:
        t = maybe_json(t)
        if not isinstance(t, dict):
            continue
        fn: dict[str, Any] = t["function"] if isinstance(t.get("function"), dict) else t
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        params = fn.get("parameters", fn.get("input_schema", fn.get("inputSchema")))
        out.append({"name": name, "description": fn.get("description") if isinstance(fn.get("description"), str)
                    else None, "parameters": maybe_json(params) if params is not None else None})
    return out or None


# -- reading ---------------------------------------------------------------------------------------------------------

def records(path: Path, limit: int = MAX_RECORD_BYTES,
            read: Callable[[int], None] | None = None) -> Iterator[tuple[int, Any]]:
    """``(record number, parsed value or BadRecord)`` for each record of ``path``, holding at most ``limit`` bytes.

    JSON lines (numbered from 1, blank lines skipped; ``.gz`` files are read through gzip); or one JSON
    document (pretty-printed, e.g. protobuf's ``MessageToJson``) when the first line is not JSON on its
    own but the whole file is: an array's items are its records (numbered from 0), an object is record 0.
    A first line that is neither (a JSON lines file whose first record is cut short) is one bad record.
    ``read``, if given, is told after each JSON line how many bytes of the file are read (of a ``.gz``, its
    compressed bytes), for a progress line."""
    with path.open("rb") as raw, (gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else nullcontext(raw)) as fh:
        for line_no, value in json_lines(fh, limit):
            if not isinstance(value, BadLine):
                yield line_no, value
                if read is not None:
                    read(raw.tell())
            elif value.raw is None:
                yield line_no, BadRecord("record too large", f"{value.detail}; --max-record-mb")
            else:
                line = value.raw
                if line_no == 1 and line.strip()[:1] in (b"{", b"[") and not line.rstrip().endswith((b"}", b"]")):
                    document = _document(fh, line, limit)
                    if document is not None:
                        yield from document
                        return
                    fh.seek(len(line))  # not one document either: JSON lines whose first record is broken
                yield line_no, BadRecord("not JSON", value.detail[:120])


def _document(fh: Any, first: bytes, limit: int) -> list[tuple[int, Any]] | None:
    """The records of a file that is one JSON document, or None when it is not one."""
    body = first + fh.read(limit + 1 - len(first))
    if len(body) > limit:
        return [(0, BadRecord("record too large", f"one JSON document over {limit:,} bytes: write it as JSON "
                              "lines (one record per line), or raise --max-record-mb"))]
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        second = body[len(first):].split(b"\n", 1)[0]
        try:
            orjson.loads(second)
        except orjson.JSONDecodeError:  # its second line is no record either: one document, broken
            return [(0, BadRecord("not JSON", f"the document: {str(exc)[:120]}"))]
        return None
    return list(enumerate(value)) if isinstance(value, list) else [(0, value)]


# -- output ----------------------------------------------------------------------------------------------------------

def _slug(tool: str) -> str:
    return _SLUG_RE.sub("_", tool)[:40].strip("_") or "call"


class Writable(Protocol):
    """Where the ``Sink`` writes its lines: a binary file, or a receiver's list of a request's lines."""

    def write(self, data: bytes, /) -> object: ...


class Sink:
    """Receives every call the readers find: makes its trace record and id, writes it, counts and reports skips."""

    def __init__(self, fh: Writable | None, incomplete_fh: Writable | None = None) -> None:
        self.fh = fh
        self.incomplete_fh = incomplete_fh
        #: calls kept apart because the source cut their context short, by reason
        self.incomplete: Counter[str] = Counter()
        self.imported = 0
        self.imported_by: Counter[str] = Counter()
        self.skips = Skips(live=True, per_reason=_PRINTED_PER_REASON,
                           more="skipped more records for {reason!r}; the count is in import.json")
        self.notes: Counter[str] = Counter()
        self.records = 0
        self.bad_records = 0
        self._seen: set[str] = set()
        self._order: deque[str] = deque()

    def remember(self, tid: str) -> None:
        """``tid`` imported already (the last ``DEDUPE_WINDOW`` ids are kept): a record that repeats it is not
        imported twice. A receiver that restarts remembers the ids its file holds."""
        self._seen.add(tid)
        self._order.append(tid)
        if len(self._order) > DEDUPE_WINDOW:
            self._seen.discard(self._order.popleft())

    @property
    def skipped(self) -> Counter[str]:
        """Skipped records by reason."""
        return self.skips.by_reason

    def bad(self, where: Where, exc: BadRecord, *, what: str = "") -> None:
        place = f"{where.file}: record {where.record}" + (f", {what}" if what else "")
        self.skips.skip(exc.reason, lambda: f"skipped {place}: {exc}"[:400])

    def note(self, what: str, n: int = 1) -> None:
        """Something read that holds no tool call (a span of another kind, a model call that called nothing)."""
        self.notes[what] += n

    def emit(self, fmt: str, where: Where, context: dict[str, Any], call: Call, *, key: tuple[Any, ...], index: int,
             tools: list[dict[str, Any]] | None, trace_id: str | None = None, span_id: str | None = None,
             conversation_id: str | None = None, incomplete: str | None = None) -> bool:
        """Write one trace for ``call``; False (counted) when its ``key`` was imported already or it cannot be made.
        ``key``: where the call sits in the source (the module's docstring); ``index``: its place among the calls
        of its record, for messages; ``incomplete``: why its context is cut short (it is then kept apart)."""
        try:
            if not isinstance(call.name, str) or not call.name:
                raise BadRecord("call without a tool name")
            args = args_of(call)
            call_id = sid(call.id, "the call id")
        except BadRecord as exc:
            self.bad(where, exc, what=f"call {index}")
            return False
        basis = "\x1f".join((fmt, *map(str, key)))
        # 64 bits of hash: a collision among a billion calls has odds of about 1 in 40
        tid = f"{_slug(call.name)}-{hashlib.blake2b(basis.encode(), digest_size=8).hexdigest()}"
        if tid in self._seen:
            self.note("calls seen again (imported once)")
            return False
        self.remember(tid)
        record = {"id": tid, "context": context, "calls": [{"tool": call.name, "args": args}], "tools": tools,
                  "source": {"format": fmt, "file": where.file, "record": where.record, "trace_id": trace_id,
                             "span_id": span_id, "conversation_id": conversation_id, "call_id": call_id}}
        if incomplete is not None:
            record["context_incomplete"] = incomplete
        deep = BadRecord("nested too deeply", f"the trace would nest deeper than {MAX_DEPTH} levels")
        try:
            data = orjson.dumps(record)
        except orjson.JSONEncodeError as exc:  # orjson's own limit is 254 levels
            self.bad(where, deep if "ecursion" in str(exc) else BadRecord("not JSON-serialisable", str(exc)[:120]),
                     what=f"call {index}")
            return False
        # no more brackets than levels allowed: cannot nest too deeply (the common case, without a walk)
        if data.count(b"{") + data.count(b"[") > MAX_DEPTH and not _depth_ok(record, MAX_DEPTH):
            self.bad(where, deep, what=f"call {index}")
            return False
        if incomplete is not None:
            if self.incomplete_fh is not None:
                self.incomplete_fh.write(data + b"\n")
            self.incomplete[incomplete] += 1
            return True
        if self.fh is not None:
            self.fh.write(data + b"\n")
        self.imported += 1
        self.imported_by[fmt] += 1
        return True


def conversation_of(given: str | None, messages: list[Msg], fallback: str | None) -> str | None:
    """The conversation a call belongs to, the same way in every reader: the id the source gives; else, for a
    request that has a user turn, a hash of its system text and first user turn (every request of one
    conversation repeats its start, so each gets the same one, whether or not the source groups them: a trace
    per model call, a log of pairs); else ``fallback`` (its trace, its file)."""
    if given:
        return given
    first_user = next((t for m in messages if m.role == "user" for t in m.text if t), "")
    if not first_user:
        return fallback
    system = next((t for m in messages if m.role == "system" for t in m.text if t), "")
    return "c-" + hashlib.blake2b(f"{system}\x1f{first_user}".encode(), digest_size=8).hexdigest()
