"""The README is the user's contract: its tables must match the code."""

from __future__ import annotations

import re

from runner.core.schema import COMMON_FIELDS
from runner.probes.misselection import MisselectionProbe
from runner.sim import PERSONAS
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def _table_after(heading: str) -> list[list[str]]:
    """Rows of the first markdown table at or after ``heading`` (header and separator dropped)."""
    section = heading + README.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # skip header and separator


def test_output_schema_tables_list_every_column_in_order() -> None:
    common = [r[0].strip("`") for r in _table_after("Common columns (every probe):")]
    assert common == [f.name for f in COMMON_FIELDS]
    outcome = [r[0].strip("`") for r in _table_after("`misselection` outcome columns:")]
    assert outcome == [f.name for f in MisselectionProbe.outcome_fields]


def test_persona_table_matches_personas() -> None:
    rows = {r[0].strip("`"): r for r in _table_after("| persona |")}
    assert set(rows) == set(PERSONAS)
    for name, p in PERSONAS.items():
        row = rows[name]
        pct = lambda cell: [float(x) / 100 for x in re.findall(r"(\d+(?:\.\d+)?)%", cell)]  # noqa: E731
        assert pct(row[1]) == [p.reach_wide[s] for s in ("known", "unfamiliar", "unnamed")]
        assert pct(row[2]) == [p.ask[s] for s in ("known", "unfamiliar", "unnamed")]
        assert pct(row[3]) == [p.invent]
        assert float(row[4]) == p.sigma


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    install_run, install_test = blocks[0].strip(), blocks[1].strip()
    assert install_run.startswith("pip install -e .") and "trialgrid run configs/quickstart.yaml" in install_run
    assert install_test in (ROOT / ".ci" / "run").read_text()
