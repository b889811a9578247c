"""Case files checked against their tool catalogue, at load, so ``validate`` and ``run`` both see it.

A case that names a field no tool has, an expected argument outside the tool's schema, or a value the
schema cannot hold, is a case no agent can pass (or a check that can never fire) — accepted silently, it
reads in the report as "every model fails this case". Each such mistake is an error here, located (file,
line, key path); where a real case could mean what it wrote, it is a warning instead. The split, as
documented in docs/probes.md ("Case files are checked against the catalogue"):

errors
  - misselection ``expected_tool`` / negative ``expect_action`` / ``expect_calls[].tool`` not in the
    catalogue (the same typo is the same mistake in either probe);
  - ``must_not_infer`` naming a field no tool of the case has (the check can never fire);
  - ``expect_args`` / ``expect_calls[].args`` keys outside the expected tool's schema (unless the schema
    allows extra properties), and values outside its ``enum`` or of a type it cannot hold.
warnings
  - ``allow_ask_fields`` naming no field (it is matched against the reply's words, so a word may be meant);
  - ``allow_extra`` naming no field (it only tolerates, so it cannot make a case unpassable).

Values are compared as the scorer compares them (``scalar_text``): ``"7731904562"`` passes an integer
field, so only a value no schema-legal argument can match is an error. Cases carrying BFCL's answer key
are checked for keys only, as warnings: BFCL's own checker decides their types (Java and JavaScript values
are text), and the few answer keys that name an argument the function does not have are the benchmark's data.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from runner.core.errors import UserError
from runner.core.jsonwalk import scalar_text
from runner.core.sources import Problems, load_source
from runner.core.types import ToolSpec
from runner.probes import Probe
from runner.probes.casefiles import Record, load_records
from runner.probes.misselection import MisselectionConfig, MisselectionProbe
from runner.probes.negative import NegativeCase, NegativeConfig, NegativeProbe

_ACTIONS = ("ask_user", "no_call", "any_call")
#: problems reported at once (the rest are counted), as ``validate`` does for schema errors
_MAX_PROBLEMS = 20


def lint_probes(probes: Sequence[Probe]) -> list[str]:
    """Check every loaded probe's cases against its catalogue: raise the errors, return the warnings."""
    errors: list[UserError] = []
    warnings: list[str] = []
    for probe in probes:
        if isinstance(probe, NegativeProbe):
            _lint_negative(probe, errors, warnings)
        elif isinstance(probe, MisselectionProbe):
            _lint_misselection(probe, errors)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise Problems(errors[:_MAX_PROBLEMS])
    return warnings


def _lint_misselection(probe: MisselectionProbe, errors: list[UserError]) -> None:
    config = probe.config
    assert isinstance(config, MisselectionConfig)
    names = {t.name for t in probe.tools}
    catalogue = sorted(names - {probe.decoy}) if config.decoy_name is None else sorted(names)
    bad = [(i, t) for i, t in enumerate(probe.triples) if t.expected_tool not in catalogue]
    if not bad:
        return
    path = probe.base_dir / config.cases
    source = load_source(path, what="triples file")
    listed = isinstance(source.data, list)
    for i, t in bad:
        loc = (i, "expected_tool") if listed else ("triples", i, "expected_tool")
        errors.append(UserError(f"triple {t.id!r}: expected_tool {t.expected_tool!r} is not a tool in the catalogue, "
                                "so no trial can call it", file=path, line=source.line_of(loc), key_path=loc,
                                hint=_suggest(t.expected_tool, catalogue)))


def _lint_negative(probe: NegativeProbe, errors: list[UserError], warnings: list[str]) -> None:
    assert isinstance(probe.config, NegativeConfig)
    path = probe.base_dir / probe.config.cases
    records: list[Record] | None = None
    for case, tools in probe.cases():
        case_id = case.id
        found = list(_case_problems(case, tools))
        if not found:
            continue
        if records is None:  # read again only when there is something to locate (most files have nothing)
            records = load_records(path, what="negative case file", key="cases")[0]
        rec = next(r for r in records if isinstance(r.data, dict) and r.data.get("id", r.data.get("name")) == case_id)
        for severe, sub, message, hint in found:
            if severe:
                errors.append(rec.error(f"case {case_id!r}: {message}", *sub, hint=hint))
            else:
                warnings.append(f"{path}:{rec.line(*sub)}: case {case_id!r}: {message}")


Problem = tuple[bool, tuple[Any, ...], str, str | None]


def _case_problems(case: NegativeCase, tools: tuple[ToolSpec, ...]) -> Iterator[Problem]:
    """(is an error, key path inside the case, message, hint) for each mistake of one case."""
    by_name = {t.name: t for t in tools}
    every_field = {f for t in tools for f in _field_names(t.parameters)}
    listed = isinstance(case.must_not_infer, list)
    for i, spec in enumerate(case.sentinels):
        tool_name, _, field = spec.rpartition(".")
        sub = ("must_not_infer", i) if listed else ("must_not_infer", spec)
        if tool_name and tool_name not in by_name:
            yield True, sub, f"must_not_infer names {spec!r}, but {tool_name!r} is not a tool of the case", \
                _suggest(tool_name, sorted(by_name))
            continue
        fields = _field_names(by_name[tool_name].parameters) if tool_name else every_field
        if field not in fields:
            yield True, sub, (f"must_not_infer names {field!r}, a field no tool of the case has, so the check "
                              "can never fire"), _suggest(field, sorted(fields))
    for i, field in enumerate(case.allow_ask_fields):
        if field not in every_field:
            yield False, ("allow_ask_fields", i), (f"allow_ask_fields names {field!r}, a field no tool of the case "
                                                   "has (it is matched against the reply's words)"), None
    expect = case.expect_action
    if expect is not None and expect not in _ACTIONS and expect in by_name:
        tool = by_name[expect]
        yield from _args_problems(tool, case.expect_args, ("expect_args",), typed=case.bfcl is None)
        yield from _extra_problems(tool, case.allow_extra, ("allow_extra",))
    for i, want in enumerate(case.expect_calls):
        if want.tool in by_name:
            tool = by_name[want.tool]
            yield from _args_problems(tool, want.args, ("expect_calls", i, "args"), typed=case.bfcl is None)
            yield from _extra_problems(tool, want.allow_extra, ("expect_calls", i, "allow_extra"))


def _args_problems(tool: ToolSpec, args: Mapping[str, Any], at: tuple[Any, ...], *, typed: bool) -> Iterator[Problem]:
    props = tool.parameters.get("properties") or {}
    open_schema = tool.parameters.get("additionalProperties", False) not in (False, None)
    for name, want in args.items():
        if name not in props:
            if not open_schema:
                # an imported benchmark's answer key is its data, defects included (BFCL has a few such cases):
                # said, and kept as imported, so the benchmark's own counts stay comparable
                yield typed, (*at, name), (f"expect_args key {name!r} is not an argument of {tool.name} (its schema "
                                           "has no such property), so no agent can pass"
                                           + ("" if typed else "; it is BFCL's own answer key, kept as imported")), \
                    _suggest(name, sorted(props))
            continue
        if typed and isinstance(props[name], dict):
            why = _value_problem(want, props[name])
            if why is not None:
                yield True, (*at, name), f"{tool.name}.{name}: {why}, so no agent can pass", None


def _extra_problems(tool: ToolSpec, names: Sequence[str], at: tuple[Any, ...]) -> Iterator[Problem]:
    props = tool.parameters.get("properties") or {}
    for i, name in enumerate(names):
        if name not in props:
            yield False, (*at, i), f"allow_extra names {name!r}, which is not an argument of {tool.name}", None


def _value_problem(want: Any, schema: Mapping[str, Any]) -> str | None:
    """Why no schema-legal value can match ``want`` as the scorer compares them, or None."""
    if isinstance(want, Mapping) and "one_of" in want and set(want) <= {"one_of", "optional"}:
        options = want.get("one_of") or []
        if isinstance(options, list) and options:
            reasons = [_value_problem(o, schema) for o in options]
            return None if any(r is None for r in reasons) else f"none of one_of fits ({reasons[0]})"
        return None
    if want is None:
        return None  # "expected null": left out passes
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        text = scalar_text(want)
        allowed = {scalar_text(e) for e in enum}
        if text is None or text not in allowed:
            shown = ", ".join(str(e) for e in enum[:12])
            return f"{want!r} is not one of the schema's enum ({shown})"
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
    if types and not any(_fits(want, t) for t in types if isinstance(t, str)):
        return f"{want!r} cannot be a value of type {'/'.join(map(str, types))}"
    return None


def _fits(value: Any, kind: str) -> bool:
    """Can a value of JSON-schema type ``kind`` compare equal to ``value`` (numbers and text compare as text)?"""
    if kind == "string":
        return not isinstance(value, (list, dict))
    if kind == "integer":
        text = scalar_text(value)
        return not isinstance(value, (list, dict)) and text is not None and _is_int(text)
    if kind == "number":
        text = scalar_text(value)
        return not isinstance(value, (list, dict)) and text is not None and _is_number(text)
    if kind == "boolean":
        return isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false"))
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return True  # a type this check does not know: no opinion


def _is_int(text: str) -> bool:
    try:
        return float(text) == int(float(text))
    except (ValueError, OverflowError):
        return False


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _field_names(schema: Any) -> set[str]:
    """Every property name in a JSON schema, nested ones included (the scorer matches fields at any depth)."""
    out: set[str] = set()
    if isinstance(schema, Mapping):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            out.update(str(k) for k in props)
            for sub in props.values():
                out |= _field_names(sub)
        for key in ("items", "additionalProperties"):
            out |= _field_names(schema.get(key))
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key) or []:
                out |= _field_names(sub)
    return out


def _suggest(name: str, choices: Sequence[str]) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"expected one of {', '.join(choices[:12])}" if choices else None


__all__ = ["lint_probes"]
