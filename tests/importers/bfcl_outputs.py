"""Test helpers for BFCL: the installed data, the ground-truth response of a case, its perturbations,
and BFCL's own AST checker (imported with its vendor-SDK config module stubbed out).

Responses are lists of ``(tool name, arguments)``: what the negative probe sees from an agent.
Java and JavaScript arguments are rendered as source text, as BFCL's function-calling handlers
ask the model to send them.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runner.probes.negative.bfcl_checker import call_name, language
from runner.probes.negative.bfcl_source import java_text, js_text

MISSING = object()
Output = list[tuple[str, dict[str, Any] | None]]


def bfcl_data() -> Path | None:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "data"


def bfcl_ast_checker() -> Callable[[list[Any], Output, list[Any], str], bool]:
    """BFCL's ast_checker as ``check(functions, output, answers, category) -> valid`` (raises → invalid)."""
    stub = types.ModuleType("bfcl_eval.constants.model_config")

    class _AnyModel(dict[str, Any]):
        def __missing__(self, key: str) -> Any:
            return types.SimpleNamespace(underscore_to_dot=True)   # names arrive with dots as underscores

    stub.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
    sys.modules.setdefault("bfcl_eval.constants.model_config", stub)
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    langs = {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}

    def check(functions: list[Any], output: Output, answers: list[Any], category: str) -> bool:
        if any(args is None for _, args in output) or not output:
            return False  # decode failure / a text reply: never valid for AST categories
        decoded = [{name: args} for name, args in output]
        try:
            return bool(ast_checker(copy.deepcopy(functions), decoded, answers, langs[language(category)],
                                    category, "stub-model")["valid"])
        except Exception:
            return False
    return check


# ── ground truth ─────────────────────────────────────────────────────────────────────────────

def first(options: list[Any]) -> Any:
    """The answer key's first option; ``""`` (leave the argument out) as MISSING."""
    return MISSING if not options or options[0] == "" else options[0]


def python_value(value: Any) -> Any:
    """A concrete value from an answer-key value: a dict (or each dict of a list) takes each key's first
    option, one level deep as in BFCL; a key whose "options" are not a list is taken literally."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            chosen = first(v) if isinstance(v, list) else v
            if chosen is not MISSING:
                out[k] = chosen
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [python_value(v) for v in value]
    return value


def render(case_key: dict[str, Any], fname: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One call of the answer key as an agent would send it (names and, for Java/JS, values as text)."""
    lang = language(case_key["category"])
    doc = next(f for f in case_key["functions"] if f["name"] == fname)
    props = doc["parameters"]["properties"]
    out: dict[str, Any] = {}
    for param, value in args.items():
        if param not in props:
            out[param] = value
        elif lang == "java":
            out[param] = java_text(value, props[param])
        elif lang == "javascript":
            out[param] = js_text(value, props[param])
        else:
            out[param] = value
    return call_name(fname), out


def truth_args(options_by_param: dict[str, list[Any]], required: list[str]) -> dict[str, Any]:
    """Each parameter's first option (``""`` first: left out), a required one's first real option."""
    out = {}
    for param, options in options_by_param.items():
        chosen = first([o for o in options if o != ""] if param in required else options)
        if chosen is not MISSING:
            out[param] = python_value(chosen)
    return out


def ground_truth_output(key: dict[str, Any]) -> Output:
    calls: Output = []
    for entry in key["ground_truth"]:
        (fname, options), = entry.items()
        doc = next(f for f in key["functions"] if f["name"] == fname)
        props = doc["parameters"]["properties"]
        # an optional key outside the schema can only be left out (BFCL's checker refuses it)
        options = {p: o for p, o in options.items() if p in props or "" not in o}
        calls.append(render(key, fname, truth_args(options, doc["parameters"].get("required", []))))
    return calls


# ── perturbations ────────────────────────────────────────────────────────────────────────────

def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 7.5
    if isinstance(value, str):
        return value + " qzx"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["qzx"]
    if isinstance(value, dict):
        return {**value, "qzx": 1}
    return "qzx"


def _string_variant(text: str) -> str:
    """Changes BFCL's normalisation ignores: spaces and ,./-_*^ removed, case swapped."""
    return text.replace(" ", "").replace("-", "").swapcase() if text.strip() else text + "x"


def perturbations(key: dict[str, Any]) -> Iterator[tuple[str, Output]]:
    """(label, response) variants of the ground truth: the issue's perturbations plus type and string ones."""
    truth = ground_truth_output(key)
    yield "truth", truth
    lang = language(key["category"])
    entry0 = key["ground_truth"][0]
    (fname0, options0), = entry0.items()
    doc0 = next(f for f in key["functions"] if f["name"] == fname0)
    props0 = doc0["parameters"]["properties"]
    required0 = doc0["parameters"].get("required", [])
    name0, args0 = truth[0][0], truth[0][1] or {}
    rest = truth[1:]

    def with_args(args: dict[str, Any]) -> Output:
        return [(name0, args), *rest]

    yield "no call", []
    yield "duplicated call", [*truth, truth[0]]
    yield "unparsable", [(name0, None)]
    others = [f for f in key["functions"] if f["name"] != fname0]
    yield "wrong function", [(call_name(others[0]["name"]) if others else name0 + "_x", args0), *rest]
    if len(truth) > 1:
        yield "reversed order", list(reversed(truth))
        yield "one call missing", truth[:-1]
    yield "extra argument", with_args({**args0, "unexpected_arg": "qzx"})
    yield "extra null", with_args({**args0, "unexpected_arg": None})
    yield "extra empty", with_args({**args0, "unexpected_arg": ""})
    if required0:
        yield "dropped required", with_args({k: v for k, v in args0.items() if k != required0[0]})
    for param, value in args0.items():
        spec = props0.get(param, {})
        kind = spec.get("type")
        if lang == "python":
            yield f"wrong value {kind}", with_args({**args0, param: _wrong(value)})
            if isinstance(value, bool):
                yield "bool as string", with_args({**args0, param: str(value).lower()})
            elif isinstance(value, int):
                yield "int as string", with_args({**args0, param: str(value)})
                yield "float for int", with_args({**args0, param: float(value)})
            elif isinstance(value, float):
                yield "float as string", with_args({**args0, param: str(value)})
                if value.is_integer():
                    yield "int for float", with_args({**args0, param: int(value)})
            elif isinstance(value, str):
                yield "string variant", with_args({**args0, param: _string_variant(value)})
            elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                yield "list string variant", with_args({**args0, param: [_string_variant(v) for v in value]})
            elif isinstance(value, dict) and value:
                k = next(iter(value))
                yield "dict key dropped", with_args({**args0, param: {a: b for a, b in value.items() if a != k}})
                if isinstance(value[k], str):
                    yield "dict string variant", with_args({**args0, param: {**value, k: _string_variant(value[k])}})
        else:
            yield "not a string", with_args({**args0, param: 12})
            yield f"wrong value {kind}", with_args({**args0, param: value + " qzx" if value else "qzx"})
        if "" in options0.get(param, []) and param not in required0:
            yield "optional null", with_args({**args0, param: None})
            yield "optional left out", with_args({k: v for k, v in args0.items() if k != param})
    for param, options in options0.items():
        if options == [""] and param in props0:
            yield "omitted-only given", with_args({**args0, param: "qzx" if lang != "python" else
                                                   _wrong(_example(props0[param]))})


def _example(spec: dict[str, Any]) -> Any:
    return {"integer": 3, "float": 2.5, "boolean": True, "array": ["a"], "tuple": ["a"], "dict": {"a": 1}}.get(
        spec.get("type", ""), "qzx")
