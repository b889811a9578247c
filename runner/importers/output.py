"""Where an importer writes its run: checked first, built beside, swapped in last.

``--force`` must not destroy the run already in ``--out`` when the new input turns
out to be bad, so an importer that replaces a run builds the new one in a temporary
sibling directory and swaps it in only after every row and the manifest are written
(``runner.core.safety.replacing``). Replacing a run holds that run's writer lock
(``runner.output.lock``) from the check to the swap: a run still writing it is
never replaced under its feet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from runner.core.errors import UserError
from runner.core.safety import check_output_dir, replacing
from runner.output.lock import lock_output


def _holds_run(out: Path) -> bool:
    return out.is_dir() and ((out / "manifest.json").exists() or any((out / "trials").glob("*.arrow*")))


@contextlib.contextmanager
def _replacing_locked(out: Path) -> Iterator[Path]:
    with lock_output(out, what="import --force"), replacing(out) as build:
        yield build


def run_output(out: Path, *, force: bool) -> contextlib.AbstractContextManager[Path]:
    """A context giving the directory to write the run into; on success it is ``out``.

    Refuses an ``out`` that is a file, or that holds a run unless ``force``. A new or
    replaced ``out`` is built in a temporary sibling; an existing folder without a run
    (the user's own folder) is written into directly.
    """
    check_output_dir(out)
    if _holds_run(out):
        if not force:
            raise UserError(f"{out} already holds a run", hint="pass --force to replace it, or choose another --out")
        return _replacing_locked(out)
    if not out.exists():
        return replacing(out)
    return contextlib.nullcontext(out)
