"""The docs are the user's contract: each table is read from the page it lives on and checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from runner.core.schema import COMMON_FIELDS
from runner.probes import PROBES
from tests.conftest import ROOT
from tests.docs.docpages import DOCS, README, anchors, links, page, pages, prose, section, table_after

#: paths the docs name that land in this release from work in flight; drop each once it exists
PENDING_PATHS: set[str] = set()


def _pct(cell: str) -> list[float]:
    return [float(x) / 100 for x in re.findall(r"(\d+(?:\.\d+)?)%", cell)]


def _type_label(t: pa.DataType) -> str:
    """An Arrow type as the docs write it: ``list<string>``, ``list<struct<id, name>>``, ``timestamp[ms, UTC]``."""
    if pa.types.is_list(t):
        return f"list<{_type_label(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(t.field(i).name for i in range(t.num_fields)) + ">"
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}, {t.tz}]"
    return {pa.float64(): "float64", pa.float32(): "float32"}.get(t, str(t))


def _columns(rows: list[list[str]]) -> list[tuple[str, str]]:
    return [(r[0].strip("`"), r[1]) for r in rows]


# --- probes.md: the output schema ---------------------------------------------------------------------------------


def test_common_columns_table_lists_every_column_in_order_with_its_type() -> None:
    rows = table_after(page("probes.md"), "Common columns (every probe):")
    assert _columns(rows) == [(f.name, _type_label(f.type)) for f in COMMON_FIELDS]


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_each_probes_outcome_columns_match_its_outcome_fields(kind: str) -> None:
    rows = table_after(page("probes.md"), f"`{kind}` outcome columns:")
    assert _columns(rows) == [(f.name, _type_label(f.field().type)) for f in PROBES[kind].outcome_fields]


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_each_probes_rates_are_listed_headline_first(kind: str) -> None:
    text = section(page("probes.md"), f"## The `{kind}` probe")
    line = next(line for line in text.splitlines() if line.startswith("**Rates**"))
    assert re.findall(r"`([^`]+)`", line) == list(PROBES[kind].rates)


def test_every_probe_kind_has_a_section_and_no_section_names_an_unknown_kind() -> None:
    documented = set(re.findall(r"^## The `([a-z_]+)` probe$", page("probes.md"), re.M))
    assert documented == set(PROBES)


def test_error_kind_row_names_every_error_kind() -> None:
    from runner.providers.errors import ErrorKind

    row = next(r for r in table_after(page("probes.md"), "Common columns (every probe):") if r[0] == "`error_kind`")
    assert set(re.findall(r"`([a-z_]+)`", row[2])) == {k.value for k in ErrorKind}


def test_propagation_rules_and_injection_kinds_are_named() -> None:
    from runner.probes.propagation import fabrication, injection, interceptor

    text = section(page("probes.md"), "## The `propagation` probe")
    for name in (*fabrication.RULES, *interceptor.RULES, *injection.KINDS):
        assert f"`{name}`" in text, name


# --- simulated-agent.md: personas ---------------------------------------------------------------------------------


def test_persona_table_matches_personas() -> None:
    from runner.sim import PERSONAS

    rows = {r[0].strip("`"): r for r in table_after(page("simulated-agent.md"), "| persona | reach wide")}
    assert set(rows) == set(PERSONAS)
    for name, p in PERSONAS.items():
        row = rows[name]
        assert _pct(row[1]) == [p.reach_wide[s] for s in ("known", "unfamiliar", "unnamed")]
        assert _pct(row[2]) == [p.ask[s] for s in ("known", "unfamiliar", "unnamed")]
        assert _pct(row[3]) == [p.invent]
        assert float(row[4]) == p.sigma


def test_persona_traits_table_matches_personas() -> None:
    from runner.sim import PERSONAS

    rows = {r[0].strip("`"): r for r in table_after(page("simulated-agent.md"), "| persona | chain")}
    assert set(rows) == set(PERSONAS)
    for name, p in PERSONAS.items():
        row = rows[name]
        assert _pct(row[1]) == [p.chain] and _pct(row[2]) == [p.off_target]
        assert float(row[3]) == p.position_boost
        assert _pct(row[4]) == [p.ask_missing] and _pct(row[5]) == [p.pad] and _pct(row[6]) == [p.garble]


def test_multistep_table_matches_traits() -> None:
    from runner.sim.multistep import TRAITS

    rows = {r[0].strip("`"): r for r in table_after(page("simulated-agent.md"), "| persona | tool use")}
    assert set(rows) == set(TRAITS)
    for name, t in TRAITS.items():
        row = rows[name]
        assert [_pct(c)[0] for c in row[1:8]] == [t.tool_use, t.react_text, t.fabricate, t.check_obvious,
                                                 t.check_subtle, t.retry, t.claim_after_error]
        assert float(row[8]) == t.sigma


def test_auditor_and_judge_tables_match_their_personas() -> None:
    from runner.sim.auditor import AUDITORS
    from runner.sim.judging import JUDGES

    text = page("simulated-agent.md")
    rows = {r[0].strip("`"): r for r in table_after(text, "| auditor |")}
    assert set(rows) == {f"auditor-{name}" for name in AUDITORS}
    for name, a in AUDITORS.items():
        assert [_pct(c)[0] for c in rows[f"auditor-{name}"][1:7]] == [
            a.flag_literal, a.flag_related, a.flag_derived, a.flag_unsupported, a.break_contract, a.transport]
    rows = {r[0].strip("`"): r for r in table_after(text, "| judge persona |")}
    assert set(rows) == set(JUDGES)
    for name, j in JUDGES.items():
        assert _pct(rows[name][1]) == [j.error] and _pct(rows[name][2]) == [j.lenient]


# --- sweep.md: the reference sweep --------------------------------------------------------------------------------


def test_sweep_reference_lists_every_key_of_the_sweep_models_and_engine() -> None:
    from runner.config.sweep import EngineConfig, ModelConfig, Sweep
    from runner.probes.misselection import MisselectionConfig

    block = re.search(r"## Keys\n\n```yaml\n(.*?)```", page("sweep.md"), re.S)
    assert block is not None
    data = yaml.safe_load(block.group(1))
    assert set(data) == set(Sweep.model_fields)
    assert set(data["models"][0]) == set(ModelConfig.model_fields)
    assert set(data["engine"]) == set(EngineConfig.model_fields)
    probe = set(data["probes"][0])
    # catalogue and mcp_server are alternatives: the reference shows the file
    assert probe == set(MisselectionConfig.model_fields) - {"mcp_server"}
    assert set(EngineConfig().model_dump()) == set(data["engine"])
    assert data["engine"] == EngineConfig().model_dump()


def test_sweep_reference_comments_name_every_provider_and_retry_default() -> None:
    from runner.config.sweep import ModelConfig
    from runner.providers import PROVIDERS

    lines = section(page("sweep.md"), "## Keys").splitlines()
    provider = next(line for line in lines if line.strip().startswith("provider:"))
    assert set(re.findall(r"[a-z][a-z-]+", provider.split("#", 1)[1])) >= set(PROVIDERS), provider
    retry = next(line for line in lines if line.strip().startswith("retry:")).split("#", 1)[1]
    defaults = ModelConfig.model_fields["retry"].annotation().model_dump()  # type: ignore[misc]
    assert {k: float(v) for k, v in re.findall(r"(\w+) \(([\d.]+)\)", retry)} == defaults, retry


@pytest.mark.parametrize("name", ["README.md", "sweep.md"])
def test_the_unknown_key_example_is_what_a_sweep_with_that_typo_prints(name: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from runner.config.sweep import load_sweep
    from runner.core.errors import UserError

    shown = next(line for line in page(name).splitlines() if line.startswith("error: sweep.yaml:11 "))
    cases = ROOT / "configs" / "misselection"
    (tmp_path / "sweep.yaml").write_text(
        "name: quickstart\nseed: 1\nmodels:\n  - name: sim-typical\n    provider: sim\n    model: typical\n"
        f"probes:\n  - kind: misselection\n    cases: {cases / 'triples.yaml'}\n"
        f"    catalogue: {cases / 'tools.json'}\n    runz: 20\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as exc:
        load_sweep(Path("sweep.yaml"))
    assert shown == f"error: {exc.value}"


# --- reports.md: the scorecard rules ------------------------------------------------------------------------------


def test_scorecard_rules_state_the_modules_thresholds() -> None:
    from runner.analysis.scorecard import (
        ALPHA,
        BRITTLE_MIN,
        DEGRADED_MIN,
        MAX_ERROR_SHARE,
        MIN_GROUNDED_CORRECT,
        ROBUST_MIN,
    )

    text = section(page("reports.md"), "## Scorecard")
    for name, value in (("MAX_ERROR_SHARE", f"{MAX_ERROR_SHARE:.0%}"),
                        ("MIN_GROUNDED_CORRECT", f"{MIN_GROUNDED_CORRECT:.0%}"),
                        ("ALPHA", f"{ALPHA:g}"), ("ROBUST_MIN", f"{ROBUST_MIN:.2f}"),
                        ("DEGRADED_MIN", f"{DEGRADED_MIN:.2f}"), ("BRITTLE_MIN", f"{BRITTLE_MIN:.2f}")):
        row = next(line for line in text.splitlines() if f"`{name}`" in line)
        assert value in row, (name, value, row)


# --- every page ---------------------------------------------------------------------------------------------------


def _page_id(path: object) -> str:
    return str(getattr(path, "name", path))


@pytest.mark.parametrize("path", pages(), ids=_page_id)
def test_every_relative_link_points_at_an_existing_file_and_heading(path) -> None:  # type: ignore[no-untyped-def]
    text = path.read_text()
    broken = []
    for target in links(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(target)
    assert not broken, f"{path.name}: broken links {broken}"


PATH_RE = re.compile(r"`((?:runner|stats|cluster|benchmarks|scripts|configs|tests|docs)/[^`\s*<>]*)`")


@pytest.mark.parametrize("path", pages(), ids=_page_id)
def test_every_repository_path_a_page_names_exists(path) -> None:  # type: ignore[no-untyped-def]
    missing = [p for p in PATH_RE.findall(prose(path.read_text()))
               if p not in PENDING_PATHS and not re.search(r"[A-Z]{3,}", p) and not (ROOT / p).exists()]
    assert not missing, f"{path.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("path", sorted(DOCS.glob("*.md")), ids=_page_id)
def test_each_docs_page_has_a_title_and_opens_by_saying_what_it_is_for(path) -> None:  # type: ignore[no-untyped-def]
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# ") and lines[1] == "" and lines[2], path.name
    assert re.match(r"This page (is|covers|describes|explains|records)\b", lines[2]), (path.name, lines[2])


def test_the_docs_folder_is_only_pages_and_the_report_picture() -> None:
    assert {p.suffix for p in DOCS.iterdir()} <= {".md", ".png"}
    assert (DOCS / "report.png").exists()
    assert "docs/report.png" in page("reports.md")  # the screenshot command that renders it


def test_readme_and_license_agree_with_pyproject() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"]["text"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert f"Python ≥ {project['requires-python'].lstrip('>=')}" in README.read_text()


def test_output_page_names_every_error_kind() -> None:
    from runner.providers.errors import ErrorKind

    text = section(page("output.md"), "### Error rows, exit codes and `--retry-errors`")
    first = text.split("an `error_kind`", 1)[1].split(")", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", first)) == {k.value for k in ErrorKind}


# --- every command a page shows -----------------------------------------------------------------------------------

_FLAG_RE = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")


def _shown_code(text: str) -> list[str]:
    """Every command-like snippet of a page: lines of fenced blocks (continuations joined) and inline code spans."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return lines + re.findall(r"`([^`]+)`", prose(text))


def _without_quotes(snippet: str) -> str:
    return re.sub(r"\"[^\"]*\"|'[^']*'", "", snippet.split(" #", 1)[0])


def _cli_options() -> dict[str, set[str]]:
    """``"run"``, ``"import bfcl"``... → the options that command accepts (cluster mode's commands included)."""
    import typer

    from runner.cli.app import app, load_plugins

    plugins = typer.Typer()
    load_plugins(plugins)
    commands = dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    if plugins.registered_commands:
        commands.update(typer.main.get_command(plugins).commands)  # type: ignore[attr-defined]
    found: dict[str, set[str]] = {}
    for name, command in commands.items():
        for sub, leaf in (getattr(command, "commands", None) or {None: command}).items():
            found[f"{name} {sub}" if sub else name] = {o for p in leaf.params for o in (*p.opts, *p.secondary_opts)}
    return found


@pytest.mark.parametrize("path", pages(), ids=_page_id)
def test_every_trialgrid_option_a_page_shows_exists(path) -> None:  # type: ignore[no-untyped-def]
    options = _cli_options()
    unknown = []
    for snippet in _shown_code(path.read_text()):
        for m in re.finditer(r"\btrialgrid ([a-z]+)(?: ([a-z]+))?([^|;&]*)", _without_quotes(snippet)):
            name, sub, rest = m.groups()
            command = f"{name} {sub}" if f"{name} {sub}" in options else name
            if command not in options:
                continue  # prose such as "trialgrid measures"
            rest = rest if command != name else f" {sub or ''}{rest}"
            unknown += [f"trialgrid {command} {flag}" for flag in _FLAG_RE.findall(rest)
                        if flag not in options[command] | {"--help"}]
    assert not unknown, f"{path.name} shows options the command does not have: {unknown}"


def _scripts_shown() -> dict[str, set[str]]:
    shown: dict[str, set[str]] = {}
    for path in pages():
        for snippet in _shown_code(path.read_text()):
            for m in re.finditer(r"python\s+((?:benchmarks|scripts)/\w+\.py)([^|;&]*)", _without_quotes(snippet)):
                shown.setdefault(m.group(1), set()).update(_FLAG_RE.findall(m.group(2)))
    return shown


@pytest.mark.parametrize(("script", "flags"), sorted(_scripts_shown().items()))
def test_every_script_a_page_runs_answers_help_with_the_options_shown(
        script: str, flags: set[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import runpy
    import sys

    # run as `python SCRIPT --help` would, in this process: a fresh interpreter for each script cost seconds of
    # imports this process has already paid; argv, sys.path and the working directory are put back afterwards
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    monkeypatch.setattr(sys, "path", [str((ROOT / script).parent), str(ROOT), *sys.path])
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(ROOT / script), run_name="__main__")
    shown = capsys.readouterr()
    assert exited.value.code in (0, None) and shown.out.startswith("usage:"), shown.out[-2000:] + shown.err[-2000:]
    assert not [f for f in flags if f not in _FLAG_RE.findall(shown.out)], (script, flags, shown.out)
