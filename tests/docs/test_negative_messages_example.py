"""The `messages:` form of a negative case, as docs/probes.md shows it, loads and lints clean."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from runner.config.sweep import load_sweep
from tests.docs.docpages import page, section
from tests.helpers.files import CONFIGS, write_yaml


def test_the_messages_example_is_a_case_the_probe_loads(tmp_path: Path) -> None:
    text = section(page("probes.md"), "## The `negative` probe")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "messages:" in b)
    write_yaml(tmp_path / "cases.yaml", yaml.safe_load(block))
    loaded = load_sweep(write_yaml(tmp_path / "sweep.yaml", {
        "name": "m", "models": [{"name": "a", "provider": "sim", "model": "careful"}],
        "probes": [{"kind": "negative", "cases": "cases.yaml", "catalogue": str(CONFIGS / "negative/tools.json")}]}))
    (probe,) = loaded.probes
    case = probe.case("refund-asked-twice")  # type: ignore[attr-defined]
    assert case.messages is not None and [m.role for m in case.messages] == ["user", "assistant", "user"]
