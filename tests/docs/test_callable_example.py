"""The complete example agent of docs/providers.md runs as the page shows it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.docs.docpages import page, section
from tests.helpers.cli import invoke
from tests.helpers.files import CONFIGS, write_yaml
from tests.helpers.rows import written_rows


def test_the_example_agent_and_its_sweep_run_from_the_sweeps_folder(tmp_path: Path) -> None:
    text = section(page("providers.md"), "## Your own agent: `provider: callable`")
    agent = re.search(r"```python\n(.*?)```", text, re.S)
    sweep = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert agent is not None and sweep is not None
    (tmp_path / "agent.py").write_text(agent.group(1))
    data = yaml.safe_load(sweep.group(1))
    data["probes"][0].update(cases=str(CONFIGS / "negative/cases.yaml"), catalogue=str(CONFIGS / "negative/tools.json"),
                             runs=1)
    path = write_yaml(tmp_path / "sweep.yaml", data)
    result = invoke("run", str(path), "--out", str(tmp_path / "out"), "-q")
    assert result.exit_code == 0, result.output
    rows = written_rows(tmp_path / "out")
    # the agent ran as written: it asked where no id was given, and called a tool with the one it found
    assert (rows["status"] == "ok").all()
    assert rows.filter(rows["case_id"] == "track-no-number")["action"].to_list() == ["ask_user"]
    assert rows["action"].str.starts_with("call:").any()
