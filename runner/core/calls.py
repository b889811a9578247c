"""Every model call of a trial, on its row: the request exactly as the agent sent it, and what came back.

Why: a row used to keep only the last response, so re-scoring a multi-step trial had
to rebuild the model's own arguments from a probe's prose notes, and a report's
example re-read case files that may have changed since the run. Now the output
alone holds every exchange. Two common columns (``runner.core.schema``):

- ``calls``: one struct per ``Agent.chat``, in order: the ``request`` (messages,
  the catalogue and its order, params, seed, tool choice), the ``response`` (text,
  tool calls, finish reason, tokens, cache and text-call flags, remedies; null when
  the call failed), and the call's ``attempts``, ``latency_ms``, ``error_kind`` and
  ``error``.
- ``call_blobs``: content stored once. A system message's text, a tool catalogue
  and a model's params repeat in every trial (and a long user message in every run
  of its cell), so a request names them by a content id (16 hex digits of a sha256)
  and their content sits in ``call_blobs``. Each
  record batch written holds every blob its rows name: a row carries the blobs it
  references, and ``first_in_batch`` (called by the writer as it converts a batch)
  keeps each one only on the first row of the batch that names it. A reader gathers
  the blobs of every row it can read (``Blobs.gather``) — also of rows a newer row of
  the same trial supersedes, since a blob may sit on one of those.

Compactness beyond that, without losing exactness:

- a catalogue is stored as a list in a canonical order (by tool name, then tool
  content id) and a request as its id plus ``tool_order``, the permutation that gives
  the order the tools were offered in (one small int per tool);
- a request of a multi-turn loop repeats the previous request's messages: ``prefix``
  counts the messages taken over from the previous call of the trial, and
  ``messages`` holds only the ones after them.

Encoding runs once per trial, when the row is built (``encode_calls``); what it
hashes (tool specs, catalogues, system texts, params) is cached by content or by
object, so the hot path does dictionary look-ups, not JSON and hashing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage, parse_tool_arguments

__all__ = [
    "BLOB_KINDS",
    "USER_BLOB_MIN",
    "Blobs",
    "CallRecord",
    "RecordedCall",
    "decode_calls",
    "decode_response",
    "encode_calls",
    "first_in_batch",
    "referenced_blobs",
    "row_calls",
]

#: what a blob holds: a system message's text, a long user message's text, a tool catalogue (a JSON list), a
#: model's params (a JSON object)
BLOB_KINDS = ("system", "user", "tools", "params")
#: a user message this long is stored once too (a probe's case text repeats in every run and model of its cell:
#: phantom's traces); shorter ones cost less inline than their id
USER_BLOB_MIN = 256
_CACHE_LIMIT = 20_000  # distinct objects cached before a cache starts over (probes that build specs per trial)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One ``Agent.chat`` as it happened: the request built, the response (None if the call failed), its cost.

    Made by the agent on every call (references only, no copy); turned into the row's
    ``calls`` value once, when the trial's row is built.
    """

    request: ChatRequest
    response: ChatResponse | None
    attempts: int
    latency_s: float
    error_kind: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One call read back from a row: ``CallRecord`` with the request rebuilt exactly."""

    request: ChatRequest
    response: ChatResponse | None
    attempts: int
    latency_ms: float
    error_kind: str | None
    error: str | None


def _id(kind: str, content: str) -> str:
    return hashlib.sha256(f"{kind}\0{content}".encode()).hexdigest()[:16]


def _blob(kind: str, content: str) -> dict[str, str]:
    return {"id": _id(kind, content), "kind": kind, "content": content}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_plain)


class _Catalogue:
    __slots__ = ("blob", "by_object", "tools")

    def __init__(self, blob: dict[str, str], by_object: dict[int, int], tools: tuple[ToolSpec, ...]) -> None:
        self.blob = blob
        self.by_object = by_object  # id(spec) → position in the stored list
        self.tools = tools          # held, so no id in ``by_object`` is reused while cached


# caches of the encoder; objects are held (not just their id()) so an id is never reused while cached
_TOOLS: dict[int, tuple[ToolSpec, str, str]] = {}            # id(spec) → (spec, content id, JSON)
_CATALOGUES: dict[frozenset[int], _Catalogue] = {}           # the ids of a request's spec objects → catalogue
_TEXTS: dict[tuple[str, str], dict[str, str]] = {}           # (role, text) → its blob
_MESSAGES: dict[int, tuple[Message, dict[str, Any], dict[str, str]]] = {}  # id(message) → (it, its row value, blob)
_PARAMS: dict[int, tuple[Mapping[str, Any], dict[str, str]]] = {}


def _bounded(cache: dict[Any, Any], limit: int = _CACHE_LIMIT) -> dict[Any, Any]:
    if len(cache) >= limit:
        cache.clear()
    return cache


def _tool(spec: ToolSpec) -> tuple[str, str]:
    hit = _TOOLS.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1], hit[2]
    text = _json({"name": spec.name, "description": spec.description, "parameters": spec.parameters})
    tid = _id("tool", text)
    _bounded(_TOOLS)[id(spec)] = (spec, tid, text)
    return tid, text


def _catalogue(tools: Sequence[ToolSpec]) -> tuple[dict[str, str], list[int]]:
    # keyed by the spec objects themselves: a probe offers the same objects in every trial (in another order),
    # so the common case is one frozenset and C-level look-ups, no per-tool Python call; the order itself is not
    # remembered (every trial shuffles the catalogue: an order is almost never offered twice)
    ordered = tuple(map(id, tools))
    key = frozenset(ordered)
    if len(key) < len(tools):
        return _catalogue_with_repeats(tools)
    cat = _CATALOGUES.get(key)
    if cat is None:
        cat = _bounded(_CATALOGUES, 1024)[key] = _new_catalogue(tuple(tools))  # each holds a whole catalogue
    return cat.blob, list(map(cat.by_object.__getitem__, ordered))


def _new_catalogue(tools: tuple[ToolSpec, ...]) -> _Catalogue:
    entries = sorted((t.name, *_tool(t), i) for i, t in enumerate(tools))
    blob = _blob("tools", "[" + ",".join(text for _, _, text, _ in entries) + "]")
    return _Catalogue(blob, {id(tools[i]): pos for pos, (_, _, _, i) in enumerate(entries)}, tools)


def _catalogue_with_repeats(tools: Sequence[ToolSpec]) -> tuple[dict[str, str], list[int]]:
    """The same spec offered twice in one request: rare; the stored list keeps every copy, no cache."""
    specs = [(t.name, *_tool(t), i) for i, t in enumerate(tools)]
    entries = sorted(specs)
    blob = _blob("tools", "[" + ",".join(text for _, _, text, _ in entries) + "]")
    order = [0] * len(tools)
    for pos, (_, _, _, i) in enumerate(entries):
        order[i] = pos
    return blob, order


def _text(role: str, text: str) -> dict[str, str]:
    key = (role, text)
    blob = _TEXTS.get(key)
    if blob is None:
        blob = _bounded(_TEXTS)[key] = _blob(role, text)
    return blob


def _params(params: Mapping[str, Any]) -> dict[str, str] | None:
    if not params:
        return None
    hit = _PARAMS.get(id(params))
    if hit is not None and hit[0] is params:
        return hit[1]
    blob = _blob("params", _json(params))
    _bounded(_PARAMS)[id(params)] = (params, blob)
    return blob


def _tool_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [{"id": c.id, "name": c.name, "arguments": c.raw_arguments, "parse_error": c.parse_error} for c in calls]


def _message(m: Message, blobs: dict[str, dict[str, str]]) -> dict[str, Any]:
    if m.role == "system" or (m.role == "user" and len(m.content) >= USER_BLOB_MIN):
        hit = _MESSAGES.get(id(m))
        if hit is not None and hit[0] is m:  # a probe's constant message: the same row value every trial
            blobs[hit[2]["id"]] = hit[2]
            return hit[1]
        blob = _text(m.role, m.content)
        value = _message_value(m, None, blob["id"])
        _bounded(_MESSAGES)[id(m)] = (m, value, blob)
        blobs[blob["id"]] = blob
        return value
    return _message_value(m, m.content, None)


def _message_value(m: Message, content: str | None, content_id: str | None) -> dict[str, Any]:
    return {"role": m.role, "content": content, "content_id": content_id,
            "tool_calls": _tool_calls(m.tool_calls) if m.tool_calls else None,
            "tool_call_id": m.tool_call_id, "name": m.name}


def _common_prefix(before: Sequence[Message], now: Sequence[Message]) -> int:
    n = 0
    for a, b in zip(before, now, strict=False):
        if a is not b and a != b:
            break
        n += 1
    return n


def encode_calls(records: Sequence[CallRecord],
                 last_tool_calls: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """A trial's records → (its ``calls`` value, the blobs they name).

    ``last_tool_calls``: the row's ``tool_calls`` value of the last response, shared
    (not rebuilt) as that response's ``tool_calls`` in ``calls``.
    """
    out: list[dict[str, Any]] = []
    blobs: dict[str, dict[str, str]] = {}
    previous: Sequence[Message] = ()
    last = len(records) - 1
    for i, rec in enumerate(records):
        req = rec.request
        prefix = _common_prefix(previous, req.messages) if previous else 0
        previous = req.messages
        tools_id: str | None = None
        order: list[int] | None = None
        if req.tools:
            cat, order = _catalogue(req.tools)
            blobs[cat["id"]] = cat
            tools_id = cat["id"]
        params = _params(req.params)
        if params is not None:
            blobs[params["id"]] = params
        request = {"prefix": prefix, "messages": [_message(m, blobs) for m in req.messages[prefix:]],
                   "tools": tools_id, "tool_order": order, "params": params["id"] if params else None,
                   "seed": req.seed, "tool_choice": req.tool_choice}
        resp = rec.response
        response: dict[str, Any] | None = None
        if resp is not None:
            calls = last_tool_calls if i == last and last_tool_calls is not None else _tool_calls(resp.tool_calls)
            response = {"text": resp.text, "tool_calls": calls, "finish_reason": resp.finish_reason,
                        "input_tokens": resp.usage.input_tokens, "output_tokens": resp.usage.output_tokens,
                        "cached": resp.cached, "calls_from_text": resp.calls_from_text,
                        "remedies": list(resp.remedies) if resp.remedies else None}
        out.append({"request": request, "response": response, "attempts": rec.attempts,
                    "latency_ms": rec.latency_s * 1000.0, "error_kind": rec.error_kind, "error": rec.error})
    return out, list(blobs.values())


def first_in_batch(values: Sequence[Sequence[Mapping[str, Any]] | None]) -> list[list[Mapping[str, Any]] | None]:
    """A batch's ``call_blobs`` values with each blob kept only on the first row that names it.

    The writer calls this as it converts a batch (``runner.output.sink.to_record_batch``),
    so every record batch on disk holds each blob its rows name exactly once.
    """
    seen: set[str] = set()
    out: list[list[Mapping[str, Any]] | None] = []
    for row in values:
        if not row:
            out.append(None)
            continue
        keep = [b for b in row if b["id"] not in seen]
        seen.update(b["id"] for b in keep)
        out.append(keep or None)
    return out


class Blobs:
    """The content behind a run's content ids: gathered from every row of an output that can be read."""

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[str, Mapping[str, Any]] = {}

    def add(self, row_blobs: Iterable[Mapping[str, Any]] | None) -> None:
        for b in row_blobs or ():
            self._by_id.setdefault(b["id"], b)

    @classmethod
    def gather(cls, values: Iterable[Iterable[Mapping[str, Any]] | None]) -> Blobs:
        """From the ``call_blobs`` values of rows (any order, nulls allowed)."""
        blobs = cls()
        for v in values:
            blobs.add(v)
        return blobs

    def __len__(self) -> int:
        return len(self._by_id)

    def content_ids(self) -> frozenset[str]:
        return frozenset(self._by_id)

    def __getitem__(self, content_id: str) -> str:
        return str(self._blob(content_id)["content"])

    def _blob(self, content_id: str) -> Mapping[str, Any]:
        try:
            return self._by_id[content_id]
        except KeyError:
            raise KeyError(f"content {content_id} is named by a call but stored in no row of this output") from None

    def rows(self, ids: Iterable[str]) -> list[Mapping[str, Any]]:
        """The ``call_blobs`` value that carries ``ids`` (for a writer that copies rows, as rescore does)."""
        return [self._blob(i) for i in dict.fromkeys(ids)]


def referenced_blobs(calls: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The content ids a row's ``calls`` value names, in first-named order."""
    ids: dict[str, None] = {}
    for call in calls or ():
        req = call["request"]
        for m in req["messages"] or ():
            if m["content_id"]:
                ids[m["content_id"]] = None
        for key in ("tools", "params"):
            if req[key]:
                ids[req[key]] = None
    return list(ids)


def _spec(t: Mapping[str, Any]) -> ToolSpec:
    return ToolSpec(t["name"], t["description"], t["parameters"])  # as stored by ``_tool``: every key, as sent


def _read_call(c: Mapping[str, Any]) -> ToolCall:
    raw = c["arguments"] if c["arguments"] is not None else "{}"
    arguments, error = parse_tool_arguments(raw)
    stored = c.get("parse_error")
    return ToolCall(c["name"] or "", raw, arguments, c["id"] or "", stored if arguments is None and stored else error)


def _read_message(m: Mapping[str, Any], blobs: Blobs) -> Message:
    content = blobs[m["content_id"]] if m["content_id"] else (m["content"] or "")
    calls = tuple(_read_call(c) for c in m["tool_calls"] or ())
    return Message(m["role"], content, calls, m["tool_call_id"], m["name"])


def decode_calls(calls: Sequence[Mapping[str, Any]] | None, blobs: Blobs, model: str = "",
                 trial_seed: int | None = None) -> list[RecordedCall]:
    """A row's ``calls`` value → each call's request (rebuilt exactly) and response, in order."""
    out: list[RecordedCall] = []
    messages: tuple[Message, ...] = ()
    for c in calls or ():
        req = c["request"]
        messages = messages[:req["prefix"]] + tuple(_read_message(m, blobs) for m in req["messages"] or ())
        tools: tuple[ToolSpec, ...] = ()
        if req["tools"]:
            stored = [_spec(t) for t in json.loads(blobs[req["tools"]])]
            tools = tuple(stored[i] for i in req["tool_order"])
        params = json.loads(blobs[req["params"]]) if req["params"] else {}
        request = ChatRequest(model, messages, tools, params, req["seed"], req["tool_choice"], trial_seed)
        out.append(RecordedCall(request, decode_response(c), c["attempts"] or 0, c["latency_ms"] or 0.0,
                                c["error_kind"], c["error"]))
    return out


def row_calls(row: Mapping[str, Any], blobs: Blobs) -> list[RecordedCall] | None:
    """Each model call of a stored ``row`` with its request rebuilt exactly (``blobs``: the output's, from
    ``runner.output.Output.blobs``); ``None`` when the row records no calls (trials imported from another harness)."""
    if row.get("calls") is None:
        return None
    return decode_calls(row["calls"], blobs, str(row.get("model_id") or ""), row.get("seed"))


def decode_response(c: Mapping[str, Any]) -> ChatResponse | None:
    """One stored call's response as the probe received it (``None``: the call failed); names no blob."""
    r = c["response"]
    if r is None:
        return None
    tool_calls = tuple(_read_call(t) for t in r["tool_calls"] or ())
    return ChatResponse(r["text"] or "", tool_calls, Usage(r["input_tokens"] or 0, r["output_tokens"] or 0),
                        (c["latency_ms"] or 0.0) / 1000.0, r["finish_reason"], c["attempts"] or 0,
                        tuple(r["remedies"] or ()), bool(r["cached"]), r["calls_from_text"] or 0)
