"""How the ``trialgrid`` command speaks: its two consoles, exit codes, and one-line errors and notes.

Public so the commands a plug-in adds (cluster mode's ``submit``, ``status``, ``logs``)
print and fail exactly as the built-in ones do.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.text import Text

from runner.core.errors import UserError

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

EXIT_OK, EXIT_GATE, EXIT_BAD_INPUT = 0, 1, 2


def fail(exc: UserError) -> typer.Exit:
    """Print ``exc``'s one line on stderr; return the exit (code 2) to raise: ``raise fail(exc) from None``."""
    err.print(f"[bold red]error:[/bold red] {exc}", markup=True, soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)


def note(line: str) -> None:
    # server text may hold square brackets: never let rich read it as markup
    err.print(Text.assemble(("note: ", "yellow"), line), soft_wrap=True)


def warn(lines: list[str]) -> None:
    for line in lines:
        err.print(f"[yellow]warning:[/yellow] {line}", soft_wrap=True)
