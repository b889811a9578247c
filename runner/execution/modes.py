"""``runner.run``: which backend runs a sweep, and every rule about what cannot run together.

There are three ways to run a sweep — ``local`` (this process, the engine, live),
``batch`` (the vendors' batch APIs for the models that ask for it, the others live)
and plug-ins such as ``ray`` (cluster mode, ``trialgrid.backends`` entry points). The
CLI, cluster mode's job entrypoint and a notebook all come through ``run`` here, so a
sweep whose model says ``mode: batch`` goes through the batch API whoever runs it,
and a combination that cannot work (batch mode with the response cache, a multi-turn
probe in batch mode...) is refused with the same one line everywhere, before
anything is sent. Batch mode asked for with ``--ray`` runs on the driver: submitting
and polling a vendor's batch is a handful of calls, there is nothing to shard. ``plan`` holds the rules; the backends
(``runner.execution.backends``) only execute.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from runner.config.sweep import LoadedSweep, Narrowing, load_sweep, local_server_warnings
from runner.core.errors import UserError, warn
from runner.core.exits import DEFAULT_RETRY_KINDS
from runner.core.gates import Gate, parse_gate
from runner.core.messages import say
from runner.core.safety import check_output_dir
from runner.execution.backends import RunOptions, backend, backend_names
from runner.execution.backends.batch.ledger import has_open_batches
from runner.execution.backends.batch.vendors import VENDORS
from runner.execution.run import RunResult
from runner.output.reader import Output
from runner.probes import PROBES
from runner.providers import ErrorKind

LOCAL, BATCH, RAY = "local", "batch", "ray"


@dataclass(frozen=True)
class Plan:
    """What ``plan`` decided: the backend, and the models it sends through batch APIs (batch only)."""

    backend: str
    batch_models: frozenset[str] = frozenset()
    #: a note for the user about how the plan differs from what was asked (printed before the run)
    note: str | None = None


def plan(loaded: LoadedSweep, out: Path | None, *, mode: str | None = None, address: str | None = None,
         workers: int | None = None, cache: Path | None = None) -> Plan:
    """The backend that runs ``loaded`` into ``out``; ``UserError`` if the combination cannot run.

    ``mode`` ``None`` picks: ``batch`` when a model has ``mode: batch`` or ``out`` holds
    batches not yet collected, else ``ray`` when an ``address`` is given, else ``local``.
    ``mode="batch"`` sends *every* model through its batch API (``--batch``). ``out``
    ``None`` skips the rules about the output's state (a job submitted elsewhere).
    """
    if mode is not None and mode not in backend_names():
        raise UserError(f"unknown run mode {mode!r}: expected one of {', '.join(backend_names())}",
                        hint="or leave the mode out: it is picked from the sweep")
    if address is not None and mode not in (None, RAY, BATCH):
        raise UserError(f"an address only applies to a Ray run, not to mode {mode!r}",
                        hint="drop the address, or run with mode 'ray' (--ray)")
    on_ray = mode == RAY or address is not None
    if workers is not None and not on_ray:
        raise UserError("--workers only applies with --ray")
    batch_declared = [m.name for m in loaded.sweep.models if m.mode == "batch"]
    open_batches = out is not None and has_open_batches(out)
    if mode == LOCAL and (batch_declared or open_batches):
        why = (f"model {batch_declared[0]!r} has `mode: batch`" if batch_declared
               else f"{out} holds batches submitted and not yet collected")
        raise UserError(f"{why}; a local run would send those requests live, at live prices",
                        file=loaded.path, hint="leave the mode out (batch mode is picked for it), or set `mode: live` "
                                               "on the model")
    cache_on = cache is not None or loaded.sweep.cache is not None
    if mode == BATCH or batch_declared or open_batches:
        if cache_on:
            raise UserError("batch mode runs without the response cache; it is not available with a cache",
                            hint="drop --cache (and the sweep's `cache` key), or run live")
        note = ("--ray: batch mode submits and polls the vendors' batches from this process (there is nothing to "
                "shard); no Ray workers are started") if on_ray else None
        return Plan(BATCH, frozenset(batch_models(loaded, all_models=mode == BATCH)), note)
    if on_ray:
        return Plan(RAY)
    return Plan(mode or LOCAL)


def _check_retry_kinds(kinds: Sequence[str] | None) -> tuple[str, ...] | None:
    """``--retry-errors`` kinds, checked against the error kinds rows carry; ``UserError`` for an unknown one."""
    if kinds is None:
        return None
    known = [k.value for k in ErrorKind]
    chosen = tuple(dict.fromkeys(k.strip() for k in kinds if k.strip())) or DEFAULT_RETRY_KINDS
    if "all" in chosen:
        return tuple(known)
    for kind in chosen:
        if kind not in known:
            raise UserError(f"--retry-errors: {kind!r} is not an error kind",
                            hint=f"error kinds: {', '.join(known)} (or all); default: {','.join(DEFAULT_RETRY_KINDS)}")
    return chosen


def batch_models(loaded: LoadedSweep, all_models: bool) -> set[str]:
    """The models this run sends through batch APIs. ``UserError`` if the sweep cannot run that way."""
    chosen = {m.name for m in loaded.sweep.models if all_models or m.mode == "batch"}
    if not chosen:
        return chosen
    for i, m in enumerate(loaded.sweep.models):
        if m.name in chosen and m.provider not in VENDORS:
            raise UserError(f"--batch: model {m.name!r} uses provider {m.provider}, which has no batch API",
                            file=loaded.path, key_path=("models", i, "provider"),
                            hint="batch mode needs provider openai, openai-responses or anthropic; set `mode: batch` on those models "
                                 "only, instead of --batch")
    multi = [p for p in loaded.probes if not p.single_turn]
    if multi:
        single = ", ".join(sorted(kind for kind, probe in PROBES.items() if probe.single_turn))
        raise UserError(f"probe {multi[0].name!r} ({multi[0].kind}) is multi-turn: each of its model calls depends on "
                        "the previous answer, so it cannot run through a batch API",
                        file=loaded.path, hint=f"batch mode runs single-turn probes ({single}); "
                                               "run this sweep live, or move that probe to a sweep without batch mode")
    return chosen


def run(sweep: LoadedSweep | str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
        mode: str | None = None, address: str | None = None, workers: int | None = None,
        cache: str | os.PathLike[str] | None = None, strict_params: bool = False, quiet: bool = False,
        retry_errors: Sequence[str] | None = None, wait: bool = False, max_error_rate: float = 0.0,
        fail_on: Sequence[str] = (), gates: Sequence[str | Gate] = (), preflight: bool = True,
        models: Sequence[str] = (), runs: int | None = None, limit: int | None = None) -> RunResult:
    """Run (or resume) a sweep — a file or a ``load_sweep`` result — into ``out`` (default: the sweep's ``output``).

    The backend is picked from the sweep (``plan``): a model with ``mode: batch`` goes
    through its vendor's batch API; ``mode`` forces one (``local``, ``batch`` for every
    model, ``ray``, or another installed backend). ``address``/``workers``: the Ray
    cluster and its worker count (an address alone means ``ray``). ``cache``: the
    response cache directory (else the sweep's ``cache``). ``strict_params``: no
    remedies, a rejected parameter fails the trial. ``quiet``: no progress bar. Progress
    lines and notes (a remedy learned) are log records of the ``trialgrid`` logger
    (``runner.core.messages``); warnings (too few runs, a local server that queues, a
    damaged part or cache) are ``TrialgridWarning``s, through ``warnings``. Trials already in ``out`` are skipped, except,
    with ``retry_errors`` (error kinds, e.g. ``DEFAULT_RETRY_KINDS``), trials whose newest
    row is an error of one of those kinds: they run again and their new row supersedes
    the old one. ``wait``: wait for another process writing ``out`` instead of refusing.

    A try before the whole sweep: ``models`` (names) and ``runs`` (per cell) narrow the
    sweep, which makes it another sweep (its own id); ``limit`` runs at most that many
    trials, in this process. A narrowed run writes, unless ``out`` is given, to its own
    output beside the sweep's (``narrowed_output``), never into the whole sweep's.

    ``preflight``: before anything runs, one request that bills nothing per model endpoint
    (``runner.providers.preflight``); an endpoint that does not answer, refuses the key or
    does not know the model is a ``UserError`` naming each such model entry.

    The result's ``ending`` says how the run ended and its ``exit_code`` is the one
    ``trialgrid run`` exits with (``runner.analysis.verdict``): error rows beyond
    ``max_error_rate`` (a share of trials), a failing case of the ``fail_on`` pass/fail
    probes (names or kinds), a failing interval gate of ``gates`` (texts such as
    ``"upper(decoy_called | ungroundable) <= 0.2"``, or parsed ``Gate``s) or of the
    sweep's own ``gates:``, a budget stop.

    Raises ``UserError`` (one printable line) for a sweep, output, option or combination
    that cannot run, before anything is sent.
    """
    if not 0 <= max_error_rate <= 1:  # NaN fails this too
        raise UserError(f"--max-error-rate {max_error_rate:g}: a share of trials, between 0 and 1")
    if limit is not None and limit < 1:
        raise UserError(f"--limit {limit}: at least 1 trial")
    # a malformed gate is bad input, found before the sweep loads and anything is sent
    judged = [g if isinstance(g, Gate) else parse_gate(g, "--gate") for g in gates]
    narrow = Narrowing(tuple(models), runs)
    if isinstance(sweep, LoadedSweep) and (not narrow or sweep.narrowing == narrow):
        loaded = sweep
    else:  # its warnings are TrialgridWarnings, issued as it loads
        loaded = load_sweep(sweep.path if isinstance(sweep, LoadedSweep) else Path(sweep), narrow=narrow)
    narrow = loaded.narrowing or narrow
    judged += [parse_gate(text, "gate") for text in loaded.sweep.gates]  # the sweep's own, checked as it loaded
    _check_fail_on(loaded, fail_on)
    tried = bool(narrow) or limit is not None
    target = output_of(loaded, out, limit)
    check_output_dir(target)
    cache_dir = Path(cache) if cache is not None else None
    chosen = plan(loaded, target, mode=mode, address=address, workers=workers, cache=cache_dir)
    if limit is not None and chosen.backend != LOCAL:
        raise UserError(f"--limit tries a few trials in this process; it does not go with a {chosen.backend} run",
                        hint="drop --limit, or drop --ray / --batch (and a model's `mode: batch`) for the try")
    if tried:
        what = " ".join(filter(None, [narrow.describe(), f"--limit {limit}" if limit is not None else ""]))
        say(f"a try ({what}): a part of the sweep, written to {target}, not to the sweep's output")
    if chosen.note:
        say(chosen.note)
    if preflight:
        check_endpoints_of(loaded)
    else:
        for line in local_server_warnings(loaded.sweep):  # no answer to tell the simulated agent from the rest
            warn(line)
    # the Ray plug-in's own options travel as a mapping it validates (cluster.options); runner knows no Ray fields
    ray_options = {k: v for k, v in (("address", address), ("workers", workers)) if v is not None}
    options = RunOptions(quiet=quiet, limit=limit, strict_params=strict_params, cache_dir=cache_dir,
                         batch_models=chosen.batch_models, retry_kinds=_check_retry_kinds(retry_errors), wait=wait,
                         backend_options=ray_options if chosen.backend == RAY else {})
    result = backend(chosen.backend).run(loaded, target, options)
    from runner.analysis.verdict import judge  # the statistics load once there is a run to judge
    # once: the verdict and the gates read the object the run's session finished with
    output = result.output or Output.open(target)
    ending = judge(output, stopped=result.stopped, max_error_rate=max_error_rate, fail_on=fail_on, gates=judged)
    return replace(result, output=output, ending=ending)


def output_of(loaded: LoadedSweep, out: str | os.PathLike[str] | None, limit: int | None = None) -> Path:
    """Where a run of ``loaded`` writes: ``out`` when given, else a try's own output (``narrowed_output``) for a
    narrowed sweep or a ``limit``, else the sweep's ``output``."""
    if out is not None:
        return Path(out)
    return narrowed_output(loaded) if loaded.narrowing or limit is not None else Path(loaded.sweep.output)


def narrowed_output(loaded: LoadedSweep) -> Path:
    """Where a try of a sweep writes unless told: beside the sweep's output, named by the narrowed sweep's id, so a
    try never mixes into the whole sweep's output and two different tries never into each other's."""
    return Path(f"{loaded.sweep.output.rstrip('/')}-try-{loaded.sweep_id[:8]}")


def check_endpoints_of(loaded: LoadedSweep) -> None:
    """The preflight of every model of ``loaded`` that has an HTTP endpoint: ``Problems``, one per model entry
    whose endpoint does not answer, refuses its key or does not know its model."""
    from runner.core.sources import Problems
    from runner.providers.preflight import Endpoint, check_endpoints

    endpoints = [Endpoint(m.name, m.provider, m.model_id, m.connection) for m in loaded.sweep.models]
    checked = check_endpoints(endpoints)
    if checked.findings:
        raise Problems([UserError(f.line(), file=loaded.path, hint=f.hint) for f in checked.findings],
                       every_line=True)
    # a local server that runs one request at a time queues a sweep's concurrency; the simulated agent does not
    for line in local_server_warnings(loaded.sweep, except_models=checked.simulated):
        warn(line)


def _check_fail_on(loaded: LoadedSweep, names: Sequence[str]) -> None:
    """A ``fail_on`` that names no pass/fail probe of the sweep is bad input, caught before running."""
    gated = {p.name for p in loaded.probes if "passed" in {f.name for f in p.outcome_fields}}
    gated |= {p.kind for p in loaded.probes if p.name in gated}
    for name in names:
        if name not in gated:
            raise UserError(f"--fail-on {name!r} names no pass/fail probe in {loaded.path}",
                            hint=f"pass/fail probes here: {', '.join(sorted(gated)) or 'none'}")


def run_sweep(loaded: LoadedSweep, out: Path, *, quiet: bool = False, strict_params: bool = False,
              cache_dir: Path | None = None) -> RunResult:
    """``run`` under its earlier name and keywords (``runner.run_sweep``): the backend is picked the same way."""
    return run(loaded, out, quiet=quiet, strict_params=strict_params, cache=cache_dir)
