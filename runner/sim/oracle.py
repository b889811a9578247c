"""The ``oracle`` persona of the simulated agent: it answers every case as the case's key says.

``provider: sim, model: oracle`` calls the expected tool with the expected arguments, asks where asking is
right, declines where no call is right, audits a trace by naming exactly its gold phantoms, and completes a
propagation task by making its reference call and stating its expected values. It proves a case file
passable: a case the oracle fails is a case no agent can pass (``trialgrid validate --oracle``), which is a mistake in the
case, not in the model. It is not a model of any agent, so its rates measure nothing else.

A real model sees only the request; the oracle also reads the answer key. The keys are what the probes a sweep
loads expose through the probe seam (``Probe.answer_keys``; ``learn``, called by ``runner.execution.run`` as it
builds a sweep's trial runner with an oracle model, in whichever process runs the trials: a Ray worker too, and
``trialgrid serve --keys SWEEP``), found again by the request's fingerprint: its messages and the names of the tools
offered (the order is shuffled per trial, so it is not part of the fingerprint). A multi-step probe's key is
its conversation's opening, found by the fingerprint of the request's first messages; the oracle's turn is read
from what follows them. Two cases that make the same request with different keys cannot both be passed by
anyone: the first learned keeps the fingerprint, and the other fails — which is the truth about it. Requests it
has no key for (another process's sweep, the judge probe, whose traces have no right answer but people's) are a
fatal error saying so, never a guess. In a propagation trial with an injected error the oracle still states the
key's values; it proves a task passable, not an agent's reaction to a corrupted step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from runner.core.types import ChatRequest, ChatResponse, Message, ToolCall, Usage
from runner.probes import Probe
from runner.probes.misselection import MisselectionProbe, Triple
from runner.probes.negative import NegativeCase, NegativeProbe, bfcl_checker
from runner.probes.negative.bfcl_source import java_text, js_text
from runner.probes.phantom import PhantomProbe, Trace
from runner.probes.propagation import PropagationProbe
from runner.probes.propagation.agenttasks import Task, answer_matches
from runner.providers.errors import ErrorKind, ProviderError

#: the persona's name, as a sim model string spells it (``oracle``, ``sim-oracle``)
ORACLE = "oracle"
#: probe kinds whose cases the oracle can answer
KINDS = (NegativeProbe.kind, MisselectionProbe.kind, PhantomProbe.kind, PropagationProbe.kind)

_ASK = ("I can do that once I have everything it needs. Could you tell me the {fields}? "
        "I would rather ask than guess.")
_DECLINE = "I won't do that without more from you."

#: fingerprint of a single-turn request → the answer its key gives
_ANSWERS: dict[str, ChatResponse] = {}
#: fingerprint of a multi-step conversation's opening → its task; and the lengths of the openings learned
_OPENINGS: dict[str, Task] = {}
_OPENING_LENGTHS: set[int] = set()


def fingerprint(messages: Iterable[Message], tool_names: Iterable[str]) -> str:
    blob = json.dumps([[(m.role, m.content) for m in messages], sorted(tool_names)], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def learn(probes: Sequence[Probe]) -> None:
    """Remember the answer to every request these probes will make (``Probe.answer_keys``; a probe with no keys,
    or a case of a kind the oracle does not know, teaches nothing).

    Within one sweep the first case of a request keeps it; a later load replaces what an earlier one taught
    (a case file edited between two loads in one process is answered as it is now).
    """
    learned: dict[str, ChatResponse] = {}
    openings: dict[str, Task] = {}
    for probe in probes:
        for key in probe.answer_keys():
            request = fingerprint(key.messages, key.tool_names)
            if key.opening and isinstance(key.case, Task):
                openings.setdefault(request, key.case)
                _OPENING_LENGTHS.add(len(key.messages))
            elif (answer := _answer(key.case)) is not None:
                learned.setdefault(request, answer)
    _ANSWERS.update(learned)
    _OPENINGS.update(openings)


def _answer(case: object) -> ChatResponse | None:
    if isinstance(case, NegativeCase):
        return negative_answer(case)
    if isinstance(case, Triple):
        return _reply("", (ToolCall(name=case.expected_tool, raw_arguments="{}", arguments={}, id="call_0"),))
    if isinstance(case, Trace):
        return _reply(json.dumps({"phantom_fields": list(case.gold_phantoms or ())}), ())
    return None


@lru_cache(maxsize=256)
def is_oracle(model: str) -> bool:
    """Whether a sim model string names the oracle: its first token naming a persona is ``oracle``.

    Cached: asked once per simulated request of a sweep's few model strings (``PERSONAS`` is read-only)."""
    from runner.sim.personas import PERSONAS, _split

    return next((t for t in _split(model) if t in PERSONAS or t == ORACLE), None) == ORACLE


def respond(request: ChatRequest) -> ChatResponse:
    """The key's answer to ``request``; a fatal error when the oracle holds no key for it."""
    names = [t.name for t in request.tools]
    answer = _ANSWERS.get(fingerprint(request.messages, names))
    for n in sorted(_OPENING_LENGTHS) if answer is None else ():
        task = _OPENINGS.get(fingerprint(request.messages[:n], names))
        if task is not None:
            answer = task_answer(task, request.messages[n:])
            break
    if answer is not None:  # billed as a vendor would bill this request: its length, about 4 characters a token
        return dataclasses.replace(answer, usage=Usage(input_tokens(request), answer.usage.output_tokens))
    raise ProviderError(ErrorKind.FATAL, "the oracle holds no answer key for this request: it answers the "
                        f"cases of {', '.join(KINDS)} probes of a sweep loaded in this process")


def input_tokens(request: ChatRequest) -> int:
    """The request's input tokens at about 4 characters a token: its messages, and its tools as JSON schema."""
    chars = sum(len(m.content) + sum(len(c.raw_arguments) + len(c.name) for c in m.tool_calls)
                for m in request.messages)
    chars += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters, ensure_ascii=False))
                 for t in request.tools)
    return max(1, chars // 4)


def task_answer(task: Task, after: Sequence[Message]) -> ChatResponse:
    """A propagation task's next turn: its reference call first, then (once a result came back) a final answer
    stating every expected value a tool result holds — what an honest agent can know. An expected value no result
    holds is left out, so the answer is scored wrong: the truth about a task whose ``expect`` its reference call
    does not return. A task with no reference call is answered at once with nothing, which is wrong too."""
    results = [m.content for m in after if m.role == "tool"]
    if task.reference is not None and not results:
        args = dict(task.reference.arguments)
        call = ToolCall(name=task.reference.tool, raw_arguments=json.dumps(args, ensure_ascii=False), arguments=args,
                        id="call_0")
        return _reply("", (call,))
    values = "; ".join(v for v in task.expect if any(answer_matches(r, [v]) for r in results)) or "I do not know"
    if task.reference is not None and task.reference.error is not None:  # the right outcome is the refusal, said
        return _reply(f"Final Answer: that could not be done: {task.reference.tool} refused it "
                      f"({task.reference.error}): {values}", ())
    return _reply(f"Final Answer: {values}", ())


def negative_answer(case: NegativeCase) -> ChatResponse:
    """What passes ``case``: its expected calls with their expected arguments, or a question, or words."""
    expect = case.expect_action
    calls: list[ToolCall] = []
    if case.expect_calls:
        calls += [_call(want.tool, want.args, len(calls), _required(case, want.tool)) for want in case.expect_calls]
    if expect not in (None, "ask_user", "no_call", "any_call") and expect not in {c.name for c in calls}:
        calls.insert(0, _call(expect, case.expect_args, len(calls), _required(case, expect)))
    if expect == "any_call" and not calls:
        tool = next((t for t in _tool_names(case) if t not in case.must_not_call), None)
        if tool is not None:
            calls.append(_call(tool, {}, 0))
    if calls:
        return _reply("", tuple(_as_source(case, c) for c in calls))
    if expect == "ask_user":
        fields = [f.rpartition(".")[2].replace("_", " ") for f in (case.allow_ask_fields or list(case.sentinels))]
        return _reply(_ASK.format(fields=" and ".join(fields) or "details I need"), ())
    return _reply(_DECLINE, ())


def _as_source(case: NegativeCase, call: ToolCall) -> ToolCall:
    """A call of an imported BFCL Java or JavaScript case, its values written as code (as BFCL asks)."""
    if case.bfcl is None or call.arguments is None:
        return call
    lang = bfcl_checker.language(case.bfcl.category)
    if lang == "python":
        return call
    doc = next((f for f in case.bfcl.functions if bfcl_checker.call_name(f["name"]) == call.name), None)
    props = ((doc or {}).get("parameters") or {}).get("properties") or {}
    text = java_text if lang == "java" else js_text
    args = {k: text(v, props[k]) if isinstance(props.get(k), dict) and "type" in props[k] else v
            for k, v in call.arguments.items()}
    return ToolCall(name=call.name, raw_arguments=json.dumps(args, ensure_ascii=False), arguments=args, id=call.id)


def _tool_names(case: NegativeCase) -> list[str]:
    names = []
    for tool in case.tools or ():
        if isinstance(tool, Mapping):
            body = tool.get("function", tool)
            if isinstance(body, Mapping) and isinstance(body.get("name"), str):
                names.append(body["name"])
    return names


def _required(case: NegativeCase, tool: str) -> frozenset[str]:
    """The arguments BFCL's function document requires (an optional expected value is still sent for them)."""
    if case.bfcl is None:
        return frozenset()
    doc = next((f for f in case.bfcl.functions if bfcl_checker.call_name(f["name"]) == tool), None)
    return frozenset(((doc or {}).get("parameters") or {}).get("required") or ())


def _call(tool: str, expected: Mapping[str, Any], index: int, required: frozenset[str] = frozenset()) -> ToolCall:
    """The first value of each expected argument; an optional one left out unless the schema requires it."""
    args = {name: value for name, want in expected.items() if (value := _value(want, keep=name in required)) is not _OMIT}
    raw = json.dumps(args, ensure_ascii=False)
    return ToolCall(name=tool, raw_arguments=raw, arguments=args, id=f"call_{index}")


#: an expected argument the oracle leaves out
_OMIT = object()


def _value(want: Any, keep: bool = False) -> Any:
    """The first value an expected argument accepts (an expected null is sent as null, which BFCL wants
    explicit); ``_OMIT`` for an optional one, unless ``keep`` (the schema requires it)."""
    if isinstance(want, Mapping) and "one_of" in want and set(want) <= {"one_of", "optional"}:
        if want.get("optional") and not keep:
            return _OMIT  # left out: always allowed (BFCL lists "" for it)
        options = want.get("one_of") or [None]
        return _value(options[0])
    if isinstance(want, Mapping):
        return {k: v for k, w in want.items() if (v := _value(w)) is not _OMIT}
    if isinstance(want, list):
        return [_value(w) for w in want]
    return want


def _reply(text: str, calls: tuple[ToolCall, ...]) -> ChatResponse:
    out_chars = len(text) + sum(len(c.raw_arguments) + len(c.name) for c in calls)
    return ChatResponse(text=text, tool_calls=calls, usage=Usage(1, max(1, out_chars // 4)),
                        finish_reason="tool_calls" if calls else "stop")
