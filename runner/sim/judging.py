"""The simulated correctness judge: a stand-in for an LLM asked "is this answer right?".

The ``judge`` probe sends a task, a reference answer and a candidate answer, with a
system prompt demanding ``VERDICT: CORRECT`` or ``VERDICT: INCORRECT``. The sim reads
them as a model would: the candidate is right when it states every number, date and
id of the reference, or (for a reference with none) shares most of its content words.
Then it errs at its persona's rate — a careful judge rarely, a reckless one often and
mostly in the lenient direction, as LLM judges do. Each draw is a pure function of
the request seed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from runner.core.seeding import uniform
from runner.core.types import ChatRequest, ChatResponse, Usage
from runner.sim.personas import persona_for_model
from runner.sim.reading import words

_CONTRACT = "VERDICT:"
_TOKEN_RE = re.compile(r"\b[A-Z]{2,}[-_]\d+\b|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b|(?<![\w.])\d+(?:\.\d+)?(?![\w])")
_FIELD_RE = re.compile(r"^(task|reference answer|candidate answer)\s*:\s*", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class _JudgeTraits:
    #: P(the verdict is wrong)
    error: float
    #: P(an error is a too-lenient CORRECT rather than a too-strict INCORRECT)
    lenient: float


JUDGES: Mapping[str, _JudgeTraits] = MappingProxyType({
    "careful": _JudgeTraits(error=0.04, lenient=0.5),
    "typical": _JudgeTraits(error=0.10, lenient=0.7),
    "reckless": _JudgeTraits(error=0.22, lenient=0.85),
})
_S_ERR, _S_DIR = 31, 32


def is_judge_request(request: ChatRequest) -> bool:
    messages = request.messages
    return bool(messages) and messages[0].role == "system" and _CONTRACT in messages[0].content


def _fields(text: str) -> dict[str, str]:
    parts = _FIELD_RE.split(text)
    return {parts[i].lower(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def _tokens(text: str) -> set[str]:
    out = set()
    for t in _TOKEN_RE.findall(text):
        try:
            out.add(repr(float(t)) if re.fullmatch(r"\d+(?:\.\d+)?", t) else t.upper().replace("_", "-"))
        except ValueError:
            out.add(t)
    return out


def _reads_correct(reference: str, candidate: str) -> bool:
    """The sim judge's own reading, before its persona's errors."""
    ref = _tokens(reference)
    if ref:
        return ref <= _tokens(candidate)
    ref_words = words(reference)
    return bool(ref_words) and len(ref_words & words(candidate)) >= 0.5 * len(ref_words)


def respond(request: ChatRequest) -> ChatResponse:
    traits = JUDGES[persona_for_model(request.model).name]
    user = next((m.content for m in request.messages if m.role == "user"), "")
    fields = _fields(user)
    verdict = _reads_correct(fields.get("reference answer", ""), fields.get("candidate answer", ""))
    seed = request.seed or 0
    if uniform(seed, _S_ERR) < traits.error:
        verdict = uniform(seed, _S_DIR) < traits.lenient
    why = "it states the reference's values" if verdict else "it does not state the reference's values"
    text = f"The candidate {why}.\n{_CONTRACT} {'CORRECT' if verdict else 'INCORRECT'}"
    return ChatResponse(text=text, usage=Usage(max(1, len(user) // 4), max(1, len(text) // 4)), finish_reason="stop")
