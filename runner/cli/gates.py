"""``--gate`` of ``run`` and ``report``: the flag's help, its parsing and the lines a failing gate prints.

Why a module of its own: both commands take the same gates (``runner.analysis.gates`` decides them); the words
a person reads about them are written once, here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.text import Text

from runner.cli.console import EXIT_GATE, err, fail, plain
from runner.core.errors import UserError
from runner.core.safety import term_text

if TYPE_CHECKING:
    from runner.analysis.gates import Gate
    from runner.analysis.leaderboard import Summary

__all__ = ["GATE_HELP", "interval_gates", "parse_gates", "print_gates"]

# --gate of run and report (runner.analysis.gates)
GATE_HELP = ('Exit 1 unless a bound of a rate\'s cluster interval holds, e.g. '
              '"upper(decoy_called | ungroundable) <= 0.20" (BOUND: upper, lower, rate; repeatable; every model '
              'and, without a condition, every condition).')


def parse_gates(texts: list[str], where: str = "--gate") -> list[Gate]:
    from runner.analysis.gates import parse_gate

    return [parse_gate(t, where) for t in texts]


def interval_gates(summary: Summary, gates: list[Gate]) -> None:
    """``report --gate``: each failing row one line, a count, exit 1 (runner.analysis.gates)."""
    from runner.analysis.gates import check_gates

    try:
        failures = check_gates(summary, gates)
    except UserError as exc:
        raise fail(exc) from None
    print_gates(failures, len(gates))
    if failures:
        raise typer.Exit(EXIT_GATE)


def print_gates(failures: list[str], gates: int) -> None:
    for line in failures:
        err.print(Text(term_text(line)), soft_wrap=True)
    plain(f"--gate: {gates} gate(s), {len(failures)} failing row(s)")
