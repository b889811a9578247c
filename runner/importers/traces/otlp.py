"""OTLP JSON traces: OpenTelemetry GenAI spans (both generations of attributes), OpenInference spans, tool spans.

A record is an ``ExportTraceServiceRequest`` in its JSON mapping — ``resourceSpans`` →
``scopeSpans`` → ``spans`` (the collector's file exporter writes one per line; protobuf's
``MessageToJson`` writes one pretty-printed document, with snake_case or camelCase keys and ids in
base64, which are turned back into the hex the OTLP spec and every UI use). Each span is read by
the convention its attributes follow, and the one it followed is the trace's ``source.format``:

- ``otel-genai`` — the current GenAI semantic conventions: ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` (JSON: ``{role, parts}``, parts ``text`` / ``tool_call`` /
  ``tool_call_response``), ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``,
  ``gen_ai.conversation.id``; also when they sit on the span's
  ``gen_ai.client.inference.operation.details`` event instead of the span;
- ``otel-genai-flat`` — the older flattened attributes instrumentations still emit:
  ``gen_ai.prompt.N.{role,content,tool_call_id,tool_calls.M.{id,name,arguments}}``,
  ``gen_ai.completion.N.tool_calls.M.{id,name,arguments}``, tools in ``llm.request.functions.N.*``;
- ``openinference`` — Arize's conventions: ``llm.input_messages.N.message.{role,content,contents…,
  tool_call_id,tool_calls.M.tool_call.{id,function.name,function.arguments}}``, the same under
  ``llm.output_messages``, tools in ``llm.tools.N.tool.json_schema``, ``session.id``;
- ``langfuse`` — what Langfuse's own SDK sends (its OpenAI integration, ``@observe``, or a generation made by
  hand): ``langfuse.observation.type`` ``generation`` with ``langfuse.observation.input`` and ``.output`` (JSON,
  read as the Langfuse export's ``input`` and ``output`` are: ``runner.importers.traces.langfuse``),
  ``session.id``; observations of other types hold no model call and are counted;
- ``execute_tool`` spans (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``):
  a call already read from a model span of its trace (one not yet matched by an earlier tool span: call
  ids repeat across responses) is not imported again; one without is imported with the context of the
  latest model span of its trace (empty, and counted, when there is none).

A call is keyed by its trace, its span and its position in the span (``_core``'s docstring); its
conversation is ``gen_ai.conversation.id`` or ``session.id`` where the span has one, else derived from
its messages as every reader derives it (``_core.conversation_of``), else its trace. A span whose
attributes the SDK's limit cut (``droppedAttributesCount`` > 0) or whose input messages are null or
absent has an incomplete context: its calls are kept apart, not audited.

The ``gen_ai.*`` names are those of the semantic conventions (github.com/open-telemetry/semantic-conventions at
c1212d96, ``model/gen-ai/registry.yaml`` and ``events.yaml``; the message parts from
``docs/gen-ai/gen-ai-input-messages.json``), pinned by ``tests/importers/test_otel_semconv_names.py``; the
flattened ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` are not in them (traceloop's own).
"""

from __future__ import annotations

import base64
import binascii
from collections import OrderedDict
from typing import Any

from runner.importers.traces import _messages as wire
from runner.importers.traces._core import (
    BadRecord,
    Call,
    Msg,
    Sink,
    Where,
    context_of,
    conversation_of,
    loads,
    sid,
    text_of,
    tools_of,
)
from runner.importers.traces.langfuse import observation_calls, observation_input

_VALUE_KEYS = {"stringValue": "s", "string_value": "s", "intValue": "i", "int_value": "i", "doubleValue": "d",
               "double_value": "d", "boolValue": "b", "bool_value": "b", "arrayValue": "a", "array_value": "a",
               "kvlistValue": "k", "kvlist_value": "k", "bytesValue": "y", "bytes_value": "y"}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_LANGFUSE_TYPE = "langfuse.observation.type"
_CONTEXTS_KEPT = 4096
_EMPTY: dict[str, Any] = {"system": "", "user": [], "tool_results": []}
_TOOLS_KEPT = 256


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    v = obj.get(camel)
    return obj.get(snake) if v is None else v


def _value(v: Any, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    if not isinstance(v, dict) or not v:
        return None
    s = v.get("stringValue")
    if isinstance(s, str):
        return s
    if depth > 32:
        raise BadRecord("nested too deeply", "an attribute value nests deeper than 32 levels")
    for key, x in v.items():
        kind = _VALUE_KEYS.get(key)
        if kind == "s":
            return x if isinstance(x, str) else str(x)
        if kind == "i":
            try:
                return int(x)
            except (TypeError, ValueError):
                raise BadRecord("wrong type", f"intValue {str(x)[:40]!r} is not an integer") from None
        if kind in ("d", "b", "y"):
            return x
        if kind == "a":
            return [_value(e, depth + 1) for e in (x or {}).get("values") or []]
        if kind == "k":
            return {kv.get("key"): _value(kv.get("value"), depth + 1) for kv in (x or {}).get("values") or []
                    if isinstance(kv, dict)}
    return None


def _attributes(items: Any) -> dict[str, Any]:
    if not items:
        return {}
    if not isinstance(items, list):
        raise BadRecord("wrong type", f"attributes is a JSON {type(items).__name__}, not an array")
    out = {}
    for kv in items:
        if isinstance(kv, dict):
            key = kv.get("key")
            if isinstance(key, str):
                v = kv.get("value")
                s = v.get("stringValue") if v.__class__ is dict else None  # most attributes: _value's first case
                out[key] = s if s.__class__ is str else _value(v)
    return out


def _hex_id(value: Any, size: int, what: str) -> str | None:
    """An OTLP id in hex; protobuf's JSON mapping writes bytes as base64, which is decoded back."""
    text = sid(value, what)
    if text is None:
        return None
    if len(text) == 2 * size:
        try:
            bytes.fromhex(text)
            return text.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text
    return raw.hex() if len(raw) == size else text


def _json_attr(attrs: dict[str, Any], key: str) -> Any:
    v = attrs.get(key)
    return loads(v, key) if isinstance(v, str) else v


#: each flattened attribute key's path below its prefix, parsed once per prefix: the same few hundred keys
#: (``llm.input_messages.3.message.content``) recur in every span, and parsing them was most of reading one
_PATHS: dict[str, dict[str, tuple[tuple[Any, ...], Any]]] = {}
#: keys remembered per prefix; past this the memory starts over
_PATHS_LIMIT = 4_096


def _path(key: str, prefix: str) -> tuple[tuple[Any, ...], Any]:
    """``key`` below ``prefix`` as (its parents, its last step), integer steps as ints: ``0.tool_calls.1.name`` →
    ((0, "tool_calls", 1), "name")."""
    steps = tuple(int(p) if p.isascii() and p.isdigit() else p for p in key[len(prefix):].split("."))
    return steps[:-1], steps[-1]


def _unflatten(attrs: dict[str, Any], prefix: str) -> dict[Any, Any]:
    """``prefix.0.role``, ``prefix.0.tool_calls.1.name`` … → ``{0: {"role": …, "tool_calls": {1: {"name": …}}}}``."""
    root: dict[Any, Any] = {}
    known = _PATHS.get(prefix)
    if known is None or len(known) >= _PATHS_LIMIT:
        known = _PATHS[prefix] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        hit = known.get(key)
        if hit is None:
            hit = known[key] = _path(key, prefix)
        parents, last = hit
        node = root
        for k in parents:
            nxt = node.get(k)
            if not isinstance(nxt, dict):
                nxt = node[k] = {}
            node = nxt
        node[last] = value
    return root


def _seq(node: Any) -> list[Any]:
    if not isinstance(node, dict):
        return []
    return [node[k] for k in sorted(k for k in node if isinstance(k, int))]


def _chat_calls(node: Any, *, nested: bool) -> list[dict[str, Any]]:
    out = []
    for tc in _seq(node):
        if nested:  # OpenInference: tool_call.{id, function.name, function.arguments}
            tc = tc.get("tool_call", {}) if isinstance(tc, dict) else {}
        if isinstance(tc, dict):
            fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else tc
            out.append({"id": tc.get("id"), "function": {"name": fn.get("name"), "arguments": fn.get("arguments")}})
    return out


def _flat_messages(node: dict[Any, Any], *, nested: bool) -> list[dict[str, Any]]:
    """Flattened messages (legacy GenAI, or OpenInference's ``N.message.*``) as Chat Completions messages."""
    out = []
    for m in _seq(node):
        if nested:
            m = m.get("message", {}) if isinstance(m, dict) else {}
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if content is None and "contents" in m:  # OpenInference: contents.N.message_content.{type,text}
            content = "\n".join(c.get("message_content", {}).get("text") or "" for c in _seq(m["contents"])
                                if isinstance(c, dict))
        if isinstance(content, str) and content[:1] == "[":
            try:
                content = loads(content, "content")  # Anthropic blocks, stored as a JSON string
            except BadRecord:
                pass
        msg = {"role": m.get("role"), "content": content, "tool_call_id": m.get("tool_call_id"),
               "name": m.get("name") if m.get("role") == "tool" else None}
        calls = _chat_calls(m.get("tool_calls"), nested=nested)
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out


class _Reader:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        #: per trace: the latest model span's context and conversation, for its tool spans, and by call id the calls
        #: its model spans made that no tool span has matched yet
        self.traces: OrderedDict[str, tuple[dict[str, Any], str | None, dict[str, int]]] = OrderedDict()
        self._tools: dict[str, list[dict[str, Any]] | None] = {}
        #: while a record is read: its execute_tool spans that came before any model span of their trace
        self._waiting: list[tuple[dict[str, Any], Where, str | None, str | None, str | None, int]] | None = None

    def tools(self, raw: Any) -> list[dict[str, Any]] | None:
        """``gen_ai.tool.definitions``, read once per distinct string (every span of a service repeats it)."""
        if not isinstance(raw, str):
            return tools_of(raw)
        got = self._tools.get(raw)
        if got is None and raw not in self._tools:
            got = tools_of(loads(raw, "gen_ai.tool.definitions"))
            if len(self._tools) >= _TOOLS_KEPT:
                self._tools.clear()
            self._tools[raw] = got
        return got

    def record(self, value: Any, where: Where) -> None:
        if not isinstance(value, dict):
            raise BadRecord("not an OTLP traces record", f"a JSON {type(value).__name__}")
        groups = _get(value, "resourceSpans", "resource_spans")
        if groups is None:
            raise BadRecord("not an OTLP traces record", "no resourceSpans")
        if not isinstance(groups, list):
            raise BadRecord("wrong type", "resourceSpans is not an array")
        position = 0
        self._waiting = []
        try:
            for rs in groups:
                for ss in (_get(rs, "scopeSpans", "scope_spans") or []) if isinstance(rs, dict) else []:
                    for span in (ss.get("spans") or []) if isinstance(ss, dict) else []:
                        position += 1
                        try:
                            self.span(span, where, position)
                        except BadRecord as exc:
                            sp = span.get("spanId", span.get("span_id")) if isinstance(span, dict) else None
                            self.sink.bad(where, exc, what=f"span {str(sp)[:40]}")
        finally:
            waiting, self._waiting = self._waiting, None
        # execute_tool spans written before their trace's model span (another instrumentation's scope, listed
        # first): read now, so a call the model span holds is imported once, from it, with its context
        for args in waiting:
            self.tool_span(*args)

    def span(self, span: Any, where: Where, position: int = 0) -> None:
        if not isinstance(span, dict):
            raise BadRecord("wrong type", f"a span is a JSON {type(span).__name__}")
        attrs = _attributes(span.get("attributes"))
        dropped = _dropped(span)
        if "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs:
            for ev in span.get("events") or []:
                if isinstance(ev, dict) and ev.get("name") == _DETAILS_EVENT:
                    attrs.update(_attributes(ev.get("attributes")))
                    dropped += _dropped(ev)
        trace_id = _hex_id(_get(span, "traceId", "trace_id"), 16, "traceId")
        span_id = _hex_id(_get(span, "spanId", "span_id"), 8, "spanId")
        given = sid(attrs.get("gen_ai.conversation.id") or attrs.get("session.id"), "the conversation id")
        has_input: bool
        if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
            fmt = "otel-genai"
            has_input = attrs.get("gen_ai.input.messages") not in (None, "", "null", "[]")
            msgs = wire.genai(_json_attr(attrs, "gen_ai.input.messages"))
            system = _json_attr(attrs, "gen_ai.system_instructions")
            if system:
                msgs.insert(0, Msg("system", [text_of(system)]))
            out = wire.genai(_json_attr(attrs, "gen_ai.output.messages"))
            tools = self.tools(attrs.get("gen_ai.tool.definitions"))
        elif any(k.startswith("llm.output_messages.") or k.startswith("llm.input_messages.") for k in attrs):
            fmt = "openinference"
            has_input = any(k.startswith("llm.input_messages.") for k in attrs)
            msgs = wire.openai_chat(_flat_messages(_unflatten(attrs, "llm.input_messages."), nested=True))
            out = wire.openai_chat(_flat_messages(_unflatten(attrs, "llm.output_messages."), nested=True))
            tools = tools_of([t.get("tool", {}).get("json_schema") for t in _seq(_unflatten(attrs, "llm.tools."))
                              if isinstance(t, dict)])
        elif any(k.startswith("gen_ai.completion.") or k.startswith("gen_ai.prompt.") for k in attrs):
            fmt = "otel-genai-flat"
            has_input = any(k.startswith("gen_ai.prompt.") for k in attrs)
            msgs = wire.openai_chat(_flat_messages(_unflatten(attrs, "gen_ai.prompt."), nested=False))
            out = wire.openai_chat(_flat_messages(_unflatten(attrs, "gen_ai.completion."), nested=False))
            tools = tools_of(_seq(_unflatten(attrs, "llm.request.functions.")))
        elif _LANGFUSE_TYPE in attrs:
            if attrs[_LANGFUSE_TYPE] != "generation":
                self.sink.note(f"Langfuse observations of type {str(attrs[_LANGFUSE_TYPE])[:20]} (no model call)")
                return
            fmt = "langfuse"
            given = given or sid(attrs.get("langfuse.session.id"), "the session id")
            raw = _json_attr(attrs, "langfuse.observation.input")
            has_input = raw not in (None, "", [], {})
            msgs, offered = observation_input(raw) if has_input else ([], None)
            out = [Msg("assistant", [], observation_calls(_json_attr(attrs, "langfuse.observation.output")))]
            tools = tools_of(offered)
        elif attrs.get("gen_ai.operation.name") == "execute_tool" or "gen_ai.tool.call.id" in attrs:
            self.tool_span(attrs, where, trace_id, span_id, given, position)
            return
        else:
            self.sink.note("spans without a model call")
            return
        calls = [c for m in out if m.role == "assistant" for c in m.calls]
        if not calls:
            self.sink.note("model calls without a tool call")
            return
        context = context_of(msgs)
        conv = conversation_of(given, msgs, trace_id)
        incomplete = (f"the SDK's attribute limit dropped {dropped:,} attribute{'s' if dropped > 1 else ''}"
                      if dropped else None if has_input and msgs else "no input messages recorded")
        pending: dict[str, int] = {}
        if trace_id:
            earlier = self.traces.get(trace_id)
            pending = earlier[2] if earlier is not None else pending
            _remember(self.traces, trace_id, (context, conv, pending))
        at = (trace_id, span_id) if span_id else (where.file, where.record, position)
        for i, call in enumerate(calls):
            if isinstance(call.id, str):
                pending[call.id] = pending.get(call.id, 0) + 1
            self.sink.emit(fmt, where, context, call, key=(*at, i), index=i, tools=tools, trace_id=trace_id,
                           span_id=span_id, conversation_id=conv, incomplete=incomplete)

    def tool_span(self, attrs: dict[str, Any], where: Where, trace_id: str | None, span_id: str | None,
                  given: str | None, position: int) -> None:
        name = attrs.get("gen_ai.tool.name")
        if not isinstance(name, str) or not name:
            raise BadRecord("call without a tool name", "an execute_tool span without gen_ai.tool.name")
        call = Call(attrs.get("gen_ai.tool.call.id"), name, attrs.get("gen_ai.tool.call.arguments"))
        context, conv, pending = self.traces.get(trace_id or "", (None, None, {}))
        if context is None and self._waiting is not None:
            self._waiting.append((attrs, where, trace_id, span_id, given, position))
            return
        if isinstance(call.id, str) and pending.get(call.id):
            pending[call.id] -= 1  # the call its model span made: imported there, with the model's context
            self.sink.note("execute_tool spans of calls read from their model span (imported once)")
            return
        if context is None:
            self.sink.note("execute_tool spans without a model span (imported with an empty context)")
        at = (trace_id, span_id) if span_id else (where.file, where.record, position)
        self.sink.emit("otel-genai", where, context or _EMPTY, call, key=(*at, 0), index=0, tools=None,
                       trace_id=trace_id, span_id=span_id, conversation_id=given or conv or trace_id)


def _dropped(item: dict[str, Any]) -> int:
    """The attributes the SDK's limit dropped from a span or event (``droppedAttributesCount``)."""
    n = _get(item, "droppedAttributesCount", "dropped_attributes_count")
    try:
        return max(int(n), 0) if n is not None and not isinstance(n, bool) else 0
    except (TypeError, ValueError):
        return 0


def _remember(kept: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` under ``key``, with at most ``_CONTEXTS_KEPT`` keys: the oldest first written goes (a
    trace's spans arrive together, so memory stays flat and what is dropped is long finished). An OrderedDict:
    a plain dict emptied from its front scans its dead slots on every ``next(iter())``."""
    kept[key] = value
    if len(kept) > _CONTEXTS_KEPT:
        kept.popitem(last=False)


def reader(sink: Sink) -> Any:
    """The per-record function for ``runner.importers.traces.import_traces``."""
    return _Reader(sink).record


def looks_like(value: Any) -> bool:
    return isinstance(value, dict) and ("resourceSpans" in value or "resource_spans" in value)
