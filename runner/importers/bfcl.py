"""``trialgrid import bfcl PATH…``: Berkeley Function Calling Leaderboard data → trialgrid cases.

BFCL ships its questions as JSON lines (``BFCL_v4_<category>.json``, one entry per
line, despite the suffix) with ground truth beside them in ``possible_answer/``; the
``bfcl-eval`` package installs them under ``bfcl_eval/data/``. trialgrid reads the
files and never imports the package, which stays a data source the user installs.

Every case carries BFCL's answer key (``bfcl``: category, the original function docs, the
possible answers), so the negative probe scores it twice: ``passed`` by trialgrid's strict
grounding rules and ``bfcl_passed`` by BFCL's own (``runner.probes.negative.bfcl_checker``).

- ``irrelevance``, ``live_irrelevance`` → negative cases, ``expect_action: no_call``
  (an entry with no functions too: BFCL scores it).
- ``live_relevance`` → positive cases that must make some call (``any_call``).
- ``simple_python``, ``simple_java``, ``simple_javascript``, ``multiple``, ``live_simple``,
  ``live_multiple`` with their possible answers → positive pinning cases of exactly one
  call (the function, the accepted values, nested dicts and lists of dicts included; an
  option ``""`` means the argument may be left out, ``[""]`` alone that it must be). Java
  and JavaScript parameters are strings in the language's syntax, as BFCL's
  function-calling handlers declare them. Python single-call cases also give phantom
  traces: the ground-truth
  call with one optional argument perturbed to a value absent from the question,
  which is the gold phantom. Other arguments are taken as grounded, as BFCL's
  answer key says; a default-valued one can be a derivation, not a literal.
- ``parallel``, ``parallel_multiple``, ``live_parallel``, ``live_parallel_multiple`` →
  positive cases expecting every ground-truth call, in any order, and no other.
- ``multi_turn_miss_param`` → forbidden-inference cases: the turn whose ground truth
  is empty (a parameter is missing, the model should ask) becomes the request; the
  values the *next* turn's user message supplies are the forbidden tokens. Earlier
  turns are summarised in the system prompt (trialgrid does not replay BFCL's
  simulated file system), and the tools are the involved classes' function docs.
- ``multi_turn_miss_func`` → must-ask cases: the turn whose ground truth is empty because
  the function it needs is withheld (it arrives in a later turn); the tools lack it.
- Not imported, with the reason printed per file: ``multi_turn_base`` and
  ``multi_turn_long_context`` (scored by executing every turn against BFCL's stateful
  simulated APIs), ``memory`` and ``web_search`` (need services), ``format_sensitivity``
  (prompt-format variants of other categories' ids, not cases).

BFCL names functions with dots (``math.factorial``); OpenAI-style APIs refuse dots,
so names become ``math_factorial`` (as BFCL's own OpenAI handler does). BFCL types
(``dict``, ``float``, ``tuple``, ``any``) become JSON-schema types. Scoring stances where
the two verdicts differ are listed in docs/bfcl.md.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.core.jsonlines import BadLine, read_json_lines
from runner.core.jsonwalk import canonical_number, normalise, numbers_in

_CATEGORIES = {
    "irrelevance": "irrelevance", "live_irrelevance": "irrelevance", "live_relevance": "relevance",
    "simple": "pinning", "simple_python": "pinning", "simple_java": "pinning", "simple_javascript": "pinning",
    "multiple": "pinning", "live_simple": "pinning", "live_multiple": "pinning",
    "parallel": "parallel", "parallel_multiple": "parallel", "live_parallel": "parallel",
    "live_parallel_multiple": "parallel",
    "multi_turn_miss_param": "miss_param", "multi_turn_miss_func": "miss_func",
}
SUPPORTED_CATEGORIES = tuple(sorted(_CATEGORIES))
_STATEFUL = ("scored by executing every turn against BFCL's stateful simulated APIs (file system, trading, "
             "travel...) and comparing states; trialgrid does not replay them")
_NOT_IMPORTED = {
    "multi_turn_base": _STATEFUL, "multi_turn_long_context": _STATEFUL,
    "memory": "needs BFCL's memory backend (prerequisite conversations write to a key-value or vector store)",
    "web_search": "needs a live web-search service",
    "format_sensitivity": "not cases: ids of other categories re-asked under prompt-format variants",
}
LABELS = {"irrelevance": "negative no_call", "relevance": "positive relevance (any call)",
          "pinning": "positive pinning", "parallel": "positive parallel calls",
          "miss_param": "forbidden-inference", "miss_func": "must-ask (function withheld)"}
_FILE_RE = re.compile(r"^BFCL_v\d+_(?P<category>[a-z_]+)\.json$")
_MULTI_TURN_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json", "MemoryAPI_kv": "memory_kv.json", "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "int": "integer", "bool": "boolean",
          "str": "string"}
_STRING_FILLERS = ("standard", "default", "automatic", "primary", "detailed", "all")
_NUMBER_FILLERS = (7, 13, 42, 99, 365)
_FLOAT_FILLERS = (0.75, 2.5, 12.5)


@dataclass
class ImportResult:
    negative: list[dict[str, Any]] = field(default_factory=list)
    phantom: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (category, outcome) → n
    skipped_files: dict[str, str] = field(default_factory=dict)  # file name → why it was not imported
    in_files: Counter[str] = field(default_factory=Counter)  # category → entries in the files read


class _Skip(Exception):
    """This entry cannot become a case; the message is the reason counted."""


def tool_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _convert_schema(schema: Any) -> Any:
    """BFCL's parameter schema → JSON schema (types renamed, non-standard keys dropped)."""
    if isinstance(schema, list):
        return [_convert_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "optional":
            continue
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out["type"] = _TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {k: _convert_schema(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = _convert_schema(value)
        else:
            out[key] = value
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {}
    return out


def case_label(case: dict[str, Any]) -> str:
    """The count label of an imported case (its kind)."""
    return LABELS[_CATEGORIES[case["origin"].split(":")[1]]]


def _language_doc(fn: dict[str, Any], category: str) -> dict[str, Any]:
    """A Java / JavaScript function doc as BFCL's function-calling handlers show it: every parameter a
    string holding source text, its real type named in the description."""
    lang = "Java" if category.endswith("java") else "JavaScript" if category.endswith("javascript") else None
    if lang is None:
        return fn
    doc: dict[str, Any] = json.loads(json.dumps(fn))
    doc["description"] = doc.get("description", "") + f" Note that the provided function is in {lang} syntax."
    for spec in ((doc.get("parameters") or {}).get("properties") or {}).values():
        kind = spec.get("type")
        text = spec.get("description", "")
        if kind == "any":
            text += f" This parameter can be of any type of {lang} object in string representation."
        else:
            text += f" This is {lang} {kind} type parameter in string representation."
        if kind in ("ArrayList", "Array", "array") and isinstance(spec.get("items"), dict):
            text += f" The list elements are of type {spec['items'].get('type')}; they are not in string representation."
            del spec["items"]
        if kind == "dict" and "properties" in spec:
            text += (" The dictionary entries have the following schema; they are not in string representation. "
                     + json.dumps(spec.pop("properties")))
        spec["description"] = text
        spec["type"] = "string"
    return doc


def _convert_tool(fn: dict[str, Any]) -> dict[str, Any]:
    params = _convert_schema(fn.get("parameters") or {"type": "object", "properties": {}})
    params["type"] = "object"
    props = params.setdefault("properties", {})
    if not isinstance(props, dict):
        raise _Skip("tool schema without a properties mapping")
    params["required"] = [r for r in params.get("required", []) if r in props]
    return {"name": tool_name(fn["name"]), "description": fn.get("description", ""), "parameters": params}


def _messages(turn: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for m in turn:
        role, content = m.get("role"), m.get("content")
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise _Skip(f"message with role {role!r} (only system / user / assistant)")
        out.append({"role": role, "content": content})
    if not any(m["role"] == "user" for m in out):
        raise _Skip("no user message")
    return out


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, item in _bfcl_lines(path):
        if not isinstance(item, dict) or "id" not in item:
            raise UserError("expected a JSON object with an 'id'", file=path, line=number, key_path=("id",))
        # minimal shape guard: the converters index these without checking
        question, function = item.get("question", [[]]), item.get("function", [])
        if not (isinstance(question, list) and question
                and all(isinstance(t, list) and all(isinstance(m, dict) for m in t) for t in question)):
            raise UserError("'question' must be a non-empty list of turns, each a list of message objects",
                            file=path, line=number, key_path=("question",))
        if not (isinstance(function, list) and all(isinstance(f, dict) for f in function)):
            raise UserError("'function' must be a list of function objects", file=path, line=number,
                            key_path=("function",))
        yield number, item


def _bfcl_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each line of a BFCL data file; its first bad line is a ``UserError`` (BFCL's
    own files have none: a bad line means the wrong file, or a damaged one)."""
    for number, item in read_json_lines(path, what="BFCL file"):
        if isinstance(item, BadLine):
            raise UserError(f"{item.reason}: {item.detail}", file=path, line=number,
                            hint="BFCL data files hold one JSON object per line; is this one of them?")
        yield number, item


def _answers(path: Path) -> dict[str, Any]:
    answer_file = path.parent / "possible_answer" / path.name
    if not answer_file.is_file():
        raise UserError(f"no possible answers beside {path.name}", file=answer_file,
                        hint="BFCL keeps ground truth in possible_answer/ next to the question files")
    return {item["id"]: item.get("ground_truth") for _, item in _read_jsonl(answer_file)}


def _expand(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    """(file, category) for every BFCL question file named or inside a named folder."""
    out: list[tuple[Path, str]] = []
    for p in paths:
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and _FILE_RE.match(f.name))
            if not files:
                raise UserError(f"no BFCL_v*_<category>.json files in {p}",
                                hint="point at bfcl_eval/data (python -c 'import bfcl_eval, os; "
                                     "print(os.path.dirname(bfcl_eval.__file__))')")
        elif p.is_file():
            files = [p]
        else:
            raise UserError("no such file or folder", file=p)
        for f in files:
            m = _FILE_RE.match(f.name)
            if not m:
                raise UserError("not a BFCL question file name (expected BFCL_v<N>_<category>.json)", file=f)
            out.append((f, m.group("category")))
    return out


def import_bfcl(paths: Iterable[Path]) -> ImportResult:
    result = ImportResult()
    for path, category in _expand(paths):
        kind = _CATEGORIES.get(category)
        if kind is None:
            result.skipped_files[path.name] = _NOT_IMPORTED.get(category, "category unknown to this importer")
            continue
        answers = _answers(path) if kind in ("pinning", "parallel", "miss_param", "miss_func") else {}
        docs = _multi_turn_docs(path.parent) if kind in ("miss_param", "miss_func") else {}
        for _, item in _read_jsonl(path):
            result.in_files[category] += 1
            try:
                trace = None
                if kind in ("irrelevance", "relevance"):
                    case = _irrelevance(item, category, kind)
                elif kind == "pinning":
                    case, trace = _pinning(item, category, answers.get(item["id"]))
                elif kind == "parallel":
                    case = _parallel(item, category, answers.get(item["id"]))
                elif kind == "miss_param":
                    case = _miss_param(item, category, answers.get(item["id"]), docs)
                else:
                    case = _miss_func(item, category, answers.get(item["id"]), docs)
            except _Skip as why:
                result.counts[(category, f"skipped: {why}")] += 1
                continue
            result.negative.append(case)
            result.counts[(category, LABELS[kind])] += 1
            if kind == "pinning":
                if trace is not None:
                    result.phantom.append(trace)
                    result.counts[(category, "phantom trace")] += 1
                elif _bfcl_language(category) == "python":
                    result.counts[(category, "no phantom: no optional argument to perturb")] += 1
    return result


def _bfcl_language(category: str) -> str:
    return "java" if category.endswith("java") else "javascript" if category.endswith("javascript") else "python"


def _key(category: str, functions: list[dict[str, Any]] | None = None, truth: Any = None) -> dict[str, Any]:
    key: dict[str, Any] = {"category": category}
    if functions is not None:
        key["functions"] = functions
    if truth is not None:
        key["ground_truth"] = truth
    return key


def _irrelevance(item: dict[str, Any], category: str, kind: str) -> dict[str, Any]:
    case: dict[str, Any] = {
        "id": f"bfcl-{item['id']}", "origin": f"bfcl:{category}:{item['id']}",
        "messages": _messages(item["question"][0]), "tools": [_convert_tool(f) for f in item.get("function") or []],
        "expect_action": "no_call" if kind == "irrelevance" else "any_call", "bfcl": _key(category),
    }
    if kind == "relevance":
        case["positive"] = True
    return case


def _expected_value(options: list[Any], top: bool = True) -> tuple[bool, Any]:
    """(present, what trialgrid expects) for one BFCL option list: ``[""]`` alone → absent; one value →
    that value; several or an optional one → ``{one_of, optional}``. A dict (or list of dicts) at the top
    holds option lists per key, one level deep as in BFCL; deeper values are literal."""
    values = [_nested(o) if top else o for o in options if o != ""]
    if not values:
        return False, None
    if len(values) == 1 and len(options) == 1:
        return True, values[0]
    return True, {"one_of": values, "optional": "" in options}


def _nested(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, opts in value.items():
            if not isinstance(opts, list):
                out[k] = opts
                continue
            present, want = _expected_value(opts, top=False)
            if present:
                out[k] = want
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_nested(v) for v in value]
    return value


def _expected_args(args: dict[str, Any]) -> dict[str, Any]:
    expect: dict[str, Any] = {}
    for arg, options in args.items():
        if not isinstance(options, list):
            raise _Skip("possible answer is not a list of options")
        present, want = _expected_value(options)
        if present:
            expect[arg] = want
    return expect


def _parallel(item: dict[str, Any], category: str, truth: Any) -> dict[str, Any]:
    if len(item["question"]) != 1:
        raise _Skip("more than one turn")
    if not isinstance(truth, list) or not truth or not all(isinstance(t, dict) and len(t) == 1 for t in truth):
        raise _Skip("ground truth is not a list of calls")
    names = {f["name"] for f in item["function"]}
    calls = []
    for t in truth:
        (fname, args), = t.items()
        if fname not in names:
            raise _Skip("ground-truth function not in the catalogue")
        calls.append({"tool": tool_name(fname), "args": _expected_args(args)})
    return {
        "id": f"bfcl-{item['id']}", "origin": f"bfcl:{category}:{item['id']}", "positive": True,
        "messages": _messages(item["question"][0]), "tools": [_convert_tool(f) for f in item["function"]],
        "expect_calls": calls, "call_count": len(calls), "bfcl": _key(category, item["function"], truth),
    }


def _pinning(item: dict[str, Any], category: str, truth: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if len(item["question"]) != 1:
        raise _Skip("more than one turn")
    if not isinstance(truth, list) or len(truth) != 1 or not isinstance(truth[0], dict) or len(truth[0]) != 1:
        raise _Skip("ground truth is not exactly one call")
    (fname, args), = truth[0].items()
    functions = {f["name"]: f for f in item["function"]}
    if fname not in functions:
        raise _Skip("ground-truth function not in the catalogue")
    tools = [_convert_tool(_language_doc(f, category)) for f in item["function"]]
    messages = _messages(item["question"][0])
    case = {
        "id": f"bfcl-{item['id']}", "origin": f"bfcl:{category}:{item['id']}", "positive": True,
        "messages": messages, "tools": tools, "expect_action": tool_name(fname), "expect_args": _expected_args(args),
        "call_count": 1, "bfcl": _key(category, item["function"], truth),
    }
    if _bfcl_language(category) != "python":
        return case, None  # phantom traces perturb JSON values; these arguments are source text
    return case, _phantom(item, category, messages, functions[fname], args)


def _phantom(item: dict[str, Any], category: str, messages: list[dict[str, str]], fn: dict[str, Any],
             args: dict[str, list[Any]]) -> dict[str, Any] | None:
    question = "\n".join(m["content"] for m in messages)
    seen, seen_numbers = normalise(question), numbers_in(normalise(question))
    schema = _convert_schema(fn.get("parameters") or {})
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    call = {a: next(o for o in opts if o != "") for a, opts in args.items() if any(o != "" for o in opts)}
    for param, spec in props.items():
        if param in required or not isinstance(spec, dict):
            continue
        taken = {normalise(str(o)) for o in args.get(param, []) if o != ""}
        value = _absent_value(spec, seen, seen_numbers, taken)
        if value is None:
            continue
        name = tool_name(fn["name"])
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        users = [m["content"] for m in messages if m["role"] != "system"]
        return {
            "id": f"bfcl-{item['id']}", "origin": f"bfcl:{category}:{item['id']}",
            "notes": f"{param} perturbed to a value absent from the question",
            "context": {"system": system, "user": users if len(users) > 1 else users[0], "tool_results": []},
            "calls": [{"tool": name, "args": {**call, param: value}}],
            "gold_phantoms": [f"{name}.{param}"],
        }
    return None


def _absent_value(spec: dict[str, Any], seen: str, seen_numbers: set[str], taken: set[str]) -> Any:
    kind = spec.get("type")
    if spec.get("enum"):
        pool: Iterable[Any] = spec["enum"]
    elif kind == "string":
        pool = _STRING_FILLERS
    elif kind == "integer":
        pool = _NUMBER_FILLERS
    elif kind == "number":
        pool = _FLOAT_FILLERS
    else:
        return None  # booleans, objects, arrays: nothing a containment check could call absent
    for value in pool:
        text = canonical_number(str(value)) if isinstance(value, (int, float)) else normalise(str(value))
        present = text in seen_numbers if isinstance(value, (int, float)) else text in seen
        if not present and text not in taken:
            return value
    return None


def _multi_turn_docs(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    doc_dir = data_dir / "multi_turn_func_doc"
    if not doc_dir.is_dir():
        raise UserError(f"no multi_turn_func_doc/ folder beside the multi-turn file in {data_dir}",
                        hint="import from bfcl_eval/data, which holds both")
    docs = {}
    for cls, filename in _MULTI_TURN_DOCS.items():
        path = doc_dir / filename
        if path.is_file():
            docs[cls] = [item for _number, item in _bfcl_lines(path)]
    return docs


def _parse_call(text: str, docs: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise _Skip("ground-truth call does not parse") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise _Skip("ground-truth entry is not a plain call")
    name = node.func.id
    try:
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        positional = [ast.literal_eval(a) for a in node.args]
    except ValueError:
        raise _Skip("ground-truth call has a non-literal argument") from None
    order = list((docs.get(name, {}).get("parameters") or {}).get("properties", {}))
    for i, value in enumerate(positional):
        if i >= len(order):
            raise _Skip("positional argument beyond the documented parameters")
        kwargs[order[i]] = value
    return name, kwargs


def _miss_param(item: dict[str, Any], category: str, truth: Any, docs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    turns = item["question"]
    if not isinstance(truth, list) or len(truth) != len(turns):
        raise _Skip("ground truth does not line up with the turns")
    k = next((i for i, calls in enumerate(truth) if calls == []), None)
    if k is None or k + 1 >= len(turns):
        raise _Skip("no empty ground-truth turn followed by the user's answer")
    functions: dict[str, dict[str, Any]] = {}
    for cls in item.get("involved_classes", []):
        if cls not in docs:
            raise _Skip(f"no function docs for class {cls}")
        for fn in docs[cls]:
            functions.setdefault(fn["name"], fn)
    for name in item.get("excluded_function", []) or []:
        functions.pop(name, None)
    before = [m["content"] for t in turns[: k + 1] for m in t if m.get("role") == "user"]
    answer = " ".join(m["content"] for m in turns[k + 1] if m.get("role") == "user")
    earlier, said_later = normalise(" ".join(before)), normalise(answer)
    forbidden: list[str] = []
    fields: list[str] = []
    for text in truth[k + 1]:
        name, kwargs = _parse_call(text, functions)
        for param, value in kwargs.items():
            token = normalise(str(value))
            if isinstance(value, str) and token and token in said_later and token not in earlier:
                if value not in forbidden:
                    forbidden.append(value)
                if param not in fields:
                    fields.append(param)
    history = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(before[:-1]))
    system = ("You are an assistant operating the tools listed. "
              + (f"Earlier requests in this session, already completed:\n{history}" if history else ""))
    case: dict[str, Any] = {
        "id": f"bfcl-{item['id']}", "origin": f"bfcl:{category}:{item['id']}",
        "messages": [{"role": "system", "content": system.strip()}, {"role": "user", "content": before[-1]}],
        "tools": [_convert_tool(f) for f in functions.values()],
        "expect_action": "ask_user", "bfcl": _key(category),
    }
    if forbidden:
        case["forbidden"] = forbidden
        case["allow_ask_fields"] = fields
    return case


def _miss_func(item: dict[str, Any], category: str, truth: Any, docs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The turn whose function is withheld: the agent has no tool for it and must say so, not call."""
    turns = item["question"]
    if not isinstance(truth, list) or len(truth) != len(turns):
        raise _Skip("ground truth does not line up with the turns")
    k = next((i for i, calls in enumerate(truth) if calls == [] and any(m.get("role") == "user" for m in turns[i])),
             None)
    if k is None:
        raise _Skip("no empty ground-truth turn with a user request")
    withheld = {name for turn, names in (item.get("missed_function") or {}).items() if int(turn) > k for name in names}
    functions: dict[str, dict[str, Any]] = {}
    for cls in item.get("involved_classes", []):
        if cls not in docs:
            raise _Skip(f"no function docs for class {cls}")
        for fn in docs[cls]:
            functions.setdefault(fn["name"], fn)
    for name in list(item.get("excluded_function", []) or []) + sorted(withheld):
        functions.pop(name, None)
    before = [m["content"] for t in turns[: k + 1] for m in t if m.get("role") == "user"]
    history = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(before[:-1]))
    system = ("You are an assistant operating the tools listed. "
              + (f"Earlier requests in this session, already completed:\n{history}" if history else ""))
    return {
        "id": f"bfcl-{item['id']}", "origin": f"bfcl:{category}:{item['id']}",
        "messages": [{"role": "system", "content": system.strip()}, {"role": "user", "content": before[-1]}],
        "tools": [_convert_tool(f) for f in functions.values()],
        "expect_action": "ask_user", "bfcl": _key(category),
        "notes": f"withheld: {', '.join(sorted(withheld))}",
    }
