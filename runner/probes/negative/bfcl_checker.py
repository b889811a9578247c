"""BFCL's own verdict on a response, so an imported run reproduces BFCL's per-category accuracy.

trialgrid's ``passed`` applies its strict grounding rules; a user comparing against the
Berkeley Function Calling Leaderboard also needs the number BFCL itself would print. This
module re-implements BFCL's AST checker from its documented rules (``bfcl_eval`` is never
imported here; tests/probes/test_bfcl_agreement.py checks agreement with the real one):

- the call count is exact (one call for simple / multiple categories, as many as the answer
  key for parallel ones, matched order-free and greedily, first valid match wins);
- required parameters must be present; a parameter outside the schema or the answer key
  fails; a key parameter absent from the call fails unless its options hold ``""``;
- types come from the function schema: ``type(value)`` must be the schema type exactly
  (an ``int`` passes for a ``float``; nothing else is coerced), or the answer key's type
  (BFCL's "variable" rule); arrays and tuples check their items one level deep;
- strings compare after BFCL's normalisation (lowercase, drop spaces and ``,./-_*^``,
  ``'`` → ``"``), inside lists and dict values too; dicts and lists of dicts match key by key
  against per-key option lists, ``""`` marking an optional key;
- Java and JavaScript parameters arrive as strings in the language's syntax and are converted
  with BFCL's rules (``5L`` is a long, ``new int[]{1, 2}`` an array, ``{a: 1}`` an object)
  before the same checks;
- irrelevance (and a multi-turn turn whose ground truth is empty) passes when the response
  holds no decodable call; relevance passes when it holds one. A call whose arguments do not
  parse makes the whole response undecodable, as in BFCL's function-calling handlers.

Quirks of the original are kept on purpose (an empty list passes for an optional list
parameter; nested dicts inside dict values compare by equality); docs/bfcl.md lists them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Language = Literal["python", "java", "javascript"]
Call = tuple[str, "Mapping[str, Any] | None"]  # (tool name, parsed arguments or None when they did not parse)

_PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                                 "tuple": list, "dict": dict, "any": str}
_JAVA_TYPES: dict[str, type] = {"byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int,
                               "boolean": bool, "char": str, "Array": list, "ArrayList": list, "Set": set,
                               "HashMap": dict, "Hashtable": dict, "Queue": list, "Stack": list, "String": str,
                               "any": str}
_JS_TYPES: dict[str, type] = {"String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool,
                             "dict": dict, "array": list, "any": str}
_NESTED_PY = ("array", "tuple")
_NESTED_CONVERTED = ("Array", "ArrayList", "array")
_STRIP = re.compile(r"[ ,./\-_*^]")


class BfclKey(BaseModel):
    """What BFCL scores a case against: its category, the original function docs, the answer key."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    category: str = Field(min_length=1)
    functions: list[dict[str, Any]] = Field(default_factory=list, description="BFCL's function docs, types unconverted")
    ground_truth: list[dict[str, Any]] = Field(default_factory=list, description="[{function: {param: [options]}}]")


def mode(category: str) -> Literal["irrelevance", "relevance", "ast"]:
    if "irrelevance" in category or category.startswith("multi_turn"):
        return "irrelevance"   # multi-turn cases are the turn whose ground truth is empty
    if "relevance" in category:
        return "relevance"
    return "ast"


def language(category: str) -> Language:
    if category.endswith("java"):
        return "java"
    if category.endswith("javascript"):
        return "javascript"
    return "python"


def call_name(name: str) -> str:
    """The tool name an agent sees (BFCL's OpenAI handlers replace dots; trialgrid replaces any other character)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def check(key: BfclKey, calls: Sequence[Call]) -> str | None:
    """None when BFCL would count the response correct, else BFCL's error type."""
    decoded = all(args is not None for _, args in calls)
    has_call = decoded and len(calls) > 0
    kind = mode(key.category)
    if kind == "irrelevance":
        return "irrelevance_error:decoder_success" if has_call else None
    if kind == "relevance":
        return None if has_call else "relevance_error:decoder_failed"
    if not calls:
        return "ast_decoder:no_call"
    if not decoded:
        return "ast_decoder:decoder_failed"
    output = [{name: dict(args or {})} for name, args in calls]
    try:
        return _ast_check(key.functions, output, key.ground_truth, language(key.category), key.category)
    except (KeyError, TypeError, AttributeError, ValueError, NotImplementedError) as exc:
        # where BFCL's checker raises (a list item that is not a dict, an unsupported Java type) it
        # scores nothing; here the response fails with the reason named
        return f"checker_error:{type(exc).__name__}"


# ── the AST checker ──────────────────────────────────────────────────────────────────────────

def _ast_check(functions: list[dict[str, Any]], output: list[dict[str, dict[str, Any]]],
              answers: list[dict[str, Any]], lang: Language, category: str) -> str | None:
    if len(output) != (len(answers) if "parallel" in category or "multiple" in category else 1):
        return "wrong_count"
    if "parallel" in category:
        matched: set[int] = set()
        for answer in answers:
            doc = _find(functions, next(iter(answer)))
            hit = next((i for i, item in enumerate(output)
                        if i not in matched and _check_call(doc, item, answer, lang) is None), None)
            if hit is None:
                return "parallel:cannot_find_match"
            matched.add(hit)
        return None
    if "multiple" in category:
        return _check_call(_find(functions, next(iter(answers[0]))), output[0], answers[0], lang)
    return _check_call(functions[0], output[0], answers[0], lang)


def _find(functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for fn in functions:
        if fn["name"] == name:
            return fn
    raise KeyError(f"answer key names {name!r}, which is not among the functions")


def _check_call(doc: Mapping[str, Any], item: Mapping[str, dict[str, Any]], answer: Mapping[str, Any],
               lang: Language) -> str | None:
    """One call against one answer: None, or the first error BFCL would report."""
    options_by_param: dict[str, list[Any]] = next(iter(answer.values()))
    name = call_name(doc["name"])
    if name not in item:
        return "wrong_func_name"
    params = item[name]
    props: dict[str, Any] = doc["parameters"]["properties"]
    for req in doc["parameters"].get("required", []):
        if req not in params:
            return "missing_required"
    for param, raw in params.items():
        if param not in props or param not in options_by_param:
            return "unexpected_param"
        options = options_by_param[param]
        declared = props[param]["type"]
        value = raw
        nested: type | None = None
        if lang == "python":
            expected = _PYTHON_TYPES[declared]
            if declared in _NESTED_PY:
                nested = _PYTHON_TYPES[props[param]["items"]["type"]]
            if declared == "float" and type(value) is int:
                value = float(value)
        else:
            table = _JAVA_TYPES if lang == "java" else _JS_TYPES
            expected = table[declared]
            if type(value) is not str:
                return f"type_error:{'java' if lang == 'java' else 'js'}"
            item_type = props[param]["items"]["type"] if declared in _NESTED_CONVERTED else None
            if item_type is not None:
                nested = table[item_type]
            value = convert(value, declared, item_type, lang)
        ok, variable = _type_ok(value, options, expected, nested)
        if not ok:
            return "type_error"
        if not variable:
            if expected is dict:
                err = _dict_error(value, options)
            elif expected is list and nested is dict:
                err = _list_dict_error(value, options)
            elif expected is str:
                err = None if standardise(value) in [standardise(o) for o in options if type(o) is str] \
                    else "value_error:string"
            elif expected is list:
                err = None if _std_list(value) in [_std_list(o) for o in options] else "value_error:list"
            else:
                err = None if value in options else "value_error:others"
            if err:
                return err
            continue
        if value not in options:
            return "value_error:others"
    for param, options in options_by_param.items():
        if param not in params and "" not in options:
            return "missing_optional"
    return None


def standardise(text: str) -> str:
    """BFCL's string normalisation: no spaces nor ``,./-_*^``, lowercase, single quotes as double."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _std_list(value: Any) -> list[Any]:
    return [standardise(v) if type(v) is str else v for v in value]


def _answer_type(options: Any) -> type | None:
    return next((type(o) for o in options if o != ""), None)


def _type_ok(value: Any, options: Any, expected: type, nested: type | None) -> tuple[bool, bool]:
    """(type accepted, value is a "variable": the answer key's type differs from the schema's)."""
    answer_type = _answer_type(options)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, variable
        for option in options:
            fits = True
            if type(option) is list:
                items: Any = value
                fits = all(_type_ok(v, option, nested, None)[0] for v in items)
            if fits:
                return True, variable
    if answer_type is not None and type(value) is answer_type:
        # BFCL keeps the earlier verdict here: valid, unless the nested item check just failed
        return type(value) is not expected or nested is None, True
    return False, variable


def _std_options(options: Any) -> list[Any]:
    return [standardise(o) if type(o) is str else o for o in options]


def _dict_error(value: Mapping[str, Any], alternatives: Sequence[Any]) -> str | None:
    error = "value_error:dict"
    for alt in alternatives:
        if alt == "":
            continue
        if all(k in alt and (standardise(v) if type(v) is str else v) in _std_options(alt[k])
               for k, v in value.items()) and \
                all(k in value or "" in opts for k, opts in alt.items()):
            return None
    return error


def _list_dict_error(value: Sequence[Any], alternatives: Sequence[Any]) -> str | None:
    for alt in alternatives:
        if len(value) == len(alt) and all(_dict_error(v, [a]) is None for v, a in zip(value, alt, strict=True)):
            return None
    return "value_error:list_dict"


# ── Java and JavaScript values, sent as strings in the language's syntax ─────────────────────

def convert(text: str, declared: str, item_type: str | None, lang: Language) -> Any:
    return _java(text, declared, item_type) if lang == "java" else _js(text, declared, item_type)


_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")


def _java(text: str, declared: str, item_type: str | None = None) -> Any:
    if declared not in _JAVA_TYPES:
        raise ValueError(f"unsupported Java type {declared}")
    if declared in ("byte", "short", "integer"):
        return int(text) if _INT.match(text) else text
    if declared == "float":
        return float(re.sub(r"[fF]$", "", text)) if _JAVA_FLOAT.match(text) else text
    if declared == "double":
        return float(text) if _JAVA_DOUBLE.match(text) else text
    if declared == "long":
        return int(text[:-1]) if _JAVA_LONG.match(text) else text
    if declared == "boolean":
        return text == "true" if text in ("true", "false") else text
    if declared in ("char", "String", "any"):
        return text
    if declared == "ArrayList":
        return _java_arraylist(text, item_type)
    if declared == "Array":
        return _java_array(text, item_type)
    if declared == "HashMap":
        return _java_hashmap(text)
    raise NotImplementedError(f"{declared} conversion is not implemented (as in BFCL)")


def _java_element(text: str, item_type: str | None) -> Any:
    if item_type in ("char", "String"):
        return text[1:-1]
    return _java(text, item_type) if item_type else _java_value(text)


def _java_arraylist(text: str, item_type: str | None) -> Any:
    m = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if m:
        return [_java_element(e.strip(), item_type) for e in m.group(1).split(",")]
    m = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if m:
        return [_java_element(e.strip(), item_type) for e in re.findall(r"add\((.+?)\)", m.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def _java_array(text: str, item_type: str | None) -> Any:
    m = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
    if not m:
        return text
    parts = [x.strip() for x in m.group(1).split(",") if x.strip()]
    return [_java(x, item_type) if item_type else _java_value(x) for x in parts]


def _java_hashmap(text: str) -> Any:
    m = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL)
    if m:
        out: dict[str, Any] = {}
        if m.group(1).strip():
            for k, v in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", m.group(1)):
                out[k] = _java_value(v.strip())
        return out
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", text):
        return {}
    return text


def _java_value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(re.sub(r"[fF]$", "", text))
    return _number_or_text(text)


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _js(text: str, declared: str, item_type: str | None = None) -> Any:
    if declared not in _JS_TYPES:
        raise ValueError(f"unsupported JavaScript type {declared}")
    if declared == "String":
        quoted = (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))
        return text[1:-1] if quoted else text
    if declared == "integer":
        return int(text) if _INT.match(text) else text
    if declared == "float":
        return float(text) if re.match(r"^-?\d+(\.\d+)?$", text) else text
    if declared == "Bigint":
        return int(text[:-1]) if re.match(r"^-?\d+n$", text) else text
    if declared == "Boolean":
        return text == "true" if text in ("true", "false") else text
    if declared == "dict":
        return _js_collection(text, "dict", item_type)
    if declared == "array":
        return _js_collection(text, "array", item_type)
    return text  # any


def _js_collection(code: str, kind: str, item_type: str | None = None) -> Any:
    code = code.strip()
    if kind == "array":
        return _js_array(code, item_type)
    if code == "{}":
        return {}
    m = re.match(r"\{(.*?)\}", code)
    if not m:
        return code
    out: dict[str, Any] = {}
    for k, v in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", m.group(1)):
        k, v = k.strip().strip("'\""), v.strip()
        if v.startswith("[") and v.endswith("]"):
            out[k] = _js_collection(v, "array")
        elif v.startswith("{") and v.endswith("}"):
            out[k] = _js_collection(v, "dict")
        else:
            out[k] = _js_value(v.strip("'\""))
    return out


def _js_array(code: str, item_type: str | None) -> Any:
    two_d = re.match(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)", code)
    try:
        if two_d:
            rows = []
            for i, inner in enumerate(re.findall(r"\[(.*?)\]", two_d.group(0))):
                inner = inner.strip()
                if i == 0 and inner.startswith("["):
                    inner = inner[1:]
                rows.append([_js_value(e.strip()) for e in inner.split(",")])
            return rows
        m = re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", code)
        if not m:
            return code
        body = m.group(1) if m.group(1) is not None else m.group(2)
        parts = body.strip().split(",") if body is not None and body.strip() else []
        if item_type:
            return [_js(p.strip(), item_type, "String") if p.strip().startswith(("'", '"'))
                    else _js(p.strip(), item_type) for p in parts]
        return [_js_value(p.strip()) for p in parts]
    except Exception:  # BFCL's converter falls back to the text on any failure
        return code


def _js_value(text: str) -> Any:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'")):
        return text[1:-1]
    return _number_or_text(text)
