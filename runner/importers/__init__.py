"""Importers: other projects' data → trialgrid case files plus a sweep that runs them.

Each importer converts, then validates every converted record with the same loaders
a sweep uses (a record that would not load is counted as skipped, with the reason,
never written), writes the files and a ``sweep.yaml`` against the ``sim`` agent, and
finally loads that sweep — so an import that reports success always runs.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from runner.core.errors import UserError
from runner.core.sources import Source
from runner.importers.agentprop import import_agentprop
from runner.importers.bfcl import SUPPORTED_CATEGORIES, ImportResult, case_label, import_bfcl
from runner.importers.ungrounded import import_ungrounded
from runner.probes.catalogue import parse_catalogue
from runner.probes.negative import NegativeCase
from runner.probes.phantom import Trace

_NEGATIVE_FILE, _PHANTOM_FILE, _SWEEP_FILE = "bfcl_negative.jsonl", "bfcl_phantom.jsonl", "sweep.yaml"


def _refuse_overwrite(out: Path, names: list[str], force: bool) -> None:
    existing = [n for n in names if (out / n).exists()]
    if existing and not force:
        raise UserError(f"{out / existing[0]} exists; not overwriting", hint="pass --force, or choose another --out")
    out.mkdir(parents=True, exist_ok=True)


def _valid_negative(case: dict[str, Any]) -> str | None:
    """Why ``case`` would not load, or None."""
    try:
        parsed = NegativeCase.model_validate(case)
        tools = parse_catalogue(case["tools"], Source(path=Path("<import>"), data=case["tools"])) if case["tools"] else ()
    except (ValueError, UserError) as exc:
        return str(exc).splitlines()[0][:120]
    names = {t.name for t in tools}
    if parsed.expect_action not in (None, "ask_user", "no_call", "any_call") and parsed.expect_action not in names:
        return "expected tool not in the catalogue"
    return None


def _valid_trace(trace: dict[str, Any]) -> str | None:
    try:
        Trace.model_validate(trace)
    except ValueError as exc:
        return str(exc).splitlines()[0][:120]
    return None


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def write_bfcl(result: ImportResult, out: Path, *, force: bool = False, runs: int = 1) -> Counter[tuple[str, str]]:
    """Write the imported cases, traces and a sim sweep into ``out``; return counts by (category, outcome)."""
    counts = Counter(result.counts)
    negative, phantom = [], []
    for case in result.negative:
        why = _valid_negative(case)
        category = case["origin"].split(":")[1]
        if why is None:
            negative.append(case)
        else:
            counts[(category, case_label(case))] -= 1  # the converter counted it; it is not written
            counts[(category, f"dropped: {why}")] += 1
    for trace in result.phantom:
        why = _valid_trace(trace)
        if why is None:
            phantom.append(trace)
        else:
            counts[(trace["origin"].split(":")[1], "phantom trace")] -= 1
            counts[(trace["origin"].split(":")[1], f"dropped trace: {why}")] += 1
    if not negative and not phantom:
        raise UserError("nothing to write: no BFCL entry of a supported category was found",
                        hint="supported: " + ", ".join(SUPPORTED_CATEGORIES))
    files = [_SWEEP_FILE] + ([_NEGATIVE_FILE] if negative else []) + ([_PHANTOM_FILE] if phantom else [])
    _refuse_overwrite(out, files, force)
    probes: list[dict[str, Any]] = []
    if negative:
        _write_jsonl(out / _NEGATIVE_FILE, negative)
        probes.append({"kind": "negative", "name": "bfcl-negative", "cases": _NEGATIVE_FILE, "runs": runs})
    if phantom:
        _write_jsonl(out / _PHANTOM_FILE, phantom)
        probes.append({"kind": "phantom", "name": "bfcl-phantom", "traces": _PHANTOM_FILE, "runs": runs})
    sweep = {"name": "bfcl-import", "seed": 0, "output": str(out / "run"),
             "models": [{"name": "sim-typical", "provider": "sim", "model": "typical"},
                        {"name": "auditor-balanced", "provider": "sim", "model": "auditor-balanced"}],
             "probes": probes}
    _write_sweep(out / _SWEEP_FILE, sweep, "Imported from BFCL by `trialgrid import bfcl`. Swap the sim models for real ones.")
    return counts


def write_ungrounded(triples: list[dict[str, Any]], catalogue: Any, out: Path, *, force: bool = False) -> None:
    _refuse_overwrite(out, ["triples.yaml", "tools.json", _SWEEP_FILE], force)
    (out / "triples.yaml").write_text(
        "# Imported from the ungrounded package by `trialgrid import ungrounded`.\n"
        + yaml.safe_dump({"triples": triples}, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
    (out / "tools.json").write_text(json.dumps(catalogue, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    sweep = {"name": "ungrounded-import", "seed": 0, "output": str(out / "run"),
             "models": [{"name": "sim-typical", "provider": "sim", "model": "typical"}],
             "probes": [{"kind": "misselection", "cases": "triples.yaml", "catalogue": "tools.json", "runs": 10}]}
    _write_sweep(out / _SWEEP_FILE, sweep, "Imported from ungrounded by `trialgrid import ungrounded`.")


def _write_sweep(path: Path, sweep: dict[str, Any], comment: str) -> None:
    from runner.config.sweep import load_sweep

    path.write_text(f"# {comment}\n# Run it with:  trialgrid run {path}\n"
                    + yaml.safe_dump(sweep, sort_keys=False), encoding="utf-8")
    load_sweep(path)  # what was written must load; a UserError here names the file and line


__all__ = ["ImportResult", "import_agentprop", "import_bfcl", "import_ungrounded", "write_bfcl", "write_ungrounded"]
