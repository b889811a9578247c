"""A context extended by a conversation's new texts judges every value as one read from scratch.

``GroundingContext.of_values`` / ``of_messages`` / ``of_texts`` build a later call's context by extending an
earlier context whose texts it starts with, reading only the new texts, and remember what the rule reads of each
leaf value. On randomised conversations (tricky text: number formats, separators, Unicode whitespace and case,
empty and blank texts; calls of several conversations interleaved), every context must hold the same text as the
from-scratch reading, and every verdict must be that of a from-scratch context and of the rule as it was written
before (``_Legacy``, the pre-incremental code of commit 7b7a536, kept here as the reference).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

import pytest

import runner.probes.grounding as G
from runner.core.jsonwalk import canonical_number, contained, key_names, leaves, normalise, numbers_in, scalar_text
from runner.core.types import ToolSpec
from runner.probes.grounding import GroundingContext, Reason, check_call


class _Legacy:
    """The rule before the incremental context: the texts joined by newlines and normalised in one go."""

    def __init__(self, texts: list[str]) -> None:
        self.text = normalise("\n".join(texts))
        self.numbers = numbers_in(self.text) | {canonical_number(m.group(0))
                                                for m in G._LOOSE_NUMBER_RE.finditer(self.text)}
        self.folded = G._fold(self.text)

    def grounds(self, value: Any) -> bool:
        if contained(value, self.text, self.numbers):
            return True
        text = scalar_text(value)
        return text is not None and not isinstance(value, (int, float)) and G._fold(text) in self.folded

    def names_explicitly(self, value: str) -> bool:
        needle = G._fold(normalise(value))
        if not needle:
            return False
        for m in re.finditer(rf"(?<![\w]){re.escape(needle)}(?![\w])", self.folded):
            if not G._GENERIC_BEFORE_RE.search(self.folded[:m.start()]):
                return True
        return False

    def check_value(self, value: Any, path: str, schema: Mapping[str, Any]) -> Reason | None:
        text = scalar_text(value)
        if text is None:
            return None
        names = key_names(path)
        said = G._words(value) if isinstance(value, str) and names else []
        if said and set(said) <= set(G._words(names[-1])) and not self.names_explicitly(value):
            return Reason.RESTATES_PARAMETER
        if self.grounds(value):
            return None
        if isinstance(value, str) and G._PLACEHOLDER_RE.fullmatch(value.strip()):
            return Reason.PLACEHOLDER
        description = schema.get("description")
        if isinstance(description, str) and len(text) >= 4 and G._fold(text) in G._fold(normalise(description)):
            return Reason.DESCRIPTION_ECHO
        enum = schema.get("enum")
        if isinstance(enum, list) and any(scalar_text(option) == text for option in enum):
            return Reason.ENUM_UNSUPPORTED
        return Reason.NOT_IN_CONTEXT

    def check_call(self, tool: str, args: dict[str, Any], spec: ToolSpec | None) -> list[tuple[str, Any, Reason]]:
        out = []
        for path, value in leaves(args):
            reason = self.check_value(value, path, G._param_schema(spec, path))
            if reason is not None:
                out.append((path, value, reason))
        return out


_TOKENS = ["order", "Order", "ORDER", "payroll", "vendor", "payroll vendor", "payroll_vendor", "our", "the", "a",
           "password", "'password'", "units", "ORD-0042", "ord_0042", "last_month", "last-month", "Stripe", "Gusto",
           "1,064.50", "1064.5", "64.50", "05", "2025", "2026-12-04", "-3", "+7", "0", "0.0", "0.01m²", "5m", "10个",
           "18th", "16x16", "1e5", "3.", ".5", "12345678901234567890", "user7@example.com", "YYYY-MM", "<id>",
           "ΟΔΟΣ", "Σ", "İstanbul", "STRASSE", "ß", "True", "null", "_", "-", "--", ".", ",", "…", "x", "é"]
_SEPS = [" ", "  ", "\n", "\t", "\u00a0", "\u2003", "\x1c", "", "_", "-", ".", ", ", "\r\n"]


def _text(rng: random.Random) -> str:
    if rng.random() < 0.08:
        return rng.choice(["", " ", "\n", "\u00a0", "_", "-"])  # empty, blank, or folded to nothing
    out = rng.choice(["", " ", "\n"]) if rng.random() < 0.2 else ""
    for _ in range(rng.randint(1, 6)):
        out += rng.choice(_TOKENS) + rng.choice(_SEPS)
    return out


def _json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 2 and roll < 0.25:
        return {rng.choice(["id", "total", "name", "ok", "items"]) + str(i): _json(rng, depth + 1)
                for i in range(rng.randint(0, 3))}
    if depth < 2 and roll < 0.35:
        return [_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice([lambda: _text(rng), lambda: rng.randint(-5, 3000), lambda: round(rng.uniform(0, 2000), 2),
                       lambda: rng.choice([True, False, None]), lambda: 1e16, lambda: 0.1 + 0.2])()


def _value(rng: random.Random, texts: list[str]) -> Any:
    roll = rng.random()
    if roll < 0.35 and texts:  # a piece of what was shown, maybe re-cased
        source = rng.choice(texts)
        if source:
            i = rng.randrange(len(source))
            piece = source[i:i + rng.randint(1, 12)]
            return piece.upper() if rng.random() < 0.2 else piece
    if roll < 0.55:
        return rng.choice(_TOKENS)
    if roll < 0.75:
        return rng.choice([rng.randint(0, 3000), round(rng.uniform(0, 2000), 2), 1064.5, 5, 18, 2025, 0.01, -3, 7.0])
    if roll < 0.85:
        return rng.choice([True, False, None, "", "  "])
    return _text(rng).strip()


_SPECS = [None,
          ToolSpec("t", "", {"type": "object", "properties": {
              "vendor": {"type": "string", "description": "billing vendor name, as YYYY-MM or 'last_month'"},
              "units": {"type": "string", "enum": ["celsius", "Order", "5m"]},
              "items": {"type": "array", "items": {"type": "object", "properties": {
                  "sku": {"type": "string", "description": "the order sku"}}}}}})]
_PATHS = ["vendor", "payroll_vendor", "password", "units", "order", "note", "amount"]


def _args(rng: random.Random, texts: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {p: _value(rng, texts) for p in rng.sample(_PATHS, rng.randint(1, 4))}
    if rng.random() < 0.3:
        args["items"] = [{"sku": _value(rng, texts)}, {"sku": _value(rng, texts), "qty": _value(rng, texts)}]
    return args


def _conversations(rng: random.Random, n: int) -> list[list[dict[str, Any]]]:
    """Each conversation's calls, as the shown context each one saw: the earlier calls' tool results grow."""
    out = []
    for _ in range(n):
        system = _text(rng) if rng.random() < 0.8 else ""
        user: str | list[str] = [_text(rng) for _ in range(rng.randint(1, 2))] if rng.random() < 0.7 else _text(rng)
        results: list[Any] = []
        calls = []
        for _ in range(rng.randint(1, 6)):
            calls.append({"system": system, "user": user, "tool_results": list(results)})
            results.extend(_json(rng) for _ in range(rng.randint(1, 2)))
        out.append(calls)
    return out


def _texts(shown: Any) -> list[str]:
    return [str(v) for _, v in leaves(shown) if v is not None]


@pytest.mark.parametrize(("seed", "order"), [(1, "random"), (2, "random"), (3, "round robin")])
def test_incremental_contexts_give_the_from_scratch_verdicts(seed: int, order: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Random interleaving mixes extending the context just built with extending an older one; round robin
    (never two calls of one conversation in a row) only ever extends an older one, found by its texts' hash."""
    rng = random.Random(seed)
    monkeypatch.setattr(G, "_recent", G._Recent())  # a fresh cache: what this test builds is what it sees
    extended = 0
    real = GroundingContext._extended

    def counting(self: GroundingContext, texts: tuple[str, ...]) -> GroundingContext:
        nonlocal extended
        extended += 1
        return real(self, texts)

    monkeypatch.setattr(GroundingContext, "_extended", counting)
    conversations = _conversations(rng, 60)
    # the calls of several conversations interleaved, each conversation's in order (as an import writes them)
    queue = [(c, i) for c, calls in enumerate(conversations) for i in range(len(calls))]
    calls: list[tuple[int, int]] = []
    next_call = [0] * len(conversations)
    turn = 0
    while len(calls) < len(queue):
        open_ = [c for c in range(len(conversations)) if next_call[c] < len(conversations[c])]
        c = rng.choice(open_) if order == "random" else open_[turn % len(open_)]
        turn += 1
        calls.append((c, next_call[c]))
        next_call[c] += 1
    verdicts = 0
    for c, i in calls:
        shown = conversations[c][i]
        texts = _texts(shown)
        incremental = GroundingContext.of_values(shown)
        scratch = GroundingContext(texts)
        legacy = _Legacy(texts)
        assert (incremental._text, incremental._folded, incremental._numbers) == \
            (scratch._text, scratch._folded, scratch._numbers) == (legacy.text, legacy.folded, legacy.numbers)
        assert incremental._texts == tuple(texts)
        for _ in range(4):
            args, spec = _args(rng, texts), rng.choice(_SPECS)
            want = legacy.check_call("t", args, spec)
            for context in (incremental, scratch):
                assert [(f.path, f.value, f.reason) for f in check_call("t", args, context, spec)] == want, (texts, args)
            assert all(GroundingContext.of_texts(texts).grounds(v) == legacy.grounds(v) for _, v in leaves(args))
            verdicts += len(list(leaves(args)))
    assert extended > len(calls) // 3  # most later calls extended an earlier context rather than reading anew
    assert verdicts > 1000


def test_the_recent_contexts_are_bounded_in_number_and_in_characters() -> None:
    recent = G._Recent(contexts=3, chars=10_000)
    contexts = [recent.get(("system", f"user {i}")) for i in range(5)]
    assert len(recent._by_texts) == 3 and len(recent._by_hash) == 3
    assert recent.get(("system", "user 4")) is contexts[4] and recent.get(("system", "user 0")) is not contexts[0]
    big = recent.get(("x" * 6_000,))
    assert recent._chars <= 10_000 and recent.get(("x" * 6_000,)) is not big  # too big to keep: read again
    longer = recent.get(("system", "user 4", "result"))
    assert longer._text == "system user 4 result" and recent._chars == sum(size for _, _, size in recent._by_texts.values())
