"""Every command a page shows in a code block, run as a new user would copy it: the docs hold.

Each shell line of a fenced block (``\\`` continuations joined, ``&&`` chains split, comments dropped) is either
run here, in a folder holding a copy of ``configs/`` and in the page's order (so a ``report`` finds the ``run``
before it), or left out by a rule below that says why — a cluster, a server that runs until stopped, outside data,
a placeholder such as ``OUT``, or a benchmark (each benchmark and script is run with ``--help`` by
``test_docs.py``). A new command on a page must fit a rule or run. What runs is offline: ``provider: sim``.
A command exits 0, or 1 where the page says it gates (``--fail-on``, ``diff``); never 2, never a traceback.

And every figure a performance page quotes comes with the command that prints it: each table of measured figures
has a command in it or in the paragraph just above it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.docpages import page, pages, prose
from tests.helpers.files import CONFIGS

#: (pattern, why it is not run here); the first that matches a command decides
NOT_RUN = (
    (r"^pip install", "an install: the suite runs in the installed tree"),
    (r"-m pytest", "the test suite itself"),
    (r"--ray\b|^trialgrid (submit|status|logs)\b", "needs a Ray cluster (tests/cluster runs these paths)"),
    (r"^trialgrid (serve|view)\b", "serves until stopped (tests/providers and tests/viewer run it)"),
    (r"^trialgrid audit --listen\b", "receives until stopped (tests/importers/test_receiver.py runs it)"),
    (r"--batch\b", "needs a batch server (tests/providers runs it against trialgrid serve)"),
    (r"(benchmarks|scripts)/\w+\.py", "a benchmark or script, minutes of work (test_docs.py runs each with --help)"),
    (r"^trialgrid import\b", "needs outside data (tests/importers runs each importer)"),
    (r"audit-staging\.yaml", "a paid auditor model over a user's own imported traces"),
    (r"^trialgrid (audit|sample)\b.*\b(imported|audit)/", "reads what `import traces` made of a user's own traces "
     "(tests/probes/test_phantom_audit.py runs audit and sample)"),
    (r"configs/local-model\.yaml", "needs a local model server (docs/local-models.md)"),
    (r"negatives-old", "needs an older run of the same sweep"),
    (r"\b(sweep\.yaml|OUT|OLD|NEW|PATH|HEAD|ANCHORS|P)\b|…", "a placeholder, not a file"),
)
#: commands that gate: exit 1 is their documented answer
GATES = re.compile(r"--fail-on|^trialgrid diff\b")


def _cli_commands() -> set[str]:
    import typer

    from runner.cli.app import app, load_plugins

    plugins = typer.Typer()
    load_plugins(plugins)
    names = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    return names | {c.name or c.callback.__name__ for c in plugins.registered_commands if c.callback}


_SHELL = re.compile(rf"(trialgrid (?:{'|'.join(sorted(_cli_commands()))})\b|python |PYTHONPATH=\S+ python |pip |"
                    r"for \w+ in .*; do )")


def _blocks(text: str) -> list[str]:
    """The fenced blocks of a page that are shell or untagged (not yaml, python, json...), fence by fence."""
    out, lang, lines = [], None, []
    for line in text.splitlines():
        fence = re.match(r"^ *```(\w*)", line)
        if fence and lang is None:
            lang, lines = fence.group(1), []
        elif fence:
            if lang in ("", "bash", "sh", "console"):
                out.append("\n".join(lines))
            lang = None
        elif lang is not None:
            lines.append(line)
    return out


def _commands(text: str) -> list[str]:
    """Every shell command line of a page's blocks (a ``&&`` chain is one command: its parts run in turn)."""
    out = []
    for block in _blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#\s.*$", "", line.strip().removeprefix("$ "))
            if _SHELL.match(line):
                out.append(line)
    return out


def _excluded(command: str) -> str | None:
    return next((why for pattern, why in NOT_RUN if re.search(pattern, command)), None)


#: steps of a chain that are skipped while the rest of it runs (the suite already runs in the installed tree)
_SKIPPED_STEP = re.compile(r"^pip install|-m pytest")


def _runnable(path: Path) -> list[str]:
    """A page's commands to run, in order: a chain's install step dropped, a chain with a step left out dropped."""
    out = []
    for command in _commands(path.read_text()):
        steps = [s.strip() for s in (command.split(" && ") if not command.startswith("for ") else [command])]
        steps = [s for s in steps if not _SKIPPED_STEP.search(s)]
        if steps and all(_excluded(s) is None for s in steps):
            out += steps
    return out


RUN_PAGES = [p for p in pages() if _runnable(p)]


def test_every_command_a_page_shows_is_run_or_left_out_for_a_reason() -> None:
    shown = {c for p in pages() for c in _commands(p.read_text())}
    assert len(shown) > 30  # the reader found the pages' commands
    unknown = [c for c in shown if _excluded(c) is None
               and not re.match(r"(trialgrid (run|validate|check|report|plan|rescore|diff|template)|for s in) ", c)]
    assert not unknown, f"commands no rule runs or leaves out: {unknown}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for every page, as one user's checkout: a page's run of a bundled sweep another page already ran
    resumes with nothing to do (the pages share their sweeps), so each sweep is run once."""
    folder = tmp_path_factory.mktemp("doc-commands")
    shutil.copytree(CONFIGS, folder / "configs")
    return folder


@pytest.mark.slow  # the bundled sweeps, each run once as written (thousands of sim trials)
@pytest.mark.xdist_group("doc-commands")  # one worker, in page order, sharing `workdir`
@pytest.mark.parametrize("path", RUN_PAGES, ids=lambda p: p.name)
def test_the_commands_of_a_page_run_as_shown(path: Path, workdir: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in _runnable(path):
        done = subprocess.run(["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=600)
        allowed = (0, 1) if GATES.search(command) else (0,)
        assert done.returncode in allowed and "Traceback" not in done.stderr, (command, done.returncode,
                                                                                 done.stderr[-3000:])


# --- every figure with its command ---------------------------------------------------------------------------------

FIGURE = re.compile(r"\d[\d,.]*\s*(?:trials/s|rows/s|µs|MiB|CPU s|%)|\d\.\d+×")
COMMAND = re.compile(r"`(?:PYTHONPATH=\S+ )?python (?:-m \S+ )?(?:benchmarks|scripts|tests)/|`trialgrid |python benchmarks/")


def _tables(text: str) -> list[tuple[str, str]]:
    """(the paragraph above, the table) for every markdown table outside code blocks."""
    out = []
    blocks = re.split(r"\n\s*\n", prose(text))
    for i, block in enumerate(blocks):
        if block.lstrip().startswith("|"):
            out.append((blocks[i - 1] if i else "", block))
    return out


@pytest.mark.parametrize("name", ["performance.md"])
def test_every_table_of_figures_comes_with_the_command_that_prints_it(name: str) -> None:
    missing = [table.splitlines()[0] for above, table in _tables(page(name))
               if FIGURE.search(table) and not COMMAND.search(table) and not COMMAND.search(above)]
    assert not missing, f"{name}: tables of figures with no command beside them: {missing}"
