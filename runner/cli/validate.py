"""``trialgrid validate SWEEP``: is this sweep right, before anything is sent?

It loads the sweep and every file it names (every problem, up to 20, each located), says the grid's size, and
with ``prices`` estimates tokens and dollars per model from an offline calibration run. With ``--oracle`` it
also proves the case files passable: every case is asked once of the oracle persona (``provider: sim, model:
oracle``), which answers as the case's key says, and every case the oracle fails (a case no agent could pass)
is named with the reason its row gives; exit 1 when one is not passable (so CI can gate on it), 2 for a sweep
that does not load. Nothing is written beside the sweep: the oracle's rows go to a temporary folder.

The calibration run and the proof are one one-run oracle sweep (``oracle_run``), so both ask the cells one way.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.text import Text

from runner.cli.console import EXIT_GATE, fail, note, out, plain
from runner.core.errors import UserError
from runner.core.safety import one_line

if TYPE_CHECKING:
    from runner.config.prove import Proof
    from runner.config.sweep import LoadedSweep
    from runner.output import Output

__all__ = ["oracle_run", "register", "validate"]


def validate(
    sweep: Path = typer.Argument(..., help="Sweep file (YAML)."),
    oracle: bool = typer.Option(False, "--oracle",
                                help="Also ask every case once of the oracle persona (offline, nothing billed) and "
                                     "name each case no agent could pass, and why; exit 1 if any."),
    start_servers: bool = typer.Option(False, "--start-servers",
                                       help="Start the MCP servers the sweep names (mcp_server.command) to check "
                                            "their catalogues. A sweep file that names a server is code: trust it "
                                            "as you would a script."),
) -> None:
    """Check a sweep file and every file it names, without sending anything (every problem, up to 20); with `prices`,
    estimate tokens and dollars per model from an offline calibration run; with --oracle, prove every case
    passable."""
    from runner.config.sweep import load_sweep
    from runner.execution.grid import grid_of

    try:
        loaded = load_sweep(sweep, start_servers=start_servers)
    except UserError as exc:
        raise fail(exc, every=True) from None
    grid = grid_of(loaded)
    from runner.reporting.textgrid import fit_width, say

    # a terminal or COLUMNS: the line wraps there; a pipe or a log keeps it whole
    say(out, Text(one_line(f"{sweep}: ok — sweep {loaded.sweep.name!r} (id {loaded.sweep_id}), "
                           f"{len(loaded.sweep.models)} model(s), {len(loaded.probes)} probe(s), {len(grid):,} trials"
                           + (f"; {len(loaded.unstarted)} probe(s) with an MCP server not checked"
                              if loaded.unstarted else ""))), fit_width(out))
    if not loaded.sweep.prices and not oracle:
        return
    try:
        with oracle_run(loaded) as (proof, rows):
            if loaded.sweep.prices:
                print_estimate(loaded, proof, rows)
            if oracle:
                _prove(sweep, proof, rows)
    except UserError as exc:
        raise fail(exc) from None


@contextmanager
def oracle_run(loaded: LoadedSweep) -> Iterator[tuple[Proof, Output | None]]:
    """The oracle's one-run sweep of ``loaded`` and its rows, in a temporary folder removed afterwards (no rows when
    no probe of the sweep is one the oracle answers)."""
    import runner
    from runner.config.prove import oracle_sweep

    proof = oracle_sweep(loaded)
    if not proof.loaded.probes:
        yield proof, None
        return
    with tempfile.TemporaryDirectory(prefix="trialgrid-oracle-") as tmp:
        result = runner.run(proof.loaded, Path(tmp) / "oracle", quiet=True)
        yield proof, result.output


def _prove(sweep: Path, proof: Proof, rows: Output | None) -> None:
    """``--oracle``: each case the oracle failed, with why; exit 1 if any."""
    from runner.analysis.proof import unpassable_cases

    for name in proof.skipped:
        note(f"probe {name!r} is not checked: the oracle answers negative, misselection, phantom and "
             "propagation cases (a judge trace has no right answer but the people who labelled it)")
    if rows is None:
        plain(f"{sweep}: nothing to prove passable (no probe the oracle answers)", out)
        return
    asked, failed = unpassable_cases(rows, {p.name: p.kind for p in proof.loaded.probes})
    cases = {(f.probe, f.case_id) for f in failed}
    if not failed:
        plain(f"{sweep}: every case is passable — the oracle passed all {asked:,} (case, condition) cells", out)
        return
    plain(f"{sweep}: {len(cases):,} case(s) no agent could pass ({len(failed):,} of {asked:,} cells failed "
          "by the oracle, which answers as each case's key says):", out)
    for f in failed:
        plain(f"  {f.probe} / {f.case_id} ({f.condition}): {f.why}", out)
    raise typer.Exit(EXIT_GATE)


def print_estimate(loaded: LoadedSweep, proof: Proof, rows: Output | None) -> None:
    """The cost estimate: tokens and dollars per model, from the oracle's calibration run, and its basis."""
    from runner.analysis.estimate import estimate

    per_model = estimate(loaded, rows)
    multistep = [p for p in proof.loaded.probes if p.kind == "propagation"]
    plain("cost estimate, from a calibration run (each cell asked once of the oracle, offline): input tokens are "
          "the requests' length at about 4 characters a token; output tokens are the fewest a passing answer takes, "
          "so real replies cost more" + ("; a propagation task at the oracle's 2 turns (an agent may take up to "
                                         "max_turns)" if multistep else ""), out)
    width = max(len(m.model) for m in per_model)
    for m in per_model:
        usd = f"${m.usd:,.2f}" if m.usd is not None else "no price"
        plain(f"  {m.model:<{width}}  {m.trials:>9,} trials  {m.input_tokens:>13,} in  {m.output_tokens:>11,} out  "
              f"{usd:>10}", out)
    priced = [m.usd for m in per_model if m.usd is not None]
    total = sum(priced)
    budget = loaded.sweep.budget
    line = f"  total ${total:,.2f}" + ("" if len(priced) == len(per_model) else " (models without a price not counted)")
    if budget is not None and budget.usd is not None:
        line += f"; the budget is ${budget.usd:,.2f}" + (", which stops the grid before it is finished"
                                                         if total > budget.usd else "")
    plain(line, out)
    for name, price in loaded.sweep.prices.items():
        if price.source is not None:
            plain(f"  {name}: {price.input:g} / {price.output:g} USD per million tokens, the {price.source}", out)
    for name in proof.skipped:
        plain(f"  probe {name!r} is not estimated (the oracle does not answer judge requests)", out)


def register(app: typer.Typer) -> None:
    app.command(name="validate")(validate)
