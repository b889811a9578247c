"""``OUT/manifest.json``: what was run, by what, when, and how it ended.

Written when a run starts (so an output directory always says which sweep it
belongs to) and rewritten when it ends. A resume reads it to refuse a different
sweep into the same directory. Written atomically (temp file + rename) so a crash
never leaves half a manifest.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from runner.config.sweep import LoadedSweep
from runner.core.errors import UserError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("trialgrid", "pyarrow", "polars", "numpy", "numba", "pydantic", "httpx"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _served_catalogue(probe: Any) -> dict[str, Any]:
    """The catalogue an MCP server listed (runner.probes.mcp), so the output says what the agents were shown."""
    record = getattr(probe, "mcp_catalogue", None)
    return {"mcp_catalogue": record} if record is not None else {}


def read_manifest(out: Path) -> dict[str, Any] | None:
    path = out / MANIFEST
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read the run manifest: {exc}", file=path,
                        hint="restore it, or start the sweep in an empty --out directory") from None


def write_manifest(out: Path, data: dict[str, Any]) -> None:
    path = out / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def start_manifest(out: Path, loaded: LoadedSweep, trials_total: int) -> dict[str, Any]:
    """Create the manifest, or check and extend the one a previous run left."""
    existing = read_manifest(out)
    session = {"started_at": _now(), "finished_at": None, "pid": os.getpid(), "host": platform.node(),
               "status": "running", "trials_run": 0}
    if existing is None:
        if (out / "trials").exists() and any((out / "trials").iterdir()):
            raise UserError(f"{out} has trial files but no {MANIFEST}; refusing to mix them with a new sweep",
                            hint="choose an empty --out directory")
        data = {
            "format_version": FORMAT_VERSION,
            "sweep_name": loaded.sweep.name,
            "sweep_id": loaded.sweep_id,
            "sweep_sha256": loaded.sweep_sha256,
            "sweep_file": str(loaded.path),
            "sweep": loaded.sweep.model_dump(mode="json"),
            "probes": {p.name: {"kind": p.kind, **p.identity(), **_served_catalogue(p)} for p in loaded.probes},
            "seed": loaded.sweep.seed,
            "trials_total": trials_total,
            "versions": _versions(),
            "remedies": [],
            "created_at": session["started_at"],
            "sessions": [session],
            "counts": {},
            "status": "running",
        }
    else:
        if existing.get("sweep_id") != loaded.sweep_id:
            raise UserError(
                f"{out} holds a different sweep ({existing.get('sweep_name')!r}, id {existing.get('sweep_id')}); "
                f"this sweep's id is {loaded.sweep_id}",
                hint="resume only reruns the same sweep; use another --out directory for a changed sweep")
        data = existing
        data["sessions"].append(session)
        data["versions"] = _versions()
        data["status"] = "running"
    write_manifest(out, data)
    return data


def finish_manifest(out: Path, data: dict[str, Any], *, status: str, trials_run: int, counts: dict[str, int],
                    elapsed_s: float) -> None:
    session = data["sessions"][-1]
    session.update(finished_at=_now(), status=status, trials_run=trials_run, elapsed_s=round(elapsed_s, 3))
    data.update(status=status, counts=counts, finished_at=session["finished_at"])
    write_manifest(out, data)
