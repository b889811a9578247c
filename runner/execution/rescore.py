"""``trialgrid rescore OUT --out NEW``: outcome columns recomputed from stored responses, no model called.

After a scorer fix, a new forbidden-token list or another auditor threshold, the
answers a run already paid for are scored again. Every probe re-scores itself: its
own ``run`` is called with a ``ReplayAgent`` (``runner.execution.replay``) that hands back the
row's recorded calls (``calls``: every response, or the error a call raised, in order),
so there is no second copy of any scoring rule and no probe column is parsed.

The sweep (``--sweep``, default the one the manifest names) decides *how* to score;
the source output decides *what the model said*. Each stored row is matched to the
sweep's grid by (model, probe, case, condition, run) and must carry the same trial
seed — otherwise it answered a different request (another catalogue order, another
seed) and is refused. ``NEW`` is a complete output of that sweep: its ids, its
schema, its manifest (with ``rescored_from`` saying where the answers came from);
cells the source never ran are left out and ``trialgrid run SWEEP --out NEW`` fills
them. Common columns (attempts, tokens, latency, tool calls, response text, cache
hits, the recorded calls) are copied unchanged, each row with the stored content its
calls name (``call_blobs``; the writer keeps it once per batch); error rows stay error rows; a row that cannot be
replayed stops the command before anything is written.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from runner.config.sweep import LoadedSweep, load_sweep
from runner.core.calls import Blobs, referenced_blobs
from runner.core.errors import UserError
from runner.core.manifest import Manifest, RescoredFrom, RunStatus, write_manifest
from runner.core.messages import say
from runner.core.schema import COMMON_FIELDS, STATUS_ERROR, STATUS_OK, trial_schema
from runner.core.types import TrialSpec
from runner.execution.grid import grid_of
from runner.execution.replay import ReplayAgent, ReplayExhausted, stored_responses
from runner.execution.run import count_statuses
from runner.output.lock import LOCK_FILE, lock_output
from runner.output.manifest import finish_manifest, start_manifest
from runner.output.reader import Output
from runner.output.sink import TrialSink
from runner.probes import Probe
from runner.providers import ErrorKind, ProviderError

Cell = tuple[str, str, str, str, int]  # model, probe, case_id, condition, run
_IDS = ("sweep_id", "trial_id")


@dataclass
class RescoreResult:
    out: Path
    rows: int            # rows written
    changed: int         # ok rows whose outcome columns differ from the source's
    errors_kept: int     # error rows copied as they were
    dropped: int         # source rows with no cell in the sweep
    missing: int         # cells of the sweep the source never ran
    counts: dict[str, int] = field(default_factory=dict)


def _read_rows(output: Output, blobs: Blobs) -> Iterator[dict[str, Any]]:
    """Every row of a finished output, as Python values; the content their calls name is added to ``blobs``
    (from every row: a blob may sit on a row a newer one supersedes)."""
    out, trials = output.path, output.trials_dir
    leftovers = sorted(p.name for p in trials.glob("*.arrows")) if trials.is_dir() else []
    if leftovers:
        raise UserError(f"{out} has unfinished trial streams ({', '.join(leftovers[:3])}); a run was interrupted",
                        hint=f"finish or resume it first (`trialgrid run SWEEP --out {out}` repairs them)")
    if not output.parts:
        output.scan()  # the reader's one-line refusal of an output without a finished part
    for path in output.parts:  # oldest first: a later row of a trial supersedes an earlier one
        with pa.memory_map(str(path)) as source:
            reader = ipc.open_file(source)
            for i in range(reader.num_record_batches):
                for row in reader.get_batch(i).to_pylist():
                    blobs.add(row.get("call_blobs"))
                    yield row


def _check_empty(dest: Path) -> None:
    if dest.exists() and any(p.name != LOCK_FILE for p in dest.iterdir()):
        raise UserError(f"{dest} is not empty; rescore writes a new output", hint="choose an empty --out directory")


def _cell(row: Mapping[str, Any]) -> Cell:
    return row["model"], row["probe"], row["case_id"], row["condition"], int(row["run"])


def rescore(source: Path, dest: Path, sweep_path: Path | None = None) -> RescoreResult:
    """Re-score ``source`` into the new output ``dest``. Raises ``UserError``; writes nothing on refusal."""
    output = Output.open(source)  # the manifest and the part footers, read once; damaged or foreign parts refused
    manifest = output.manifest
    if "calls" not in output.scan().collect_schema().names():
        raise UserError(f"{source} records no model calls (trials imported from another harness): there is "
                        "nothing to re-score from", hint="run the sweep instead: trialgrid run SWEEP --out NEW")
    if sweep_path is None:
        sweep_path = manifest.sweep_path(source) or Path("")
        if not sweep_path.is_file():
            raise UserError(f"the sweep file this output was run from ({sweep_path}) is not there",
                            hint="name the sweep to score with: --sweep SWEEP")
    if dest.resolve() == source.resolve():
        raise UserError("--out must be a new directory, not the source output", hint="e.g. --out OUT-rescored")
    _check_empty(dest)
    loaded = load_sweep(sweep_path)
    rows, result = _rescored_rows(output, loaded)
    with lock_output(dest, what="rescore"):  # one writer per output, as for a run
        _check_empty(dest)
        _write(dest, loaded, rows, manifest, source, result)
    result.counts = count_statuses(dest / "trials")
    return result


def _rescored_rows(source: Output, loaded: LoadedSweep) -> tuple[list[dict[str, Any]], RescoreResult]:
    stored: dict[Cell, dict[str, Any]] = {}
    blobs = Blobs()
    for row in _read_rows(source, blobs):
        stored[_cell(row)] = row  # parts oldest first, by their writers' sessions: a later row supersedes
    probes = {p.name: p for p in loaded.probes}
    schema_names = trial_schema(loaded.schema_fields).names
    common = {f.name for f in COMMON_FIELDS} - set(_IDS)
    out: list[dict[str, Any]] = []
    refused: list[str] = []
    changed = errors_kept = missing = 0
    matched: set[Cell] = set()

    async def score_all() -> None:
        nonlocal changed, errors_kept, missing
        for spec in grid_of(loaded):
            cell = (spec.model, spec.probe, spec.case_id, spec.condition, spec.run)
            old = stored.get(cell)
            if old is None:
                missing += 1
                continue
            matched.add(cell)
            if int(old["seed"]) != spec.seed:
                raise UserError(f"trial {old['trial_id']} ({' / '.join(map(str, cell))}) was run with seed {old['seed']}, "
                                f"but this sweep gives it seed {spec.seed}: its stored answer is to a different request",
                                file=loaded.path, key_path=("seed",),
                                hint="rescore with the sweep's original seed (only scoring may change)")
            row = {k: v for k, v in old.items() if k in common}
            row.update(sweep_id=spec.sweep_id, trial_id=spec.trial_id)
            if old.get("calls"):  # the row that carried them in the source may not be copied
                row["call_blobs"] = blobs.rows(referenced_blobs(old["calls"])) or None
            if old["status"] != STATUS_OK:
                errors_kept += 1
                out.append(row)
                continue
            outcome, why = await _replay(probes[spec.probe], spec, old)
            if why is not None:
                refused.append(why)
                continue
            row.update(outcome)
            if row["status"] == STATUS_OK and any(_differs(row.get(k), old.get(k)) for k in outcome):
                changed += 1
            out.append({k: v for k, v in row.items() if k in schema_names})

    asyncio.run(score_all())
    if refused:
        raise UserError(f"{len(refused):,} stored row(s) cannot be replayed, e.g. {refused[0]}; nothing was written",
                        hint="a probe that now needs more model turns than were stored must be rerun: "
                             "`trialgrid run SWEEP` into a new output")
    dropped = len(stored) - len(matched)
    if dropped:
        say(f"{dropped:,} source row(s) have no cell in {loaded.path} (a removed case, condition, model or run) "
            "and are left out")
    if missing:
        say(f"{missing:,} cell(s) of the sweep have no stored row; `trialgrid run {loaded.path} --out OUT` "
            "on the new output runs them")
    return out, RescoreResult(Path(), len(out), changed, errors_kept, dropped, missing)


async def _replay(probe: Probe, spec: TrialSpec, old: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(outcome columns with status, None) or ({}, why the row cannot be replayed)."""
    try:
        agent = ReplayAgent(stored_responses(old), old["model_id"], spec.trial_id)
        outcome = await probe.run(spec, agent)
    except ReplayExhausted as exc:
        return {}, str(exc)
    except ProviderError as exc:
        return {}, f"trial {old['trial_id']}: an ok row without a stored answer ({exc.message})"
    except Exception as exc:
        return {"status": STATUS_ERROR, "error_kind": ErrorKind.INTERNAL.value,
                "error": f"rescore: {type(exc).__name__}: {exc}"}, None
    return {**outcome, "status": STATUS_OK}, None


def _differs(new: Any, old: Any) -> bool:
    if isinstance(new, tuple):
        new = list(new)
    return new != old


def _write(dest: Path, loaded: LoadedSweep, rows: list[dict[str, Any]], source_manifest: Manifest,
           source: Path, result: RescoreResult) -> None:
    started = time.perf_counter()
    dest.mkdir(parents=True, exist_ok=True)
    manifest = start_manifest(dest, loaded, len(grid_of(loaded)))
    manifest.remedies = list(source_manifest.remedies)  # the stored answers were shaped by them
    manifest.rescored_from = RescoredFrom(
        out=str(source.resolve()), sweep_id=source_manifest.sweep_id,
        sweep_sha256=source_manifest.sweep_sha256, sweep_file=source_manifest.sweep_file,
        probes=source_manifest.probes, rows=result.rows, changed=result.changed,
        errors_kept=result.errors_kept, dropped=result.dropped, missing=result.missing,
    )
    write_manifest(dest, manifest)
    schema = trial_schema(loaded.schema_fields, metadata={"trialgrid.sweep_id": loaded.sweep_id})
    engine = loaded.sweep.engine
    with TrialSink(dest, schema, worker="rescore", batch_rows=engine.batch_rows, flush_seconds=3600) as sink:
        for row in rows:
            sink.append(row)
    result.out = dest
    finish_manifest(dest, manifest, status=RunStatus.COMPLETE if not result.missing else RunStatus.PARTIAL, trials_run=len(rows),
                    counts=count_statuses(dest / "trials"), elapsed_s=time.perf_counter() - started)
