"""What a reply without a tool call is: empty, a question to the user, or something else.

Real models served without their tool template reply in ways a plain ``"?" in text``
test misreads: an empty reply from a function-calling server is no
deliberate abstention, a small base model that repeats the user's own question
("Can you check the status of my order?") asks nothing, and chat-template debris
(``<<SYS>> I have a question…``, ``<start_of_turn>user …``) is the model writing
someone else's turn, not addressing the user. One deterministic rule, shared by every
probe that scores asking (``misselection``, ``negative``), so they cannot disagree:

1. **Template tokens** (``<start_of_turn>``, ``<|im_end|>``, ``[INST]``, ``<<SYS>>``,
   ``<s>``, ``<USER>`` …) are removed. A reply with no tool call and nothing left
   but whitespace is **empty** (``is_empty``): never a pass, an abstention, a
   decoy-free trial or a question.
2. The reply is cut into **turns** at role markers. Text before the first marker and
   after an assistant marker (``<start_of_turn>model``, ``<|im_start|>assistant``,
   ``[/INST]``, ``Assistant:``) is the model speaking; text after a user or system
   marker (``<USER>``, ``[INST]``, ``<<SYS>>``, ``<SYS>`` (``<</SYS>>`` is followed by
   the user's text, so it gives nothing back), ``<start_of_turn>user``, ``User:``,
   ``System:``) is debris and is never read as asking.
3. In the model's own text, a **question** is a sentence ending in ``?`` or a request
   phrase ("please provide", "could you send", "let me know" …). It **asks** when it is
   addressed to the user and is not
   - an **echo**: the same sentence (ratio ≥ 0.8 after normalising case, spacing and
     punctuation) as one of the request's sentences, or contained in them;
   - written in the **user's voice**: first person ("my", "I") with no "you"/"your";
   - a **stock offer** that requests nothing ("How can I help you?", "anything else?").
   A reply whose own text speaks as the user ("I have a question about…", "I need
   help", "I'm having trouble") is the model writing the user's turn: none of its
   questions ask. HTML entities (``&quot;``) are decoded first.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable
from difflib import SequenceMatcher
from functools import lru_cache

#: template tokens that carry no words: removed before anything is read
_TOKEN_RE = re.compile(
    r"<start_of_turn>\s*(?:user|model|system)?\b|<\|im_start\|>\s*(?:user|assistant|system)?\b"
    r"|<\|start_header_id\|>\s*\w*\s*<\|end_header_id\|>"
    r"|<\|[^|<>\n]{1,40}\|>"                                  # <|im_start|>, <|eot_id|>, <|endoftext|>
    r"|</?(?:s|bos|eos|pad|unk|start_of_turn|end_of_turn|start_of_image|end_of_image)>"
    r"|\[/?INST\]|<</?SYS>>|</?SYS>|</?(?:USER|ASSISTANT|SYSTEM|HUMAN|BOT|user|assistant|system|human|bot)>",
)
#: role markers that open someone else's turn (the model is writing debris from here on)
_OTHER_TURN_RE = re.compile(
    r"<start_of_turn>\s*(?:user|system)\b|<\|im_start\|>\s*(?:user|system)\b|<\|start_header_id\|>\s*(?:user|system)"
    r"|\[INST\]|<<SYS>>|<SYS>|<(?:USER|SYSTEM|HUMAN|user|system|human)>"
    r"|(?:^|\n)\s*(?:#{1,3}\s*)?(?:User|Human|System|Question)\s*:",
)
#: role markers that open the assistant's own turn again
_OWN_TURN_RE = re.compile(
    r"<start_of_turn>\s*model\b|<\|im_start\|>\s*assistant\b|<\|start_header_id\|>\s*assistant|\[/INST\]"
    r"|<(?:ASSISTANT|BOT|assistant|bot)>|(?:^|\n)\s*(?:#{1,3}\s*)?(?:Assistant|AI|Answer)\s*:",
)
_SENTENCE_RE = re.compile(r"[^.!?\n]*[?]+|[^.!?\n]+[.!]*")
_REQUEST_PHRASE_RE = re.compile(
    r"\b(?:please (?:provide|share|confirm|tell|send|give|specify|clarify)|could you (?:provide|share|confirm|tell|"
    r"send|give|specify|clarify)|can you (?:tell|give|share|confirm|provide|send|specify|clarify)|let me know|"
    r"i (?:need|will need|would need) (?:your|the|to know)|which one)\b", re.IGNORECASE)
_YOU_RE = re.compile(r"\b(?:you|your|yours)\b", re.IGNORECASE)
_FIRST_PERSON_RE = re.compile(r"\b(?:my|mine|i|i'm|i've|me)\b", re.IGNORECASE)
_WH_RE = re.compile(r"^\s*(?:which|what|who|where|when|how|do|does|did|is|are|should|shall|would|could|can|may)\b",
                    re.IGNORECASE)
_OFFER_RE = re.compile(
    r"\b(?:anything else|how (?:can|may) i (?:help|assist)|can i (?:help|assist)|is there anything|"
    r"what can i do for you|would you like (?:me to )?(?:help|anything))\b", re.IGNORECASE)
#: the reply opens the user's side of a conversation ("I have a question about…"): a model role-playing the user
_USER_VOICE_RE = re.compile(
    r"\bI\W{0,3}have\s+(?:a\s+|some\s+|a\s+few\s+|few\s+|two\s+|several\s+)?(?:quick\s+)?questions?\b"
    r"|\bmy question is\b|\bI\W{0,3}(?:need|want)\s+(?:some\s+)?help\b|\bI(?:'m|\s+am)\s+having\s+(?:trouble|a problem)",
    re.IGNORECASE)
_WORDS_RE = re.compile(r"[a-z0-9]+")

#: the template-token pattern as a string, for readers that apply it as a polars expression (runner.analysis.replies)
TOKEN_PATTERN = _TOKEN_RE.pattern

_ECHO_RATIO = 0.8


def strip_tokens(text: str) -> str:
    """``text`` without template tokens (``<start_of_turn>``, ``<|im_end|>``, ``[INST]`` …), trimmed."""
    return _TOKEN_RE.sub(" ", text or "").strip()


def is_empty(text: str, n_tool_calls: int) -> bool:
    """No tool call and no words: nothing but whitespace and template tokens."""
    return n_tool_calls == 0 and not strip_tokens(text)


def own_text(text: str) -> str:
    """The parts of a reply the model says itself: debris after user/system role markers removed."""
    text = text or ""
    out: list[str] = []
    pos, own = 0, True
    while pos < len(text):
        pattern = _OTHER_TURN_RE if own else _OWN_TURN_RE
        m = pattern.search(text, pos)
        end = m.start() if m else len(text)
        if own:
            out.append(text[pos:end])
        if m is None:
            break
        pos, own = max(m.end(), pos + 1), not own
    return strip_tokens(" ".join(out))


def _norm(text: str) -> str:
    return " ".join(_WORDS_RE.findall(text.lower()))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.findall(text) if s.strip()]


@lru_cache(maxsize=1024)
def _request_sentences(request: str) -> tuple[str, ...]:
    """The request's sentences, cut once per request rather than once per reply."""
    return tuple(_sentences(request))


def _is_echo(sentence: str, request_sentences: Iterable[str]) -> bool:
    """The sentence repeats one of the request's (contained in it, or ≥ ``_ECHO_RATIO`` alike).

    The verdict of ``SequenceMatcher(None, own, theirs).ratio() >= _ECHO_RATIO`` on the normalised
    texts, on every pair (``tests/probes/test_replies.py`` keeps that rule and compares the two on
    generated pairs near the threshold), at a fraction of the cost: difflib's ratio is ``2·M/T``
    with ``M`` the characters of its matching blocks, and ``M`` is at most the shorter length and
    at most the characters the two share as multisets, so either bound below the threshold decides
    "no echo" exactly; only a pair both bounds leave undecided pays for the full comparison
    (the comparison was ≈ 35% of a simulated trial).
    """
    own = _norm(sentence)
    if not own:
        return True
    return any(_echoes(own, theirs) for theirs in _request_norms(tuple(request_sentences)))


@lru_cache(maxsize=1024)
def _request_norms(request_sentences: tuple[str, ...]) -> tuple[str, ...]:
    """The request's normalised, non-empty sentences: a probe asks the same request many times."""
    return tuple(n for n in map(_norm, request_sentences) if n)


@lru_cache(maxsize=8192)
def _echoes(own: str, theirs: str) -> bool:
    """``own`` repeats ``theirs`` (both normalised, non-empty): containment, then the exact bounds, then difflib.

    Cached: the simulated agents and real models repeat the same few sentences across runs.
    """
    if own in theirs and len(own.split()) >= 3:
        return True
    total = len(own) + len(theirs)
    # each bound is computed as difflib computes its ratio (2.0 * n / total), so a bound below
    # the threshold puts the ratio below it in floating point too (the ratio's n is smaller)
    if 2.0 * min(len(own), len(theirs)) / total < _ECHO_RATIO:
        return False
    if 2.0 * _shared_chars(own, theirs) / total < _ECHO_RATIO:
        return False
    return SequenceMatcher(None, own, theirs).ratio() >= _ECHO_RATIO


def _shared_chars(a: str, b: str) -> int:
    """Characters ``a`` and ``b`` share as multisets (difflib's ``quick_ratio`` numerator)."""
    counts = Counter(b)
    shared = 0
    for ch, n in Counter(a).items():
        m = counts.get(ch, 0)
        shared += n if n < m else m
    return shared


def questions(text: str, request: str) -> list[str]:
    """The model's own sentences that ask the user for something (see the module docstring)."""
    request_sentences = _request_sentences(request or "")
    own = html.unescape(own_text(text))
    if _USER_VOICE_RE.search(own):
        return []  # the model is writing the user's turn: its questions are the user's
    out: list[str] = []
    for sentence in _sentences(own):
        question = sentence.endswith("?")
        phrase = _REQUEST_PHRASE_RE.search(sentence) is not None
        if not (question or phrase):
            continue
        if _is_echo(sentence, request_sentences):
            continue
        addressed = _YOU_RE.search(sentence) is not None
        if _FIRST_PERSON_RE.search(sentence) and not addressed and not phrase:
            continue  # the user's voice ("Can I check my order?"), not a question to the user
        if _OFFER_RE.search(sentence) and not phrase:
            continue  # "Is there anything else I can help with?" requests nothing
        if not (addressed or phrase or (question and _WH_RE.search(sentence))):
            continue
        out.append(sentence)
    return out


@lru_cache(maxsize=4096)
def asks_user(text: str, request: str) -> bool:
    """The reply asks the user for something the request did not already say (the shared rule).

    Cached: a pure function of the two texts, and the simulated agents and real models give the same few
    replies to a request run after run."""
    return bool(text) and bool(questions(text, request))
