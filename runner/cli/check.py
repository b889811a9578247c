"""``trialgrid check SWEEP``: prove a sweep's case files passable before spending on models.

It asks every case of the sweep once of the oracle persona (``provider: sim, model: oracle``), which answers
as the case's key says, and names every case the oracle fails — a case no agent could pass — with the
reason its row gives. Exit 0 when every case is passable, 1 when one is not (so CI can gate on it), 2 for
a sweep that does not load. Nothing is written beside the sweep: the oracle's rows go to a temporary folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from runner.cli.console import EXIT_GATE, fail, note, out, plain
from runner.core.errors import UserError


def check(sweep: Path = typer.Argument(..., help="Sweep file (YAML).")) -> None:
    """Run the oracle on every case and name the cases no agent could pass, and why (exit 1 if any)."""
    from runner.analysis.proof import unpassable_cases
    from runner.config.prove import oracle_sweep
    from runner.config.sweep import load_sweep
    from runner.execution.run import run_sweep

    try:
        loaded = load_sweep(sweep, announce=note)
        proof = oracle_sweep(loaded)
        for name in proof.skipped:
            note(f"probe {name!r} is not checked: the oracle answers negative, misselection, phantom and "
                 "propagation cases (a judge trace has no right answer but the people who labelled it)")
        if not proof.loaded.probes:
            plain(f"{sweep}: nothing to check (no probe the oracle answers)", out)
            return
        with tempfile.TemporaryDirectory(prefix="trialgrid-check-") as tmp:
            result = run_sweep(proof.loaded, Path(tmp) / "oracle", quiet=True)
            assert result.output is not None
            asked, failed = unpassable_cases(result.output, {p.name: p.kind for p in proof.loaded.probes})
    except UserError as exc:
        raise fail(exc) from None
    cases = {(f.probe, f.case_id) for f in failed}
    if not failed:
        plain(f"{sweep}: every case is passable — the oracle passed all {asked:,} (case, condition) cells", out)
        return
    plain(f"{sweep}: {len(cases):,} case(s) no agent could pass ({len(failed):,} of {asked:,} cells failed "
          "by the oracle, which answers as each case's key says):", out)
    for f in failed:
        plain(f"  {f.probe} / {f.case_id} ({f.condition}): {f.why}", out)
    raise typer.Exit(EXIT_GATE)


def register(app: typer.Typer) -> None:
    app.command(name="check")(check)
