"""Is each tool-call argument grounded in what the model was shown? One containment rule for every probe.

Groundedness is a data-flow check on every argument: a value copied or clearly derived
from the context the model was shown — the system prompt, the user turns, the results
of earlier tool calls — is grounded; anything else is a phantom. The ``phantom`` probe's
deterministic baseline, the common ``ungrounded_args`` / ``all_args_grounded`` columns of
``misselection`` and ``negative``, misselection's ``expected_grounded`` and negative's
strict ``invented`` all call :func:`check_call`, so there is one rule, not four.

The rule, per scalar leaf of the arguments (``runner.core.jsonwalk.leaves``):

1. booleans, nulls and empty strings carry no token a context could contain: grounded;
2. a value that only restates the parameter's own name (``payroll_vendor="payroll
   vendor"``, ``email="email"``) names the slot, not a value: ungrounded unless the
   context names it explicitly — quoted, or not as a generic noun phrase (``our payroll
   vendor``, ``a new alarm`` are the unnamed referent copied in instead of asked about;
   ``the password is 'password'`` and ``10 units`` are values);
3. a value whose normalised form (case, whitespace, number formatting; ``_`` and ``-``
   read as spaces) occurs in the context is grounded. Numbers must match a whole
   number (``5`` is not in ``2025``), also one written against a unit (``5m``, ``10个``). The tool schema is *not* context: an enum option
   or a description's example counts only where the context itself says it;
4. anything else is ungrounded, with the most specific reason: a placeholder
   (``YYYY-MM``, ``<id>``, ``string``), a copy of the schema description, an enum
   option the context does not support, or simply not in the context.

What it cannot see (docs/probes.md, "Grounding"): paraphrase (``customer_request`` for
"I don't need it anymore"), derivation (tomorrow's date from today's, a sum, a unit
conversion), and a generic referent that is not the parameter's name ("billing provider"
for ``vendor``) — those need a reader, which is what the phantom probe's auditor is for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

import pyarrow as pa

from runner.core.jsonwalk import (
    canonical_number,
    contained,
    format_value,
    key_names,
    leaves,
    normalise,
    numbers_in,
    scalar_text,
    top_field,
)
from runner.core.types import Message, ToolCall, ToolSpec


class Reason(StrEnum):
    """Why a value is ungrounded, most specific first (the order :func:`check_value` tries them)."""

    RESTATES_PARAMETER = "restates the parameter name"
    PLACEHOLDER = "a placeholder"
    DESCRIPTION_ECHO = "copies the schema description"
    ENUM_UNSUPPORTED = "a schema enum option the context does not support"
    NOT_IN_CONTEXT = "not in the context"


#: the common outcome columns every probe that scores an agent's tool calls writes (``outcome_columns``)
GROUNDING_FIELDS: tuple[pa.Field, ...] = (
    pa.field("ungrounded_args", pa.list_(pa.string())),     # tool.arg, once each, in call order
    pa.field("ungrounded_values", pa.list_(pa.string())),   # tool.path=value (reason)
    pa.field("all_args_grounded", pa.bool_()),              # null: no call whose arguments parsed
)

_SEP_RE = re.compile(r"[_\-]+")
# a number written against a unit or a word (5m, 298K, 10个, 18th, 16x16, p4), which jsonwalk's number pattern
# (whole words only) leaves out; still a whole number: no digit on either side, and no leading zero (05 in a date)
_LOOSE_NUMBER_RE = re.compile(r"(?<![\d.,])(?:[1-9]\d{0,2}(?:,\d{3})+|[1-9]\d*|0)(?:\.\d+)?(?!\.?\d|,\d{3})")
# what makes a restated parameter name a generic referent: "our payroll vendor", "a new alarm", "the usual carrier"
_GENERIC_BEFORE_RE = re.compile(r"(?:^|[^\w'\"`])(?:our|my|your|their|his|her|its|the|a|an|this|that|some|any)\s+"
                                r"(?:[a-z0-9]+\s+)?$")
_WS_RE = re.compile(r"\s+")
_WORD_RE = re.compile(r"[a-z0-9]+")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# a template rather than a value: <id>, {name}, [email], a date/time mask, a type name, x-runs
_PLACEHOLDER_RE = re.compile(
    r"<[^<>]+>|\{[^{}]*\}|\[[^\[\]]+\]"
    r"|(?=.*(?:yyyy|yy|mm|dd|hh))(?:yyyy|yy|mm|dd|hh|ss|[-/.:t ])+"
    r"|x{3,}|\.{3}|…"
    r"|string|str|text|integer|int|number|float|double|boolean|bool|object|array|list|dict|value|"
    r"example|placeholder|todo|tbd|your[ _-][a-z_ ]+",
    re.IGNORECASE,
)


def _fold(text: str) -> str:
    """``normalise``d text with ``_``/``-`` read as spaces: ``last_month`` is "last month"."""
    return _WS_RE.sub(" ", _SEP_RE.sub(" ", text)).strip()


def _words(text: str) -> list[str]:
    """Lower-case words, snake/camel case split, a plural ``s`` dropped: ``payrollVendors`` → payroll, vendor."""
    spaced = _CAMEL_RE.sub(" ", text).lower()
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in _WORD_RE.findall(spaced)]


class GroundingContext:
    """The text a model was shown, normalised once, that values are looked up in.

    A context also remembers the verdict of each scalar leaf it has judged (``check_call``):
    the verdict is a pure function of the leaf, its path, the tool's schema and this context,
    and the simulated agents and real models send the same few values again and again
    (issue 32: the checks were a quarter of a simulated trial). ``of_messages`` hands out one
    context per distinct conversation text, so the memo is shared across a probe's runs.
    """

    __slots__ = ("_folded", "_memo", "_numbers", "_text")

    #: leaf verdicts a context keeps; past this it judges without remembering (bounded memory)
    _MEMO_LIMIT = 4096

    def __init__(self, texts: Iterable[str]) -> None:
        self._text = normalise("\n".join(texts))
        self._numbers = numbers_in(self._text) | {canonical_number(m.group(0))
                                                  for m in _LOOSE_NUMBER_RE.finditer(self._text)}
        self._folded = _fold(self._text)
        # (id(spec), path, type, value) -> (spec, verdict); the entry holds the spec, so its id is not reused
        self._memo: dict[tuple[Any, ...], tuple[ToolSpec | None, Reason | None]] = {}

    @classmethod
    def of_values(cls, shown: Any) -> GroundingContext:
        """From a JSON tree (the phantom trace's context): its values only — a key such as ``user`` or ``total``
        is structure, not something said. One (cached) context per distinct text, as ``of_messages``: the calls
        of one conversation audited without its tool results share it, and its memo."""
        return _context_of_texts(tuple(str(v) for _, v in leaves(shown) if v is not None))

    @classmethod
    def of_messages(cls, messages: Sequence[Message]) -> GroundingContext:
        """From a conversation: system, user and tool-result turns. The assistant's own earlier words ground
        nothing (it could have invented them there first). One (cached) context per distinct text."""
        return _context_of_texts(tuple(m.content for m in messages if m.role in ("system", "user", "tool")))

    def verdict(self, value: Any, path: str, spec: ToolSpec | None) -> Reason | None:
        """``check_value`` of one leaf of a call to ``spec``'s tool, remembered for hashable scalars."""
        if value is None or value.__class__ not in _MEMO_TYPES:
            return check_value(value, path, self, _param_schema(spec, path))
        key = (id(spec), path, value.__class__, value)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is spec:
            return hit[1]
        reason = check_value(value, path, self, _param_schema(spec, path))
        if len(self._memo) < self._MEMO_LIMIT:
            self._memo[key] = (spec, reason)
        return reason

    def grounds(self, value: Any) -> bool:
        """The containment test: ``value``'s normalised form occurs in this context."""
        if contained(value, self._text, self._numbers):
            return True
        text = scalar_text(value)
        return text is not None and not isinstance(value, (int, float)) and _fold(text) in self._folded

    def names_explicitly(self, value: str) -> bool:
        """Some occurrence of ``value`` is not a generic noun phrase: quoted, or after anything but a determiner
        ("the password is 'password'", "10 units", "towards feeling"; not "our payroll vendor")."""
        needle = _fold(normalise(value))
        if not needle:
            return False
        for m in re.finditer(rf"(?<![\w]){re.escape(needle)}(?![\w])", self._folded):
            if not _GENERIC_BEFORE_RE.search(self._folded[:m.start()]):
                return True
        return False


#: scalar leaf types whose verdicts a context remembers (hashable, compared by value and type)
_MEMO_TYPES = frozenset({str, int, float, bool})


@lru_cache(maxsize=256)
def _context_of_texts(texts: tuple[str, ...]) -> GroundingContext:
    """The context of these texts, built once: a probe asks the same conversation in many runs."""
    return GroundingContext(texts)


@dataclass(frozen=True, slots=True)
class Finding:
    """One ungrounded leaf: where it is, what it holds and why it is not grounded."""

    tool: str
    path: str
    value: Any
    reason: Reason

    @property
    def field(self) -> str:
        """The argument it belongs to, ``tool.arg`` (the unit of ``ungrounded_args`` and of phantom gold)."""
        return f"{self.tool}.{top_field(self.path)}"

    def describe(self) -> str:
        return f"{self.tool}.{self.path}={format_value(self.value)} ({self.reason.value})"


def _param_schema(spec: ToolSpec | None, path: str) -> Mapping[str, Any]:
    """The JSON schema of the parameter a leaf sits in (through ``properties`` and array ``items``), or ``{}``."""
    node: Any = spec.parameters if spec is not None else {}

    def unwrap(n: Any) -> Any:
        while isinstance(n, Mapping) and isinstance(n.get("items"), Mapping):
            n = n["items"]
        return n

    for name in key_names(path):
        node = unwrap(node)
        props = node.get("properties") if isinstance(node, Mapping) else None
        node = props.get(name) if isinstance(props, Mapping) else None
    if path.endswith("]"):
        node = unwrap(node)
    return node if isinstance(node, Mapping) else {}


def _restates_name(value: Any, path: str) -> bool:
    """The value's words are all words of its parameter's name: the slot restated, not filled."""
    if not isinstance(value, str):
        return False
    names = key_names(path)
    if not names:
        return False
    said = _words(value)
    return bool(said) and set(said) <= set(_words(names[-1]))


def check_value(value: Any, path: str, context: GroundingContext, schema: Mapping[str, Any]) -> Reason | None:
    """Why one leaf is ungrounded, or ``None`` when it is grounded (the rule of the module docstring)."""
    text = scalar_text(value)
    if text is None:
        return None
    if _restates_name(value, path) and not context.names_explicitly(value):
        return Reason.RESTATES_PARAMETER
    if context.grounds(value):
        return None
    if isinstance(value, str) and _PLACEHOLDER_RE.fullmatch(value.strip()):
        return Reason.PLACEHOLDER
    description = schema.get("description")
    if isinstance(description, str) and len(text) >= 4 and _fold(text) in _fold(normalise(description)):
        return Reason.DESCRIPTION_ECHO
    enum = schema.get("enum")
    if isinstance(enum, list) and any(scalar_text(option) == text for option in enum):
        return Reason.ENUM_UNSUPPORTED
    return Reason.NOT_IN_CONTEXT


def check_call(tool: str, arguments: Mapping[str, Any] | None, context: GroundingContext,
               spec: ToolSpec | None = None) -> list[Finding]:
    """Every ungrounded leaf of one call's arguments (none for arguments that did not parse: nothing to read)."""
    out: list[Finding] = []
    for path, value in leaves(arguments or {}):
        reason = context.verdict(value, path, spec)
        if reason is not None:
            out.append(Finding(tool, path, value, reason))
    return out


def fields_of(findings: Iterable[Finding]) -> list[str]:
    """The ``tool.arg`` of each finding, once each, in order."""
    out: list[str] = []
    for f in findings:
        if f.field not in out:
            out.append(f.field)
    return out


def check_calls(calls: Sequence[ToolCall], context: GroundingContext,
                tools: Iterable[ToolSpec] = ()) -> tuple[list[Finding], dict[str, Any]]:
    """The findings of every call, and the common outcome columns (``GROUNDING_FIELDS``) they make."""
    specs = {t.name: t for t in tools}
    findings: list[Finding] = []
    parsed = 0
    for call in calls:
        if call.arguments is None:
            continue  # a broken call is counted as such (unparsable_call), not read for values
        parsed += 1
        findings += check_call(call.name, call.arguments, context, specs.get(call.name))
    return findings, {
        "ungrounded_args": fields_of(findings),
        "ungrounded_values": [f.describe() for f in findings],
        "all_args_grounded": None if parsed == 0 else not findings,
    }
