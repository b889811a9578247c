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
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.config.sweep import LoadedSweep, load_sweep, local_server_warnings
from runner.core.errors import UserError, warn
from runner.core.gates import parse_gate
from runner.core.messages import say
from runner.core.safety import check_output_dir
from runner.execution.backends import Plan, backend, backend_names
from runner.execution.backends.batch.ledger import has_open_batches
from runner.execution.options import RunOptions
from runner.output.reader import Output
from runner.probes import PROBES

if TYPE_CHECKING:
    from runner.execution.run import RunResult

LOCAL, BATCH, RAY = "local", "batch", "ray"


def plan(loaded: LoadedSweep, out: Path | None, options: RunOptions | None = None) -> Plan:
    """The backend that runs ``loaded`` into ``out`` with ``options``; ``UserError`` if the combination cannot run.

    ``options.mode`` ``None`` picks: ``batch`` when a model has ``mode: batch`` or ``out``
    holds batches not yet collected, else ``ray`` when an ``address`` is given, else
    ``local``. ``mode="batch"`` sends *every* model through its batch API (``--batch``).
    ``out`` ``None`` skips the rules about the output's state (a job submitted elsewhere).
    """
    options = options or RunOptions()
    mode, address, workers, cache = options.mode, options.address, options.workers, options.cache
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


def batch_models(loaded: LoadedSweep, all_models: bool) -> set[str]:
    """The models this run sends through batch APIs. ``UserError`` if the sweep cannot run that way."""
    chosen = {m.name for m in loaded.sweep.models if all_models or m.mode == "batch"}
    if not chosen:
        return chosen
    from runner.providers.settings import BATCH_PROVIDERS

    for i, m in enumerate(loaded.sweep.models):
        if m.name in chosen and m.provider not in BATCH_PROVIDERS:
            raise UserError(f"--batch: model {m.name!r} uses provider {m.provider}, which has no batch API",
                            file=loaded.path, key_path=("models", i, "provider"),
                            hint=f"batch mode needs provider {', '.join(BATCH_PROVIDERS)}; set `mode: batch` on those "
                                 "models only, instead of --batch")
    multi = [p for p in loaded.probes if not p.single_turn]
    if multi:
        single = ", ".join(sorted(kind for kind, probe in PROBES.items() if probe.single_turn))
        raise UserError(f"probe {multi[0].name!r} ({multi[0].kind}) is multi-turn: each of its model calls depends on "
                        "the previous answer, so it cannot run through a batch API",
                        file=loaded.path, hint=f"batch mode runs single-turn probes ({single}); "
                                               "run this sweep live, or move that probe to a sweep without batch mode")
    return chosen


def run(sweep: LoadedSweep | str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
        options: RunOptions | None = None, **fields: Any) -> RunResult:
    """Run (or resume) a sweep — a file or a ``load_sweep`` result — into ``out`` (default: the sweep's ``output``).

    How to run is one ``RunOptions``: ``options``, or its fields as keywords
    (``runner.run("sweep.yaml", quiet=True, retry_errors=[])``), or both (the keywords
    replace those fields of ``options``); every field is documented there and checked as
    the object is made.

    The backend is picked from the sweep (``plan``): a model with ``mode: batch`` goes
    through its vendor's batch API; ``mode`` forces one (``local``, ``batch`` for every
    model, ``ray``, or another installed backend). Progress lines and notes (a remedy
    learned) are log records of the ``trialgrid`` logger (``runner.core.messages``);
    warnings (too few runs, a local server that queues, a damaged part or cache) are
    ``TrialgridWarning``s, through ``warnings``. Trials already in ``out`` are skipped,
    except, with ``retry_errors``, trials whose newest row is an error of one of those
    kinds: they run again and their new row supersedes the old one.

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
    probes (names or kinds), a failing interval gate of ``gates`` or of the sweep's own
    ``gates:``, a budget stop.

    Raises ``UserError`` (one printable line) for a sweep, output, option or combination
    that cannot run, before anything is sent.
    """
    if options is None:
        options = RunOptions(**fields)
    elif fields:
        options = replace(options, **fields)
    narrow = options.narrowing
    if isinstance(sweep, LoadedSweep) and (not narrow or sweep.narrowing == narrow):
        loaded = sweep
    else:  # its warnings are TrialgridWarnings, issued as it loads
        loaded = load_sweep(sweep.path if isinstance(sweep, LoadedSweep) else Path(sweep), narrow=narrow)
    narrow = loaded.narrowing or narrow
    judged = [*options.parsed_gates, *(parse_gate(text, "gate") for text in loaded.sweep.gates)]  # the sweep's own too
    _check_fail_on(loaded, options.fail_on)
    _check_cases(loaded, options.cases)
    target = output_of(loaded, out, options.picks)
    check_output_dir(target)
    chosen = plan(loaded, target, options)
    if options.picks and chosen.backend != LOCAL:
        raise UserError(f"--limit and --case try a few trials in this process; they do not go with a {chosen.backend} "
                        "run", hint="drop them, or drop --ray / --batch (and a model's `mode: batch`) for the try")
    if narrow or options.picks:
        what = " ".join(filter(None, [narrow.describe(), *options.pick_flags]))
        say(f"a try ({what}): a part of the sweep, written to {target}, not to the sweep's output")
    if chosen.note:
        say(chosen.note)
    if options.preflight:
        check_endpoints_of(loaded)
    else:
        for line in local_server_warnings(loaded.sweep):  # no answer to tell the simulated agent from the rest
            warn(line)
    result = backend(chosen.backend).run(loaded, target, options, chosen)
    from runner.analysis.verdict import judge  # the statistics load once there is a run to judge
    # once: the verdict and the gates read the object the run's session finished with
    output = result.output or Output.open(target)
    ending = judge(output, stopped=result.stopped, max_error_rate=options.max_error_rate, fail_on=options.fail_on,
                   gates=judged)
    return replace(result, output=output, ending=ending)


def output_of(loaded: LoadedSweep, out: str | os.PathLike[str] | None, picks: bool = False) -> Path:
    """Where a run of ``loaded`` writes: ``out`` when given, else a try's own output (``narrowed_output``) for a
    narrowed sweep or a run that ``picks`` some of its trials (``--case``, ``--limit``), else the sweep's
    ``output``."""
    if out is not None:
        return Path(out)
    return narrowed_output(loaded) if loaded.narrowing or picks else Path(loaded.sweep.output)


def _check_cases(loaded: LoadedSweep, cases: Sequence[str]) -> None:
    """A ``--case`` that no probe of the sweep has is bad input, said before anything runs."""
    if not cases:
        return
    import difflib

    from runner.execution.grid import grid_of

    known = grid_of(loaded).case_ids()
    for case in cases:
        if case not in known:
            close = difflib.get_close_matches(case, sorted(known), n=1)
            raise UserError(f"--case {case!r}: no probe of the sweep has a case of that id"
                            + (f" (did you mean {close[0]!r}?)" if close else ""), file=loaded.path,
                            hint=f"{len(known):,} case ids in this sweep; `trialgrid view` or the case files list them")


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
    for line in local_server_warnings(loaded.sweep, except_models=checked.not_queueing):
        warn(line)


def _check_fail_on(loaded: LoadedSweep, names: Sequence[str]) -> None:
    """A ``fail_on`` that names no pass/fail probe of the sweep is bad input, caught before running."""
    gated = {p.name for p in loaded.probes if "passed" in {f.name for f in p.outcome_fields}}
    gated |= {p.kind for p in loaded.probes if p.name in gated}
    for name in names:
        if name not in gated:
            raise UserError(f"--fail-on {name!r} names no pass/fail probe in {loaded.path}",
                            hint=f"pass/fail probes here: {', '.join(sorted(gated)) or 'none'}")
