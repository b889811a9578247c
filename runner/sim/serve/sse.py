"""Streamed answers: each vendor's server-sent-event sequence for one simulated answer.

``stream: true`` is answered as the vendors document it, so an SDK's stream
accumulator assembles exactly the message the non-streamed request returns:

- OpenAI Chat Completions: ``data:`` lines of ``chat.completion.chunk`` — the role,
  the text in pieces, each tool call opened with its id and name and then its
  argument string in pieces (``tool_calls[].index``), a last chunk with
  ``finish_reason``, a usage chunk when ``stream_options.include_usage``, then
  ``data: [DONE]``;
- Anthropic Messages: ``message_start``, ``ping``, per content block
  ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
  ``input_json_delta``) / ``content_block_stop``, ``message_delta`` (stop reason and
  output tokens), ``message_stop``; a tool's input is the unstreamed answer's object,
  unless the request asks for fine-grained streaming of that tool
  (``eager_input_streaming``, or the older beta header), when it is the model's own
  unvalidated argument text;
- OpenAI Responses: ``response.created``, ``response.in_progress``, per output item
  ``response.output_item.added`` … ``response.output_item.done`` (text through
  ``content_part`` and ``output_text`` events, calls through
  ``function_call_arguments`` events), ``response.completed``; every event numbered
  by ``sequence_number``.

Functions here only build the frames; ``app.py`` writes them (and injects the
stream faults between them).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping
from typing import Any

import orjson

from runner.core.types import ChatResponse
from runner.sim.serve.codecs import AnthropicCodec
from runner.sim.serve.responses_codec import response_object

_WORDS = re.compile(r"\S+\s*|\s+")
_ARG_PIECE = 24  # characters of a tool call's argument string per delta


def _text_pieces(text: str, words: int = 3) -> list[str]:
    parts = _WORDS.findall(text)
    return ["".join(parts[i:i + words]) for i in range(0, len(parts), words)]


def _arg_pieces(raw: str) -> list[str]:
    return [raw[i:i + _ARG_PIECE] for i in range(0, len(raw), _ARG_PIECE)] or [""]


def _data_frame(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _event_frame(name: str, payload: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def openai_frames(answers: tuple[ChatResponse, ...], model: str, include_usage: bool) -> list[bytes]:
    cid, created = "chatcmpl-" + secrets.token_hex(12), int(time.time())

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        body: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                "system_fingerprint": None,
                                "choices": [{"index": index, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return _data_frame(body)

    frames: list[bytes] = []
    for i, a in enumerate(answers):
        frames.append(chunk(i, {"role": "assistant", "content": "" if a.text else None, "refusal": None}))
        frames.extend(chunk(i, {"content": piece}) for piece in _text_pieces(a.text))
        for k, c in enumerate(a.tool_calls):
            frames.append(chunk(i, {"tool_calls": [{"index": k, "id": c.id, "type": "function",
                                                    "function": {"name": c.name, "arguments": ""}}]}))
            frames.extend(chunk(i, {"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
                          for piece in _arg_pieces(c.raw_arguments) if piece)
        frames.append(chunk(i, {}, "tool_calls" if a.tool_calls else "stop"))
    if include_usage:
        out = sum(a.usage.output_tokens or 0 for a in answers)
        inp = (answers[0].usage.input_tokens or 0)
        frames.append(_data_frame({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                  "system_fingerprint": None, "choices": [],
                                  "usage": {"prompt_tokens": inp, "completion_tokens": out,
                                            "total_tokens": inp + out}}))
    frames.append(DONE)
    return frames


def anthropic_frames(answer: ChatResponse, model: str, eager: frozenset[str] = frozenset()) -> list[bytes]:
    """The Messages stream; ``eager`` names the tools whose input streams unbuffered (fine-grained streaming).

    A call to any other tool streams the compact JSON of its ``input`` object, exactly
    what the unstreamed answer holds (the API buffers and validates it first); a call
    to an eager tool streams the argument text as the model wrote it, so a broken
    call's ``partial_json`` pieces join to text that does not parse — as the vendor
    warns fine-grained streaming may deliver.
    """
    full = AnthropicCodec.encode(answer, model)
    calls = iter(answer.tool_calls)
    start = {**full, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": answer.usage.input_tokens, "output_tokens": 1}}
    frames = [_event_frame("message_start", {"type": "message_start", "message": start}),
              _event_frame("ping", {"type": "ping"})]
    for index, block in enumerate(full["content"]):
        if block["type"] == "text":
            frames.append(_event_frame("content_block_start", {"type": "content_block_start", "index": index,
                                                              "content_block": {"type": "text", "text": ""}}))
            frames.extend(_event_frame("content_block_delta", {"type": "content_block_delta", "index": index,
                                                              "delta": {"type": "text_delta", "text": piece}})
                          for piece in _text_pieces(block["text"]))
        else:
            call = next(calls)
            raw = call.raw_arguments if call.name in eager else orjson.dumps(block["input"]).decode()
            frames.append(_event_frame("content_block_start", {
                "type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            frames.extend(_event_frame("content_block_delta", {"type": "content_block_delta", "index": index,
                                                              "delta": {"type": "input_json_delta",
                                                                        "partial_json": piece}})
                          for piece in _arg_pieces(raw))
        frames.append(_event_frame("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(_event_frame("message_delta", {"type": "message_delta",
                                                "delta": {"stop_reason": full["stop_reason"], "stop_sequence": None},
                                                "usage": {"output_tokens": answer.usage.output_tokens}}))
    frames.append(_event_frame("message_stop", {"type": "message_stop"}))
    return frames


def responses_frames(answer: ChatResponse, model: str, body: Mapping[str, Any]) -> list[bytes]:
    final = response_object(answer, model, body, "completed")
    rid, created = final["id"], final["created_at"]
    seq = 0
    frames: list[bytes] = []

    def emit(kind: str, payload: dict[str, Any]) -> None:
        nonlocal seq
        frames.append(_event_frame(kind, {"type": kind, "sequence_number": seq, **payload}))
        seq += 1

    started = response_object(answer, model, body, "in_progress", response_id=rid, created=created)
    emit("response.created", {"response": started})
    emit("response.in_progress", {"response": started})
    for n, item in enumerate(final["output"]):
        if item["type"] == "message":
            part = item["content"][0]
            emit("response.output_item.added", {"output_index": n,
                                                "item": {**item, "status": "in_progress", "content": []}})
            empty = {**part, "text": ""}
            emit("response.content_part.added", {"item_id": item["id"], "output_index": n, "content_index": 0,
                                                 "part": empty})
            for piece in _text_pieces(part["text"]):
                emit("response.output_text.delta", {"item_id": item["id"], "output_index": n, "content_index": 0,
                                                    "delta": piece, "logprobs": []})
            emit("response.output_text.done", {"item_id": item["id"], "output_index": n, "content_index": 0,
                                               "text": part["text"], "logprobs": []})
            emit("response.content_part.done", {"item_id": item["id"], "output_index": n, "content_index": 0,
                                                "part": part})
        else:
            emit("response.output_item.added", {"output_index": n,
                                                "item": {**item, "status": "in_progress", "arguments": ""}})
            for piece in _arg_pieces(item["arguments"]):
                emit("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": n,
                                                                 "delta": piece})
            emit("response.function_call_arguments.done", {"item_id": item["id"], "output_index": n,
                                                           "name": item["name"], "arguments": item["arguments"]})
        emit("response.output_item.done", {"output_index": n, "item": item})
    emit("response.completed", {"response": final})
    return frames


def malformed_frame(api: str) -> bytes:
    """A chunk whose JSON does not parse (the ``bad_chunk`` stream fault)."""
    broken = b'{"id": "broken", "choices": [{"delta": {"content": "tru'
    if api == "openai":
        return b"data: " + broken + b"\n\n"
    name = b"content_block_delta" if api == "anthropic" else b"response.output_text.delta"
    return b"event: " + name + b"\ndata: " + broken + b"\n\n"
