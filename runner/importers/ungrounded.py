"""``trialgrid import ungrounded PATH``: the ``ungrounded`` package's stimuli and catalogue → misselection.

``ungrounded`` (PyPI) measures the same decoy-reaching failure as trialgrid's
``misselection`` probe, with matched triples written as a JSON list of
``{"id"?, "ungroundable", "groundable_known", "groundable_unknown"?, "expected_tool"?}``
(what ``ungrounded template`` writes) and a tool catalogue in Anthropic or OpenAI form.
PATH is such a stimuli file, or the installed package folder (``ungrounded/``), whose
built-in triples are read from ``stimuli.py`` as a literal — never imported — and
whose catalogue is ``data/example_tools.json``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from runner.core.errors import UserError
from runner.core.safety import read_user_text


def _literal_raw(stimuli_py: Path) -> list[tuple[str, str, str]]:
    """The ``_RAW`` list of (ungroundable, known, unknown) in the package's stimuli.py."""
    try:
        tree = ast.parse(read_user_text(stimuli_py, what="stimuli.py"), filename=str(stimuli_py))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise UserError(f"stimuli.py does not parse as Python: {type(exc).__name__}", file=stimuli_py) from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_RAW" for t in node.targets):
            try:
                raw = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                break
            if (isinstance(raw, list) and raw and all(isinstance(t, tuple) and len(t) == 3
                                                     and all(isinstance(x, str) for x in t) for t in raw)):
                return raw
            break
    raise UserError("no literal _RAW list of triples found", file=stimuli_py,
                    hint="this ungrounded version stores its stimuli differently; export them with "
                         "`ungrounded template --full > stimuli.json` and import that file")


def _from_package(folder: Path, expected_tool: str | None) -> tuple[list[dict[str, Any]], Path | None]:
    raw = _literal_raw(folder / "stimuli.py")
    tool = expected_tool or "fetch_url"  # the tool ungrounded's own DEFAULT_TRIPLES name
    triples = [{"id": f"T{i:02d}", "ungroundable": u, "groundable_known": k, "groundable_unknown": x,
                "expected_tool": tool} for i, (u, k, x) in enumerate(raw)]
    catalogue = folder / "data" / "example_tools.json"
    return triples, catalogue if catalogue.is_file() else None


def _json(path: Path, what: str) -> Any:
    """A regular, size-capped UTF-8 JSON file; anything else is a located ``UserError``."""
    try:
        return json.loads(read_user_text(path, what=what))
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} is not JSON: {exc.msg}", file=path, line=exc.lineno) from None
    except (RecursionError, ValueError) as exc:  # too deep, or an integer too long to convert
        raise UserError(f"{what} does not read: {type(exc).__name__}: {str(exc).split(';')[0][:100]}",
                        file=path) from None


def _from_file(path: Path, expected_tool: str | None) -> list[dict[str, Any]]:
    data = _json(path, "stimuli file")
    if not isinstance(data, list) or not data:
        raise UserError("expected a non-empty JSON list of triples (what `ungrounded template` writes)", file=path, line=1)
    triples = []
    for i, d in enumerate(data):
        if not isinstance(d, dict):
            raise UserError(f"a triple must be an object, got {type(d).__name__}", file=path, key_path=(i,))
        for key in ("ungroundable", "groundable_known"):
            if not isinstance(d.get(key), str) or not d[key].strip():
                raise UserError("required key is missing or empty", file=path, key_path=(i, key))
        tool = d.get("expected_tool") or expected_tool
        if not tool:
            raise UserError("no expected_tool (trialgrid needs the tool that completes the request)", file=path,
                            key_path=(i, "expected_tool"), hint="add it to the triple, or pass --expected-tool NAME")
        if not isinstance(tool, str):
            raise UserError(f"expected_tool must be a string, got {type(tool).__name__}", file=path,
                            key_path=(i, "expected_tool"))
        if d.get("groundable_unknown") is not None and not isinstance(d["groundable_unknown"], str):
            raise UserError("groundable_unknown must be a string", file=path, key_path=(i, "groundable_unknown"))
        triple = {"id": str(d.get("id") or f"T{i:02d}"), "expected_tool": tool,
                  "ungroundable": d["ungroundable"], "groundable_known": d["groundable_known"]}
        if d.get("groundable_unknown"):
            triple["groundable_unknown"] = d["groundable_unknown"]
        triples.append(triple)
    return triples


def import_ungrounded(path: Path, tools: Path | None, expected_tool: str | None) -> tuple[list[dict[str, Any]], Any]:
    """(triples, catalogue JSON) ready to write for a misselection sweep."""
    catalogue_path = tools
    if path.is_dir():
        folder = path / "ungrounded" if (path / "ungrounded" / "stimuli.py").is_file() else path
        if not (folder / "stimuli.py").is_file():
            raise UserError(f"{path} is neither a stimuli JSON file nor the ungrounded package folder (no stimuli.py)")
        triples, bundled = _from_package(folder, expected_tool)
        catalogue_path = catalogue_path or bundled
    elif path.exists():
        triples = _from_file(path, expected_tool)  # a device or FIFO is refused there, by name
    else:
        raise UserError("no such file or folder", file=path)
    if catalogue_path is None:
        raise UserError("no tool catalogue: pass --tools tools.json (ungrounded's catalogue JSON)")
    catalogue = _json(catalogue_path, "tool catalogue")
    seen: set[str] = set()
    for t in triples:
        if t["id"] in seen:
            raise UserError(f"duplicate triple id {t['id']!r}", file=path)
        seen.add(t["id"])
    return triples, catalogue
