"""`trialgrid report --badge DIR`: one valid, self-contained SVG per model, rendered by a real browser."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.reporting.badges import COLORS, badge_svg, verdict_badge
from tests.conftest import CONFIGS, quickstart_dict
from tests.reporting.test_html_report import CHROMIUM_FLAGS, chromium

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("badges")
    data = quickstart_dict()
    data["probes"][0]["runs"] = 5
    (tmp / "s.yaml").write_text(yaml.safe_dump(data))
    runner.run(load_sweep(tmp / "s.yaml"), tmp / "out", quiet=True)
    return tmp / "out"


def test_report_writes_one_valid_badge_per_model(out: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", str(out), "-q", "--badge", str(tmp_path / "badges")])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in (tmp_path / "badges").iterdir())
    assert files == ["sim-careful.svg", "sim-reckless.svg", "sim-typical.svg"]
    for name in files:
        text = (tmp_path / "badges" / name).read_text()
        root = ET.fromstring(text)
        assert root.tag == f"{SVG}svg"
        assert int(root.get("width")) > 0 and root.get("height") == "20"
        assert root.find(f"{SVG}title").text.startswith(name[:-4] + ": misselection ")
        assert not re.search(r"(href|src)=\"(https?:)?//", text)  # nothing loads from anywhere
        message = [t.text for t in root.iter(f"{SVG}text")][1]
        assert message.split(" · ")[0] in COLORS


def test_badge_for_a_run_without_misselection_is_a_clear_error(tmp_path: Path) -> None:
    data = yaml.safe_load((CONFIGS / "negatives.yaml").read_text())
    for probe in data["probes"]:
        probe["runs"] = 1
        for key in ("cases", "catalogue"):
            probe[key] = str(CONFIGS / probe[key])
    data["models"] = data["models"][:1]
    (tmp_path / "n.yaml").write_text(yaml.safe_dump(data))
    runner.run(load_sweep(tmp_path / "n.yaml"), tmp_path / "out", quiet=True)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "out"), "-q", "--badge", str(tmp_path / "b")])
    assert result.exit_code == 2
    assert "no misselection probe" in " ".join(result.output.split())


@pytest.mark.parametrize("verdict", list(COLORS))
def test_every_verdict_badge_parses_and_escapes(verdict: str) -> None:
    svg = verdict_badge("a<b>&'model\"", verdict, 0.5 if verdict != "inconclusive" else None, "why <&>")
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}title").text == f"a<b>&'model\": misselection {verdict} — why <&>"


@pytest.mark.browser
def test_chromium_renders_the_badges_at_their_declared_size(out: Path, tmp_path: Path) -> None:
    exe = chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    CliRunner().invoke(app, ["report", str(out), "-q", "--badge", str(tmp_path / "badges")])
    badges = sorted((tmp_path / "badges").iterdir()) + [None]
    imgs = []
    for path in badges:  # the last is deliberately broken, to show a bad SVG would be caught
        text = path.read_text() if path else badge_svg("x", "y", "#000", "t").replace("</svg>", "")
        uri = "data:image/svg+xml;base64," + base64.b64encode(text.encode()).decode()
        imgs.append(f'<img src="{uri}">')
    page = tmp_path / "page.html"
    page.write_text("<!DOCTYPE html><html><body>" + "".join(imgs) + "<script>window.addEventListener('load',"
                    "function(){document.body.setAttribute('data-sizes',Array.prototype.map.call("
                    "document.images,function(i){return i.naturalWidth+'x'+i.naturalHeight}).join(' '))})"
                    "</script></body></html>")
    proc = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sizes = re.search(r'data-sizes="([^"]*)"', proc.stdout).group(1).split()
    declared = [f"{ET.fromstring(p.read_text()).get('width')}x20" for p in badges[:-1]]
    assert sizes[:-1] == declared
    assert sizes[-1] == "0x0"  # the broken one does not render
