"""Starting and finishing a run's manifest from a loaded sweep (the record itself is ``runner.core.manifest``).

Written when a run starts (so an output directory always says which sweep it
belongs to) and rewritten when it ends. A resume reads it to refuse a different
sweep into the same directory. This module may know the sweep's config; the record
type below it may not, so that probes and analysis read manifests without importing
config.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from runner.config.sweep import LoadedSweep
from runner.core.errors import UserError
from runner.core.manifest import (
    FORMAT_VERSION,
    MANIFEST,
    Manifest,
    ProbeRecord,
    RunStatus,
    SessionRecord,
    SweepSnapshot,
    read_manifest,
    write_manifest,
)


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


def sweep_snapshot(loaded: LoadedSweep) -> SweepSnapshot:
    """The validated sweep as the manifest records it."""
    data = loaded.sweep.model_dump(mode="json")
    # a price's source only where it has one (a list price): prices typed in the sweep stay as they were written
    data["prices"] = {name: {k: v for k, v in price.items() if v is not None} for name, price in data["prices"].items()}
    for m in data["models"]:  # a callable agent's code, so a rerun after an edit can say what changed
        if m["name"] in loaded.function_sources:
            m["function_source"] = loaded.function_sources[m["name"]]
    return SweepSnapshot.model_validate(data)


def _edited_agents(existing: Manifest, loaded: LoadedSweep) -> list[str]:
    """Callable models whose code changed since ``existing`` was written (the sweep otherwise the same)."""
    before = {m.name: (m.model_extra or {}).get("function_source") for m in existing.sweep.models}
    return [f"{name!r} ({m.function})" for m in loaded.sweep.models
            if (name := m.name) in loaded.function_sources and before.get(name) is not None
            and before[name] != loaded.function_sources[name]]


def start_manifest(out: Path, loaded: LoadedSweep, trials_total: int, *,
                   retry_kinds: Sequence[str] | None = None, picks: Sequence[str] = ()) -> Manifest:
    """Create the manifest, or check and extend the one a previous run left.

    Called with the output's lock held: a session an earlier process left ``running``
    was killed (it would still hold the lock otherwise) and is marked ``crashed``.
    """
    existing = read_manifest(out)
    session = SessionRecord(started_at=_now(), finished_at=None, pid=os.getpid(), host=platform.node(),
                            status=RunStatus.RUNNING, trials_run=0)
    if retry_kinds is not None:
        session.retry_errors = list(retry_kinds)
    if picks:
        session.picks = list(picks)
    if existing is None:
        if (out / "trials").exists() and any((out / "trials").iterdir()):
            raise UserError(f"{out} has trial files but no {MANIFEST}; refusing to mix them with a new sweep",
                            hint="choose an empty --out directory")
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            sweep_name=loaded.sweep.name,
            sweep_id=loaded.sweep_id,
            sweep_sha256=loaded.sweep_sha256,
            sweep_file=str(loaded.path.resolve()),  # readers started anywhere find the case files
            sweep=sweep_snapshot(loaded),
            probes={p.name: ProbeRecord.model_validate({"kind": p.kind, **p.identity(), **_served_catalogue(p)})
                    for p in loaded.probes},
            seed=loaded.sweep.seed,
            trials_total=trials_total,
            versions=_versions(),
            remedies=[],
            created_at=session.started_at,
            sessions=[session],
            counts={},
            status=RunStatus.RUNNING,
        )
    else:
        edited = _edited_agents(existing, loaded) if existing.sweep_id != loaded.sweep_id else []
        if edited:
            raise UserError(
                f"the code of model {', '.join(edited)} changed since {out} was written (its source is part of the "
                f"sweep's identity: id {existing.sweep_id} then, {loaded.sweep_id} now), so this is a new run, not "
                "a resume", hint="write it to another --out directory (or set the model's `version` to say which "
                "code a result is from)")
        if existing.sweep_id != loaded.sweep_id:
            raise UserError(
                f"{out} holds a different sweep ({existing.sweep_name!r}, id {existing.sweep_id}); "
                f"this sweep's id is {loaded.sweep_id}",
                hint="resume only reruns the same sweep; use another --out directory for a changed sweep")
        manifest = existing
        for earlier in manifest.sessions:
            if earlier.status == RunStatus.RUNNING:
                earlier.status = RunStatus.CRASHED
        manifest.sessions.append(session)
        manifest.versions = _versions()
        manifest.status = RunStatus.RUNNING
    write_manifest(out, manifest)
    return manifest


def finish_manifest(out: Path, manifest: Manifest, *, status: str, trials_run: int, counts: dict[str, int],
                    elapsed_s: float) -> None:
    """Record how the current (last) session ended, and the output's counts by status."""
    session = manifest.sessions[-1]
    session.finished_at = _now()
    session.status = status
    session.trials_run = trials_run
    session.elapsed_s = round(elapsed_s, 3)
    manifest.status = status
    manifest.counts = counts
    manifest.finished_at = session.finished_at
    write_manifest(out, manifest)
