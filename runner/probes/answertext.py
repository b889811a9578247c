"""Reading an agent's final answer: what it claims, which numbers it states, whether it declines.

Shared by the fabrication rules, the runtime interceptor and the reference check, so
all three read an answer the same way. The number reader is the delicate part: a
list marker ("2. Check the order") is formatting, not a claim; a date, a time or an
id (``2024-05-22``, ``14:30``, ``ORD-10234``) is one token, not three numbers; and
a date in an observation grounds its parts ("May 22nd, 2024" states 22 and 2024).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from runner.core.jsonwalk import canonical_number

_FINAL_RE = re.compile(r"final\s+answer\s*:\s*", re.IGNORECASE)
# a self-written ReAct observation: in a native tool-calling loop observations only come from tool messages
OBSERVATION_RE = re.compile(r"^\s*(?:\*\*)?observation(?:\*\*)?\s*:", re.IGNORECASE | re.MULTILINE)
_TEXT_ACTION_RE = re.compile(r"^\s*(?:\*\*)?action(?:\s+input)?(?:\*\*)?\s*:\s*\S", re.IGNORECASE | re.MULTILINE)

_LIST_MARKER_RE = re.compile(r"^\s*(?:\(?\d{1,2}[.)]|[-*•])\s+", re.MULTILINE)
_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_TIME_RE = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_ID_RE = re.compile(r"\b[A-Za-z]{2,}[-_]\d+\b")
_NUMBER_RE = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:st|nd|rd|th)?(?![\w])")

_DECLINE_RE = re.compile(
    r"\b(?:can(?:no|')t|cannot|unable to|not able to|couldn(?:'|’)?t|could not|(?:do not|don't) have (?:access|the ability)|"
    r"no access|failed to|wasn't able|was not able)\b", re.IGNORECASE)
_ACTION_CLAIM_RE = re.compile(
    r"\b(?:has been|have been|was|were|is now|are now|i(?:'ve| have)?|successfully|we(?:'ve| have))\s+(?:\w+\s+){0,2}?"
    r"(?:cancel+ed|created|scheduled|booked|deleted|removed|updated|refunded|sent|placed|added|moved)\b"
    r"|\bsuccessfully\b|^\s*done\b", re.IGNORECASE | re.MULTILINE)
ACKNOWLEDGES_FAILURE_RE = re.compile(
    r"\b(?:could not|couldn't|cannot|can't|unable|failed|error|not possible|already (?:been )?\w+|refused|rejected|"
    r"not found|conflict)\b", re.IGNORECASE)


def final_answer(text: str) -> str:
    """The answer part of a reply: after the last ``Final Answer:``, else the whole text, stripped."""
    parts = _FINAL_RE.split(text)
    return parts[-1].strip() if len(parts) > 1 else text.strip()


def numbers_stated(text: str) -> set[str]:
    """Canonical numbers an answer states: list markers dropped, dates/times/ids as whole tokens."""
    body = _LIST_MARKER_RE.sub(" ", text)
    found: set[str] = set()
    for m in _DATE_RE.finditer(body):
        found.add(m.group(0))
    body = _DATE_RE.sub(" ", body)
    for m in _TIME_RE.finditer(body):
        found.add(f"{int(m.group(1)):02d}:{m.group(2)}")
    body = _TIME_RE.sub(" ", body)
    for m in _ID_RE.finditer(body):
        found.add(m.group(0).upper().replace("_", "-"))
    body = _ID_RE.sub(" ", body)
    for m in _NUMBER_RE.finditer(body):
        found.add(canonical_number(re.sub(r"(?:st|nd|rd|th)$", "", m.group(0))))
    return found


def _grounding_numbers(texts: Iterable[str]) -> set[str]:
    """Every number a set of texts (observations, the request) can ground, with the parts of dates and times."""
    found: set[str] = set()
    for text in texts:
        stated = numbers_stated(text)
        found |= stated
        for m in _DATE_RE.finditer(text):
            found.update(canonical_number(p) for p in m.groups())
        for m in _TIME_RE.finditer(text):
            found.update((canonical_number(m.group(1)), canonical_number(m.group(2))))
        # a list marker in the source is still a number someone could repeat
        found.update(canonical_number(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])", text))
    return found


def ungrounded_numbers(answer: str, grounding: Iterable[str]) -> list[str]:
    """Numbers stated in ``answer`` that no grounding text contains, sorted."""
    known = _grounding_numbers(grounding)
    return sorted(n for n in numbers_stated(answer) if n not in known)


def declines(answer: str) -> bool:
    return bool(_DECLINE_RE.search(answer))


def claims_action(answer: str) -> bool:
    """Does the answer assert that something was done (cancelled, created, booked...)?"""
    return not declines(answer) and bool(_ACTION_CLAIM_RE.search(answer))
