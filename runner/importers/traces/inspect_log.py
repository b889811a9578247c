"""inspect_ai ``.eval`` (and ``.json``) logs, through inspect_ai's own reader: the format is not a frozen spec.

``inspect_ai.log.read_eval_log_samples`` yields one sample at a time, so memory is one sample's.
A sample's ``messages`` are its conversation: each assistant message's tool calls are traces,
with the messages before it as context; the tools offered are the ones its first model event
was given. The sample (its ``uuid``, else ``id`` and epoch) is the conversation; the eval's
``run_id`` is kept as the trace id. Without inspect_ai installed the format says so in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.importers.traces._core import BadRecord, Call, Msg, Sink, Where, context_of, sid, tools_of


def _msg(m: Any) -> Msg | None:
    role = getattr(m, "role", None)
    if role in ("system", "user"):
        return Msg(role, [m.text])
    if role == "assistant":
        return Msg("assistant", [], [Call(tc.id, tc.function, tc.arguments) for tc in (m.tool_calls or [])])
    if role == "tool":
        content = m.content if isinstance(m.content, str) else m.text
        return Msg("tool", result_of=m.tool_call_id, result_name=m.function, result=content)
    return None


def _tools(sample: Any) -> list[dict[str, Any]] | None:
    for ev in getattr(sample, "events", None) or []:
        if getattr(ev, "event", None) == "model" and getattr(ev, "tools", None):
            return tools_of([{"name": t.name, "description": t.description,
                              "parameters": t.parameters.model_dump(exclude_none=True)} for t in ev.tools])
    return None


def read(path: Path, label: str, sink: Sink) -> int:
    """Import every sample of ``path``; returns the samples read."""
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples
    except ImportError:
        raise UserError("reading inspect_ai logs needs inspect_ai", file=path,
                        hint="pip install inspect-ai (its own reader is used: the format is not a frozen spec)") from None
    try:
        header = read_eval_log(str(path), header_only=True)
        samples = read_eval_log_samples(str(path), all_samples_required=False, resolve_attachments=True)
        run_id = header.eval.run_id
    except Exception as exc:  # inspect_ai raises many kinds on a bad file; it is one bad record here
        sink.bad(Where(label, 0), BadRecord("not an inspect_ai log", str(exc).splitlines()[0][:160] if str(exc) else
                                            type(exc).__name__))
        return 0
    n = 0
    for n, sample in enumerate(samples, 1):
        where = Where(label, n - 1)
        try:
            conv = sid(getattr(sample, "uuid", None) or f"{sample.id}:{sample.epoch}", "the sample id")
            tools = _tools(sample)
            msgs: list[Msg] = []
            index = 0
            for m in sample.messages:
                msg = _msg(m)
                if msg is None:
                    continue
                if msg.role == "assistant" and msg.calls:
                    context = context_of(msgs)
                    for call in msg.calls:
                        sink.emit("inspect", where, context, call, key=(run_id, conv, index), index=index,
                                  tools=tools, trace_id=run_id, span_id=None, conversation_id=conv)
                        index += 1
                msgs.append(msg)
            if index == 0:
                sink.note("samples without a tool call")
        except BadRecord as exc:
            sink.bad(where, exc, what=f"sample {sample.id}")
    return n
