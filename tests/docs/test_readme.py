"""The README is the front door: it opens with the two commands CI runs, stays short, and maps every page."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.docs.docpages import DOCS, README, links

TEXT = README.read_text()
MAX_LINES = 300


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", TEXT, re.S)
    install_run, install_test = blocks[0].strip(), blocks[1].strip()
    assert install_run.startswith("pip install -e .") and "trialgrid run configs/quickstart.yaml" in install_run
    assert install_test in (ROOT / ".ci" / "run").read_text()


def test_readme_is_a_front_door_of_at_most_300_lines() -> None:
    assert len(TEXT.splitlines()) <= MAX_LINES


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {target.split("#", 1)[0] for target in links(TEXT)}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if f"docs/{p.name}" not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


def test_readme_names_the_fast_test_subset_with_the_markers_pyproject_declares() -> None:
    import tomllib

    markers = [m.split(":", 1)[0] for m in
               tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]]
    # a marker that exempts a test from a check (not one that names a cost) has no place in the fast subset
    markers = [m for m in markers if m not in ("internal_rows",)]
    expr = " and ".join(f"not {m}" for m in markers)
    assert f'python -m pytest tests -m "{expr}"' in TEXT


def test_commands_table_lists_every_command_of_the_cli() -> None:
    import typer

    from runner.cli.app import app, load_plugins

    plugins = typer.Typer()
    load_plugins(plugins)  # cluster mode's commands, without touching the app other tests use
    commands = dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    if plugins.registered_commands or plugins.registered_groups:
        commands.update(typer.main.get_command(plugins).commands)  # type: ignore[attr-defined]
    assert {"run", "report", "import"} <= set(commands)
    rows = [line for line in TEXT.split("## Commands", 1)[1].split("\n## ", 1)[0].splitlines() if line.startswith("| `")]
    table = "\n".join(rows)
    for name, command in commands.items():
        subcommands = getattr(command, "commands", None)
        if subcommands:  # a group: `trialgrid import bfcl`, ...
            for sub in subcommands:
                assert f"`{name} {sub}" in table or f"`trialgrid {name} {sub}" in table, f"{name} {sub}"
        else:
            assert f"`trialgrid {name}" in table or f"`{name} " in table, name


@pytest.mark.slow
def test_quickstart_output_in_the_readme_is_what_the_quickstart_prints(tmp_path: Path) -> None:
    from rich.console import Console

    import runner
    from runner.config.sweep import load_sweep
    from runner.reporting.terminal import print_report

    runner.run(load_sweep(ROOT / "configs" / "quickstart.yaml"), tmp_path / "out", quiet=True)
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    print_report(tmp_path / "out", console)
    printed = {line.rstrip() for line in console.export_text().splitlines()}
    excerpt = TEXT.split("## Quickstart output", 1)[1].split("```\n", 2)[1]
    missing = [line for line in excerpt.splitlines()
               if line.strip() and line.strip() != "…" and line.rstrip() not in printed]  # … marks a cut
    assert not missing, f"README lines the quickstart no longer prints: {missing}"


def test_the_python_example_in_the_readme_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's ``runner.run`` block, run from a copy of the project's configs: exit 0 and one row per trial."""
    import shutil

    block = TEXT.split("```python\n", 1)[1].split("```", 1)[0]
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), scope)  # the README's own example
    result = scope["result"]
    assert result.exit_code == 0 and scope["trials"].height == result.total  # type: ignore[attr-defined]
