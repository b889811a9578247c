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
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from runner.core.columns import Column, ListOf
from runner.core.jsonwalk import (
    canonical_number,
    format_value,
    key_names,
    leaves,
    normalise,
    number_form,
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
GROUNDING_FIELDS: tuple[Column, ...] = (
    Column("ungrounded_args", ListOf("string")),     # tool.arg, once each, in call order
    Column("ungrounded_values", ListOf("string")),   # tool.path=value (reason)
    Column("all_args_grounded", "bool"),              # null: no call whose arguments parsed
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


class _Bounded(dict[Any, Any]):
    """A dict that forgets everything once it holds ``limit`` entries: a cache of bounded size with no bookkeeping
    per hit (the audit meets a conversation's values in a burst, then rarely again)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Any, value: Any) -> Any:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


def _read(texts: Sequence[str]) -> tuple[str, str, frozenset[str]]:
    """What a context holds of ``texts``: their normalised text, that text folded, and the numbers it writes.

    Reading ``a + b`` gives the reading of ``a`` and the reading of ``b`` joined by one space (the empty ones left
    out), because nothing the normalisation reads spans a space: case folds character by character, a number or a
    ``_``/``-`` run holds no space, and a whitespace run collapses to one. So a context extends by new texts without
    reading the earlier ones again (``tests/probes/test_grounding_incremental.py`` holds the two readings equal)."""
    text = normalise("\n".join(texts))
    numbers = numbers_in(text)
    numbers.update(canonical_number(m.group(0)) for m in _LOOSE_NUMBER_RE.finditer(text))
    return text, _fold(text), frozenset(numbers)


def _joined(a: str, b: str) -> str:
    return f"{a} {b}" if a and b else a or b


@dataclass(frozen=True, slots=True)
class _Leaf:
    """What the rule reads of one leaf value at one path, whatever the context: worked out once per distinct
    (value, path), so that judging it in a context is a few lookups (``GroundingContext._holds``)."""

    text: str | None          # ``scalar_text``: None is nothing to ground (grounded)
    restates: bool            # the value only restates its parameter's name
    number: str | None        # the canonical number it must match as a whole number of the context
    substring: str | None     # the normalised text it must occur as (a value that is not a number)
    folded: str | None        # or its folded form (not for int / float values)
    placeholder: bool


_NOTHING = _Leaf(None, False, None, None, None, False)
#: leaf readings remembered, by (type, value, path), for values up to this many characters (at most some
#: 30 MB held: argument values are mostly short, and a long one is read each time)
_LEAF_MAX_CHARS = 256
_leaf_cache = _Bounded(32_768)


def _read_leaf(value: Any, path: str) -> _Leaf:
    text = scalar_text(value)
    if text is None:
        return _NOTHING
    restates = _restates_name(value, path)
    if isinstance(value, (int, float)):
        return _Leaf(text, restates, text, None, None, False)
    number = number_form(text)
    placeholder = isinstance(value, str) and _PLACEHOLDER_RE.fullmatch(value.strip()) is not None
    return _Leaf(text, restates, number, text if number is None else None, _fold(text), placeholder)


def _leaf(value: Any, path: str) -> _Leaf:
    """``_read_leaf``, remembered for hashable scalars of bounded size."""
    cls = value.__class__
    if cls not in _MEMO_TYPES or (cls is str and len(value) > _LEAF_MAX_CHARS):
        return _read_leaf(value, path)
    key = (cls, value, path)
    hit: _Leaf | None = _leaf_cache.get(key)
    if hit is None:
        hit = _leaf_cache.put(key, _read_leaf(value, path))
    return hit


class GroundingContext:
    """The text a model was shown, normalised once, that values are looked up in.

    A context also remembers the verdict of each scalar leaf it has judged (``check_call``):
    the verdict is a pure function of the leaf, its path, the tool's schema and this context,
    and the simulated agents and real models send the same few values again and again
    (the checks were a quarter of a simulated trial). ``of_messages`` and ``of_values``
    hand out one context per distinct conversation text, so the memo is shared across a probe's
    runs; and a context whose texts start with an earlier context's texts (the next call of a
    conversation: the same system prompt and turns, plus new tool results) is that context
    extended by the new texts only (rebuilding each call's context was a third of an audit).
    """

    __slots__ = ("_folded", "_memo", "_numbers", "_text", "_texts")

    #: leaf verdicts a context keeps; past this it judges without remembering (bounded memory: the values that
    #: repeat come early: 66% of the quickstart's lookups hit at 1,024, 69% at 4,096)
    _MEMO_LIMIT = 1024

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = tuple(texts)
        self._text, self._folded, self._numbers = _read(self._texts)
        # (id(spec), path, type, value) -> (spec, verdict); the entry holds the spec, so its id is not reused
        self._memo: dict[tuple[Any, ...], tuple[ToolSpec | None, Reason | None]] = {}

    def _extended(self, texts: tuple[str, ...]) -> GroundingContext:
        """The context of ``texts``, which start with this context's texts (the caller checked) and are longer:
        only the rest is read (``_read``)."""
        text, folded, numbers = _read(texts[len(self._texts):])
        out = GroundingContext.__new__(GroundingContext)
        out._texts = texts
        out._text, out._folded = _joined(self._text, text), _joined(self._folded, folded)
        out._numbers = self._numbers | numbers
        out._memo = {}
        return out

    @classmethod
    def of_texts(cls, texts: Iterable[str]) -> GroundingContext:
        """The context of these texts: the same one for the same texts, and an earlier context extended where
        the texts start with its texts (``_Recent``)."""
        return _recent.get(tuple(texts))

    @classmethod
    def of_values(cls, shown: Any) -> GroundingContext:
        """From a JSON tree (the phantom trace's context): its values only — a key such as ``user`` or ``total``
        is structure, not something said. One (cached) context per distinct text, as ``of_messages``: the calls
        of one conversation audited without its tool results share it, and its memo; a later call's context,
        with more tool results, extends an earlier one."""
        out: list[str] = []
        _texts_of(shown, out)
        return _recent.get(tuple(out))

    @classmethod
    def of_messages(cls, messages: Sequence[Message]) -> GroundingContext:
        """From a conversation: system, user and tool-result turns. The assistant's own earlier words ground
        nothing (it could have invented them there first). One (cached) context per distinct text."""
        return _recent.get(tuple(m.content for m in messages if m.role in ("system", "user", "tool")))

    def verdict(self, value: Any, path: str, spec: ToolSpec | None) -> Reason | None:
        """``check_value`` of one leaf of a call to ``spec``'s tool, remembered for hashable scalars."""
        if value is None or value.__class__ not in _MEMO_TYPES:
            return _judge(_read_leaf(value, path), value, path, self, spec)
        key = (id(spec), path, value.__class__, value)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is spec:
            return hit[1]
        reason = _judge(_leaf(value, path), value, path, self, spec)
        if len(self._memo) < self._MEMO_LIMIT:
            self._memo[key] = (spec, reason)
        return reason

    def _holds(self, leaf: _Leaf) -> bool:
        """The containment test of one read leaf (``grounds``)."""
        return ((leaf.number is not None and leaf.number in self._numbers)
                or (leaf.substring is not None and leaf.substring in self._text)
                or (leaf.folded is not None and leaf.folded in self._folded))

    def grounds(self, value: Any) -> bool:
        """The containment test: ``value``'s normalised form occurs in this context."""
        leaf = _read_leaf(value, "")
        return leaf.text is None or self._holds(leaf)

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


def _texts_of(value: Any, out: list[str]) -> None:
    """``str`` of every non-null leaf of a JSON tree, in ``leaves`` order (without building the paths; a JSON
    container's scalars are read in its loop, not by a call each)."""
    cls = value.__class__
    if cls is dict:
        items: Iterable[Any] = value.values()
    elif cls is list:
        items = value
    elif cls is str:
        out.append(value)
        return
    elif value is None:
        return
    elif cls not in _JSON_SCALARS and isinstance(value, Mapping):
        items = value.values()
    elif cls not in _JSON_SCALARS and isinstance(value, (list, tuple)):
        items = value
    else:
        out.append(str(value))
        return
    for sub in items:
        sub_cls = sub.__class__
        if sub_cls is str:
            out.append(sub)
        elif sub_cls in _JSON_SCALARS:
            out.append(str(sub))
        elif sub is not None:
            _texts_of(sub, out)


_JSON_SCALARS = frozenset({int, float, bool})


class _Recent:
    """The contexts built lately, by their texts, and by the rolling hash of their texts, so that a new context
    whose texts start with a recent one's is that one extended: the context read last when it fits (the next call
    of the same conversation), else the longest recent one that does. Bounded in contexts and in the characters
    they hold; the least recently used go first."""

    def __init__(self, contexts: int = 256, chars: int = 16_000_000) -> None:
        self.max_contexts, self.max_chars = contexts, chars
        self._by_texts: OrderedDict[tuple[str, ...], tuple[GroundingContext, int, int]] = OrderedDict()
        self._by_hash: dict[int, GroundingContext] = {}
        self._chars = 0
        self._last: tuple[GroundingContext, int] | None = None  # the context added last, and its key

    def get(self, texts: tuple[str, ...]) -> GroundingContext:
        hit = self._by_texts.get(texts)
        if hit is not None:
            self._by_texts.move_to_end(texts)
            return hit[0]
        if self._last is not None:  # first, the next call of the conversation read last (most imports)
            last, h = self._last
            n = len(last._texts)
            if n < len(texts) and texts[:n] == last._texts:
                for t in texts[n:]:
                    h = hash((h, t))
                return self._add(texts, last._extended(texts), h)
        prefixes = []
        h = 0
        for t in texts:
            h = hash((h, t))
            prefixes.append(h)
        for i in range(len(texts) - 1, 0, -1):
            base = self._by_hash.get(prefixes[i - 1])
            if base is not None and base._texts == texts[:i]:
                return self._add(texts, base._extended(texts), h)
        return self._add(texts, GroundingContext(texts), h)

    def _add(self, texts: tuple[str, ...], context: GroundingContext, key: int) -> GroundingContext:
        """``context``, kept under ``texts`` and under ``key`` (the rolling hash of ``texts``) if it fits."""
        size = sum(map(len, texts)) + len(context._text) + len(context._folded)
        if size > self.max_chars:
            return context
        self._last = (context, key)
        self._by_texts[texts] = (context, key, size)
        self._by_hash[key] = context
        self._chars += size
        while len(self._by_texts) > self.max_contexts or self._chars > self.max_chars:
            _, (old, old_key, old_size) = self._by_texts.popitem(last=False)
            self._chars -= old_size
            if self._by_hash.get(old_key) is old:
                del self._by_hash[old_key]
        return context


_recent = _Recent()


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
    name = _name_words(path)
    if name is None:
        return False
    said = _words(value)
    return bool(said) and set(said) <= name


@lru_cache(maxsize=4096)
def _name_words(path: str) -> frozenset[str] | None:
    """The words of the parameter a leaf at ``path`` fills (its last key), or ``None`` when no key names it."""
    names = key_names(path)
    return frozenset(_words(names[-1])) if names else None


def check_value(value: Any, path: str, context: GroundingContext, schema: Mapping[str, Any]) -> Reason | None:
    """Why one leaf is ungrounded, or ``None`` when it is grounded (the rule of the module docstring)."""
    return _judge(_leaf(value, path) if value.__class__ in _MEMO_TYPES else _read_leaf(value, path),
                  value, path, context, schema)


def _judge(leaf: _Leaf, value: Any, path: str, context: GroundingContext,
           schema: ToolSpec | Mapping[str, Any] | None) -> Reason | None:
    """``check_value`` of a read leaf; ``schema`` is the parameter's schema, or the tool's spec to find it in
    (only read when the value is not grounded)."""
    if leaf.text is None:
        return None
    if leaf.restates and not context.names_explicitly(value):
        return Reason.RESTATES_PARAMETER
    if context._holds(leaf):
        return None
    if leaf.placeholder:
        return Reason.PLACEHOLDER
    if schema is None:
        schema = {}
    elif not isinstance(schema, Mapping):
        schema = _param_schema(schema, path)
    text = leaf.text
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
    verdict = context.verdict
    if not isinstance(arguments, dict):
        items: Iterable[tuple[str, Any]] = leaves(arguments or {})
    elif all(v.__class__ in _SCALAR_LEAVES and k.__class__ is str for k, v in arguments.items()):
        items = arguments.items()  # flat arguments (most calls): their leaves are their items
    else:
        items = leaves(arguments)
    for path, value in items:
        reason = verdict(value, path, spec)
        if reason is not None:
            out.append(Finding(tool, path, value, reason))
    return out


#: leaf types ``leaves`` yields as they are (``check_call``'s flat-arguments path)
_SCALAR_LEAVES = frozenset({str, int, float, bool, type(None)})


def fields_of(findings: Iterable[Finding]) -> list[str]:
    """The ``tool.arg`` of each finding, once each, in order."""
    return list(dict.fromkeys(f.field for f in findings))


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
