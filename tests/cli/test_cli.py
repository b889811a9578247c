"""The command line as a user meets it: help, version, template, validate, run, report."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.probes.misselection import load_triples
from tests.helpers import bundled_sweep

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
    reported = runner.invoke(app, ["report", str(out), "--no-details", "--json", str(deep / "s.json")])
    assert reported.exit_code == 0 and f"\nwrote {deep / 's.json'}\n" in reported.output, reported.output


# -- one output object: a command opens an output once, and a reader never writes into it ----------------------


def test_run_with_fail_on_reads_the_manifest_once_and_each_part_footer_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the report, the error verdict and the --fail-on gate used to find the output each on its own (6 footer
    # reads of every part, 7 manifest reads); the command opens it once and hands the object down, and the
    # statuses the manifest and the verdict count are one pass over the rows (a memory map of each part)
    from collections import Counter
    from typing import Any

    import pyarrow
    import pyarrow.ipc

    import runner.core.manifest as manifest_module

    footers: Counter[str] = Counter()
    manifests: Counter[str] = Counter()
    passes: Counter[str] = Counter()  # memory maps of a part: passes over its rows
    mapped: dict[int, str] = {}  # an open file's id → its path (the survey reads footers through one)
    real_open_file, real_read_manifest = pyarrow.ipc.open_file, manifest_module.read_manifest_file
    real_map, real_os_file = pyarrow.memory_map, pyarrow.OSFile

    def memory_map(path: Any, *args: Any, **kwargs: Any) -> Any:
        passes[str(path)] += 1
        return real_map(path, *args, **kwargs)

    def os_file(path: Any, *args: Any, **kwargs: Any) -> Any:
        source = real_os_file(path, *args, **kwargs)
        mapped[id(source)] = str(path)
        return source

    def open_file(source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(source, str | Path) or id(source) in mapped:
            footers[str(source) if isinstance(source, str | Path) else mapped[id(source)]] += 1
        return real_open_file(source, *args, **kwargs)

    def read_manifest_file(path: Path) -> Any:
        manifests[str(path)] += 1
        return real_read_manifest(path)

    monkeypatch.setattr(pyarrow.ipc, "open_file", open_file)
    monkeypatch.setattr(pyarrow, "memory_map", memory_map)
    monkeypatch.setattr(pyarrow, "OSFile", os_file)
    monkeypatch.setattr(manifest_module, "read_manifest_file", read_manifest_file)
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(bundled_sweep(tmp_path, "negatives.yaml", 2)), "--out", str(out),
                                 "--fail-on", "negative"])
    assert result.exit_code in (0, 1), result.output
    assert "case verdicts pass" in result.output and "negative · leaderboard" in result.output
    parts = sorted(str(p) for p in (out / "trials").glob("*.arrow"))
    assert dict(footers) == dict.fromkeys(parts, 1)
    assert dict(passes) == dict.fromkeys(parts, 1)
    # the session holds the manifest it wrote and hands its finished output to the report and the gate: a fresh
    # run need not read the manifest back at all, and never more than once
    assert set(manifests) <= {str(out / "manifest.json")} and all(n == 1 for n in manifests.values())
    assert parts


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and mtime (a write, a new file or a removed one shows)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def test_a_report_on_a_read_only_output_exits_0_and_writes_nothing(tmp_path: Path) -> None:
    # an archived or shared run: the report used to write phantom.disagreements.jsonl into it (exit 2)
    import json
    import stat

    out = tmp_path / "out"
    ran = runner.invoke(app, ["run", str(bundled_sweep(tmp_path, "phantom.yaml", 1)), "--out", str(out), "-q"])
    assert ran.exit_code == 0, ran.output
    assert not list(out.glob("*.jsonl"))  # the run's own report writes no listing either
    before = _tree(out)
    modes = {p: p.stat().st_mode for p in [out, *out.rglob("*")]}
    for p in modes:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        report = runner.invoke(app, ["report", str(out), "--details"])
        assert report.exit_code == 0, report.output
        assert _tree(out) == before  # tests run as root, where a-w stops nothing: nothing new, nothing changed
        assert "write them with `trialgrid report --listings DIR`" in report.output
        listed = runner.invoke(app, ["report", str(out), "--listings", str(tmp_path / "listings")])
        assert listed.exit_code == 0, listed.output
        assert _tree(out) == before
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    listing = tmp_path / "listings" / "phantom.disagreements.jsonl"
    assert str(listing) in listed.output
    rows = [json.loads(line) for line in listing.read_text().splitlines()]
    assert rows and all({"model", "trace", "condition"} <= set(r) for r in rows)
    csv = runner.invoke(app, ["report", str(out), "-q", "--csv", str(tmp_path / "csv")])
    assert csv.exit_code == 0 and (tmp_path / "csv" / "phantom.disagreements.jsonl").read_text() == listing.read_text()
