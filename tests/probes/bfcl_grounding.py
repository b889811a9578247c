"""BFCL's ground-truth calls through the grounding rule: a right answer must read as grounded.

For every imported BFCL case with an answer key (``runner.importers.import_bfcl``), each expected call's
arguments are taken from the key, choosing for each argument the first acceptable option whose text occurs in
the question (raw, case-insensitive: a check independent of the rule's own normalisation). A call is *eligible*
when every value has such an option (booleans and nulls carry no text and always qualify; an argument whose
options allow leaving it out, and none occurs, is left out). The rule must call the eligible calls grounded:
``all_args_grounded`` on at least 99% of them. The rest are listed by the rule's reason.

    python -m tests.probes.bfcl_grounding     # the full figure over every imported category (~1 min)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.core.types import ToolSpec
from runner.probes.grounding import Finding, GroundingContext, check_call
from runner.probes.negative import NegativeCase, case_messages

_SKIP = object()  # no option occurs in the question: the call is not eligible


@dataclass
class Figure:
    eligible: int = 0
    grounded: int = 0
    ineligible: int = 0
    by_category: Counter[str] = field(default_factory=Counter)
    grounded_by_category: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    exceptions: list[tuple[str, str]] = field(default_factory=list)   # (case id, finding)

    @property
    def rate(self) -> float:
        return self.grounded / self.eligible if self.eligible else float("nan")


def _occurs(value: Any, question: str) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        # a whole number as written, digits on neither side: 0 is not in "10", 6 is in "6cm"
        forms = {str(value), repr(value)} | ({str(int(value))} if float(value).is_integer() else set())
        return any(re.search(rf"(?<![\d.]){re.escape(f)}(?![\d]|\.\d)", question) for f in forms)
    if isinstance(value, str):
        return bool(value.strip()) and value.lower() in question
    if isinstance(value, (list, tuple)):
        return all(_occurs(v, question) for v in value)
    if isinstance(value, Mapping):
        return all(_occurs(v, question) for v in value.values())
    return False


def _choose(expected: Any, question: str) -> Any:
    """A concrete value of ``expected`` (a value or ``{one_of, optional}``) that occurs in the question."""
    if isinstance(expected, Mapping) and "one_of" in expected and set(expected) <= {"one_of", "optional"}:
        options = expected["one_of"]
        for option in options:
            if option != "" and not isinstance(option, Mapping) and _occurs(option, question):
                return option
            if isinstance(option, Mapping):
                chosen = _choose(option, question)
                if chosen is not _SKIP:
                    return chosen
        return None if expected.get("optional") or "" in options or None in options else _SKIP
    if isinstance(expected, Mapping):
        out = {}
        for k, v in expected.items():
            chosen = _choose(v, question)
            if chosen is _SKIP:
                return _SKIP
            if chosen is not None:
                out[k] = chosen
        return out
    if isinstance(expected, list):
        items = [_choose(v, question) for v in expected]
        return _SKIP if any(i is _SKIP for i in items) else items
    return expected if _occurs(expected, question) else _SKIP


def _tools(raw: Mapping[str, Any]) -> dict[str, ToolSpec]:
    out = {}
    for item in raw.get("tools") or []:
        fn = item.get("function", item) if isinstance(item, Mapping) else {}
        params = fn.get("parameters") or fn.get("input_schema") or {}
        out[fn.get("name", "")] = ToolSpec(fn.get("name", ""), fn.get("description") or "", params)
    return out


def expected_calls(raw: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(tool, expected args) of each call a BFCL case's key expects."""
    if raw.get("expect_calls"):
        for want in raw["expect_calls"]:
            yield want["tool"], want.get("args") or {}
    elif raw.get("expect_action") and raw.get("expect_args") is not None and raw.get("positive"):
        yield raw["expect_action"], raw.get("expect_args") or {}


def measure(cases: list[Mapping[str, Any]]) -> Figure:
    fig = Figure()
    for raw in cases:
        if "ground_truth" not in (raw.get("bfcl") or {}):
            continue
        case = NegativeCase.model_validate(raw)
        messages = case_messages(case)
        question = "\n".join(m.content for m in messages if m.role == "user").lower()
        context = GroundingContext.of_messages(messages)
        specs = _tools(raw)
        category = case.bfcl.category if case.bfcl else "?"
        for tool, expected in expected_calls(raw):
            args = _choose(expected, question)
            if args is _SKIP:
                fig.ineligible += 1
                continue
            fig.eligible += 1
            fig.by_category[category] += 1
            findings: list[Finding] = check_call(tool, args, context, specs.get(tool))
            if not findings:
                fig.grounded += 1
                fig.grounded_by_category[category] += 1
            for f in findings:
                fig.reasons[f.reason.value] += 1
                fig.exceptions.append((case.id, f.describe()))
    return fig


def bfcl_cases(categories: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The imported BFCL cases of the installed bfcl-eval (all of its data, or these categories' files)."""
    from runner.importers import import_bfcl
    from tests.importers.bfcl_outputs import bfcl_data

    data = bfcl_data()
    if data is None:
        return []
    paths = [data] if categories is None else [data / f"BFCL_v4_{c}.json" for c in categories]
    return list(import_bfcl(paths).negative)


if __name__ == "__main__":
    import sys

    cases = bfcl_cases()
    questions = {c["id"]: " | ".join(m["content"] for m in c.get("messages") or [] if m["role"] == "user") for c in cases}
    fig = measure(cases)
    print(f"eligible calls {fig.eligible} (values all in the question), grounded {fig.grounded}: {fig.rate:.2%}; "
          f"{fig.ineligible} calls with a value not in the question left out")
    for cat in sorted(fig.by_category):
        print(f"  {cat:24} {fig.grounded_by_category[cat]:5}/{fig.by_category[cat]:<5}"
              f" {fig.grounded_by_category[cat] / fig.by_category[cat]:.2%}")
    print("exceptions by reason:", dict(fig.reasons))
    for case_id, finding in fig.exceptions:
        print(f"  {case_id}: {finding}")
        if "-v" in sys.argv:
            print("     ", questions[case_id][:300].replace("\n", " "))
