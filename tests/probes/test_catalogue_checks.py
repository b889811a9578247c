"""Tool catalogues checked at load: a misspelt key, an argument schema that is no JSON Schema, each one located
line and exit 2; vendors' own extra keys and every bundled catalogue still load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.core.errors import TrialgridWarning, UserError
from runner.probes.catalogue import load_catalogue
from tests.helpers.cli import invoke
from tests.helpers.files import CONFIGS, quickstart_dict, write_yaml

GOOD = {"name": "lookup", "description": "Look a customer up.",
        "parameters": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}}


def _write(tmp_path: Path, tools: Any) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools, indent=1))
    return path


BAD: list[tuple[Any, str, str]] = [
    ([GOOD | {"paramters": GOOD["parameters"]}], "[0].paramters", "did you mean 'parameters'"),
    ([{**GOOD, "descripton": "x"}], "[0].descripton", "did you mean 'description'"),
    ([{"type": "function", "function": {**GOOD, "paramters": {}}}], "[0].function.paramters", "did you mean 'parameters'"),
    ([{"type": "function", "functon": GOOD}], "[0].functon", "did you mean 'function'"),
    ([{"name": "a", "description": "", "input_schem": {}}], "[0].input_schem", "did you mean 'input_schema'"),
    ([{"name": "a", "inputSchema": {"type": "object"}, "annotation": {}}], "[0].annotation", "did you mean 'annotations'"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}],
     "[0].parameters.properties.a.type", "not a valid JSON Schema"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}}],
     "[0].parameters.properties.a.pattern", "is not a 'regex'"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}}],
     "[0].parameters.required", ""),
    ([GOOD | {"parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": "0"}}}}],
     "[0].parameters.properties.a.minimum", "not a valid JSON Schema"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"a": {"enum": "x"}}}}],
     "[0].parameters.properties.a.enum", "not a valid JSON Schema"),
    ([GOOD | {"parameters": {"type": "array"}}], "[0].parameters", "JSON-schema object"),
    ([GOOD, {**GOOD, "name": 7}], "[1].name", "non-empty string"),
    ([GOOD, GOOD], "[1]", "duplicate tool name"),
    ([GOOD | {"parameters": {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                             "properties": {"x": {"$ref": "#/$defs/a"}}}}], "[0].parameters.", "is a loop"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/nope"}}}}],
     "[0].parameters.properties.x.$ref", "points at nothing"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}}],
     "[0].parameters.properties.x.$ref", "points outside this schema"),
    ([GOOD | {"description": "x" * (1 << 20)}], "[0].description", "1,048,576 characters"),
    ([GOOD | {"description": 5}], "[0].description", "must be a string"),
    (["lookup"], "[0]", "must be a mapping"),
    ([{"type": "function", "function": "lookup"}], "[0].function", "must be a mapping"),
    ([GOOD | {"parameters": None}], "[0].parameters", "JSON-schema object"),
    ([GOOD | {"parameters": {"type": "object", "properties": ["a"]}}], "[0].parameters.properties",
     "not a valid JSON Schema"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "numbr"}}}}}}], "[0].parameters.properties.a.properties.b.type", "not a valid JSON Schema"),
    ([GOOD | {"parameters": {"type": "object", "additionalProperties": "no"}}],
     "[0].parameters.additionalProperties", "not a valid JSON Schema"),
    ([GOOD | {"parameters": {"type": "object", "properties": {"a": {"type": "array", "items": 3}}}}],
     "[0].parameters.properties.a.items", "not a valid JSON Schema"),
]


@pytest.mark.parametrize("tools, where, words", BAD)
def test_each_mistake_is_one_located_error(tmp_path: Path, tools: Any, where: str, words: str) -> None:
    with pytest.raises(UserError) as info:
        load_catalogue(_write(tmp_path, tools))
    text = str(info.value)
    assert "tools.json:" in text and where in text and words in text, text


def test_twenty_mistakes_at_least_each_one_line_and_exit_2_from_validate(tmp_path: Path) -> None:
    assert len(BAD) >= 20
    tools, where, words = next(b for b in BAD if b[2] == "is a loop")  # through the command a user runs
    data = quickstart_dict()
    data["probes"][0]["catalogue"] = str(_write(tmp_path, tools))
    result = invoke("validate", str(write_yaml(tmp_path / "sweep.yaml", data)))
    assert result.exit_code == 2 and where in result.output and words in result.output, result.output


def test_a_recursive_schema_and_local_refs_load(tmp_path: Path) -> None:
    tree = {"type": "object", "$defs": {"node": {"type": "object", "properties": {
        "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "properties": {"root": {"$ref": "#/$defs/node"}, "again": {"$ref": "#/properties/root"}}}
    assert load_catalogue(_write(tmp_path, [GOOD | {"parameters": tree}]))[0][0].parameters == tree


def test_vendor_extensions_and_types_lists_load(tmp_path: Path) -> None:
    tools = [GOOD | {"strict": True},
             {"name": "b", "description": "", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"},
              "input_examples": [{}]},
             {"name": "c", "inputSchema": {"type": "object", "properties": {"x": {"type": ["string", "null"]}}},
              "annotations": {"readOnlyHint": True}, "execution": {}},
             {"name": "d", "description": "", "parameters": {}}]
    assert [t.name for t in load_catalogue(_write(tmp_path, tools))[0]] == ["lookup", "b", "c", "d"]


def test_a_tool_without_an_argument_schema_is_a_warning(tmp_path: Path) -> None:
    with pytest.warns(TrialgridWarning, match="tool 'x' has no 'parameters'"):
        load_catalogue(_write(tmp_path, [{"name": "x", "description": "No arguments."}]))


def test_every_bundled_catalogue_loads() -> None:
    for path in CONFIGS.rglob("tools.json"):
        assert load_catalogue(path)[0]


def test_validate_and_run_refuse_a_misspelt_catalogue_in_one_line(tmp_path: Path) -> None:
    data = quickstart_dict()
    tools = json.loads(Path(data["probes"][0]["catalogue"]).read_text())
    first = tools[0]["function"] if "function" in tools[0] else tools[0]
    first["paramters"] = first.pop("parameters")
    data["probes"][0]["catalogue"] = str(_write(tmp_path, tools))
    sweep = write_yaml(tmp_path / "sweep.yaml", data)
    for command in ("validate", "run"):
        result = invoke(command, str(sweep), "--out", str(tmp_path / "out")) if command == "run" else \
            invoke(command, str(sweep))
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert result.exit_code == 2 and len(errors) == 1 and "did you mean 'parameters'" in errors[0], result.output
