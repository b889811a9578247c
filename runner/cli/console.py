"""How the ``trialgrid`` command speaks: its two consoles, exit codes, and one-line errors, warnings and notes.

Every line printed here passes ``runner.core.redact.scrub``: no key of the run reaches the terminal or a log.

Public so the commands a plug-in adds (cluster mode's ``submit``, ``status``, ``logs``)
print and fail exactly as the built-in ones do.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import typer
from rich.console import Console
from rich.text import Text

from runner.core.errors import TrialgridError, TrialgridWarning
from runner.core.exits import (
    EXIT_BAD_INPUT,
    EXIT_BUDGET,
    EXIT_ERRORS,
    EXIT_GATE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
)
from runner.core.messages import is_note, logger
from runner.core.redact import scrub
from runner.core.safety import one_line, term_text

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

#: the exit codes are the library's (``runner.core.exits``): a run's ``ending.exit_code`` is what the CLI exits with
__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BUDGET",
    "EXIT_ERRORS",
    "EXIT_GATE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "count_text",
    "err",
    "fail",
    "messages_as_lines",
    "note",
    "out",
    "plain",
    "print_line",
    "quiet_messages",
    "warn",
    "warnings_as_lines",
]


def fail(exc: TrialgridError, *, every: bool = False) -> typer.Exit:
    """Print ``exc``'s one line on stderr (``every``: each of its problems on a line of its own); return the
    exit (code 2) to raise: ``raise fail(exc) from None``."""
    problems = getattr(exc, "problems", None) if every else None
    for problem in problems or [exc]:
        # user text (labels, paths, server output) is never markup and never terminal control
        err.print(Text.assemble(("error:", "bold red"), " ", one_line(scrub(str(problem)))), soft_wrap=True)
    return typer.Exit(EXIT_BAD_INPUT)


def plain(line: str, console: Console = err) -> None:
    """A message of a command's own: paths and labels in it are text, never rich markup (``[red]``, ``[/]``)
    and never terminal control."""
    console.print(Text(term_text(scrub(line))), soft_wrap=True)


def print_line(line: str) -> None:
    """One line of a long-running command's log, printed as is and flushed (a pipe sees it at once)."""
    out.print(line, soft_wrap=True, markup=False)
    sys.stdout.flush()


def count_text(counts: dict[str, int]) -> str:
    """Rows by status for a person: ``2,340 ok, 12 error`` (not a Python dict)."""
    return ", ".join(f"{n:,} {status}" for status, n in sorted(counts.items())) or "no rows"


def note(line: str) -> None:
    # server text may hold square brackets: never let rich read it as markup, nor a terminal as control
    err.print(Text.assemble(("note: ", "yellow"), one_line(scrub(line))), soft_wrap=True)


def warn(lines: list[str]) -> None:
    """A yellow ``warning:`` line per item on stderr (what every ``TrialgridWarning`` becomes under the CLI)."""
    for line in lines:
        err.print(Text.assemble(("warning:", "yellow"), " ", one_line(scrub(line))), soft_wrap=True)


@contextmanager
def warnings_as_lines() -> Iterator[None]:
    """While a command runs, each ``TrialgridWarning`` is printed as its ``warning:`` line, once per command however
    often it is issued (a server that sends the same bad field in every answer is one line), and again in the
    next command (no once-per-process memory: a second command in one process, as under ``CliRunner``, says it
    again); other warnings show as Python shows them."""
    with warnings.catch_warnings():
        shown = warnings.showwarning  # pytest's recorder under a test, else Python's own
        said: set[str] = set()

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            if issubclass(category, TrialgridWarning):
                if str(message) not in said:
                    said.add(str(message))
                    warn([str(message)])
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        warnings.simplefilter("always", TrialgridWarning)
        yield


class _Lines(logging.Handler):
    """The ``trialgrid`` logger's records on stderr: a progress line as it is, a note as its ``note:`` line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            (note if is_note(record) else plain)(record.getMessage())
        except Exception:  # a closed stream, a record that does not format: never the command's end
            self.handleError(record)


@contextmanager
def messages_as_lines() -> Iterator[None]:
    """While a command runs, what trialgrid says (``runner.core.messages``) is printed on stderr: progress lines
    and notes (``quiet_messages`` keeps the notes only). Not passed up to the root logger, so a handler there does
    not print it twice."""
    handler = _Lines(logging.INFO)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def quiet_messages() -> None:
    """``--quiet``: of what trialgrid says, the notes only (no progress lines)."""
    for handler in logger.handlers:
        if isinstance(handler, _Lines):
            handler.addFilter(is_note)
