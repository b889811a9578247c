"""The command line as a user meets it: help, version, template, validate, run, report."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.probes.misselection import load_triples

runner = CliRunner()


@pytest.mark.parametrize("command", [[], ["run"], ["validate"], ["report"], ["template"]])
def test_every_command_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("trialgrid ")


def test_template_writes_a_valid_triples_file(tmp_path: Path) -> None:
    dest = tmp_path / "triples.yaml"
    assert runner.invoke(app, ["template", "misselection", "--out", str(dest)]).exit_code == 0
    triples, _, warnings = load_triples(dest)
    assert len(triples) == 1 and not warnings
    again = runner.invoke(app, ["template", "misselection", "--out", str(dest)])
    assert again.exit_code == 2 and "not overwriting" in again.output
    assert runner.invoke(app, ["template", "nosuchprobe"]).exit_code == 2


def test_validate_counts_trials(write_sweep) -> None:
    result = runner.invoke(app, ["validate", str(write_sweep(runs=7))])
    assert result.exit_code == 0
    assert f"{3 * 13 * 3 * 7:,} trials" in result.output


def test_run_prints_report_and_report_command_reads_output(write_sweep, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(write_sweep(runs=5)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for text in ("sim-careful", "sim-typical", "sim-reckless", "ungroundable", "groundable_unknown", "groundable_known"):
        assert text in result.output
    # the summary counts rows by status in words, not as a Python dict
    assert "trials run (0 already done)" in result.output and " ok; output: " in result.output
    assert "{'ok'" not in result.output
    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 0 and "sim-reckless" in report.output


def test_report_on_a_directory_without_a_run(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "manifest.json" in result.output


@pytest.mark.parametrize("command", [["report", "{}"], ["diff", "{}", "{}"], ["rescore", "{}", "--out", "new"]])
@pytest.mark.parametrize(("given", "says"), [
    ("missing", "missing: no such directory"),
    ("sweep.yaml", "sweep.yaml: a file, not a trialgrid output directory"),
    ("out", "out: a folder of trialgrid output directories (quickstart), not one itself (name the runs inside "
            "it, e.g. out/quickstart)"),
])
def test_a_reader_given_what_is_not_a_run_says_what_it_is_in_one_line(
        command: list[str], given: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the new user's mistakes: a typo, the sweep file instead of its output, the folder above the run
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text("name: x\n")
    (tmp_path / "out" / "quickstart").mkdir(parents=True)
    (tmp_path / "out" / "quickstart" / "manifest.json").write_text("{}")
    result = runner.invoke(app, [arg.format(given) for arg in command])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {says}") and result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output


def test_a_commands_own_lines_are_never_wrapped_in_a_log(write_sweep, tmp_path: Path) -> None:
    # not a terminal (a log, CI): a line that holds a path or a command to copy stays one line, however long
    from tests.importers.test_import_trials import ARGS, leaderboard_like_csv

    deep = tmp_path / ("a-folder-with-a-long-name-" * 3) / "and-deeper"
    deep.mkdir(parents=True)
    sweep = write_sweep(runs=5, name=str(deep.relative_to(tmp_path) / "sweep.yaml"))
    validated = runner.invoke(app, ["validate", str(sweep)])
    assert validated.exit_code == 0 and validated.output.count("\n") == 1, validated.output
    src = deep / "m1.csv"
    leaderboard_like_csv(src)
    out = deep / "imported"
    imported = runner.invoke(app, ["import", "trials", str(src), "--out", str(out), *ARGS])
    assert imported.exit_code == 0 and f"report it with: trialgrid report {out}\n" in imported.output, imported.output
    reported = runner.invoke(app, ["report", str(out), "-q", "--json", str(deep / "s.json")])
    assert reported.exit_code == 0 and reported.output == f"wrote {deep / 's.json'}\n", reported.output
