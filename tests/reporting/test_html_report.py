"""`report --html`: one self-contained page that headless Chromium renders, every section, no console errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import runner
from runner.analysis.leaderboard import summarize
from runner.config.sweep import load_sweep
from runner.reporting.html import render_html
from tests.conftest import CONFIGS, quickstart_dict

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def outs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Quickstart (contrasts) plus the bundled phantom sweep (field scores) and negatives (no contrasts)."""
    tmp = tmp_path_factory.mktemp("html")
    data = quickstart_dict()
    data["probes"][0]["runs"] = 3
    sweeps = [data]
    for name in ("phantom.yaml", "negatives.yaml", "propagation.yaml"):
        path = CONFIGS / name
        if path.exists():
            extra = yaml.safe_load(path.read_text())
            for p in extra["probes"]:
                p["runs"] = 2
                for key in ("cases", "catalogue", "traces"):
                    if isinstance(p.get(key), str):
                        p[key] = str(CONFIGS / p[key])
                if isinstance(p.get("tasks"), list):
                    p["tasks"] = [str(CONFIGS / t) for t in p["tasks"]]
            sweeps.append(extra)
    result = []
    for sweep in sweeps:
        path = tmp / f"{sweep['name']}.yaml"
        path.write_text(yaml.safe_dump(sweep))
        runner.run(load_sweep(path), tmp / sweep["name"], quiet=True)
        result.append(tmp / sweep["name"])
    return result


def expected_sections(html: str) -> list[str]:
    return re.findall(r'<section data-section="([a-z]+)"', html)


def test_page_is_self_contained_and_data_driven(outs: list[Path]) -> None:
    html = render_html(summarize(outs))
    # nothing loads from anywhere: no external URL in any src/href, a CSP that forbids it
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "default-src 'none'" in html
    sections = expected_sections(html)
    for kind in ("runs", "leaderboard", "rates", "heatmap", "forest", "details", "cost", "methods"):
        assert kind in sections
    assert sections.count("forest") == 2  # misselection and propagation declare contrasts; negative, phantom do not
    if any("phantom" in o.name for o in outs):
        assert "fields" in sections  # phantom's fields view
        assert "field-level scores, auditor vs containment baseline" in html and "auditor errors" in html
    assert sections.count("stages") == 1  # only propagation returns a stages view: elsewhere skipped, not empty
    assert "examples" in sections and "settings" in sections and "outcomes" in sections
    assert "view" in sections


def test_stage_funnel_appears_when_the_column_exists(outs: list[Path]) -> None:
    import polars as pl

    from runner.probes.propagation.report import stage_table

    frame = pl.DataFrame({"probe": ["p"] * 4, "status": ["ok"] * 4, "model": ["m"] * 4, "condition": ["c"] * 4,
                          "stage_reached": pl.Series([0, 1, 2, 3], dtype=pl.Int8)}).lazy()
    table = stage_table(frame, "p")
    assert table["stage"].to_list() == ["S1", "S2", "S3"] and table["reached"].to_list() == [3, 2, 1]


@pytest.mark.browser
def test_chromium_renders_every_section_without_console_errors(outs: list[Path], tmp_path: Path) -> None:
    exe = chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    page = tmp_path / "report.html"
    html = render_html(summarize(outs))
    page.write_text(html)
    proc = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    n_sections = len(expected_sections(html))
    n_plots = html.count('class="tg-plot"')
    # the page's script ran after layout and found every section and every plot drawn with a non-empty box
    rendered = re.search(r'data-rendered="(\d+) sections, (\d+)/(\d+) plots"', dom)
    assert rendered, dom[:500]
    assert int(rendered.group(1)) == n_sections and int(rendered.group(2)) == int(rendered.group(3)) == n_plots
    assert 'data-errors=""' in dom
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []


@pytest.mark.browser
@pytest.mark.parametrize("width", [800, 1400])
def test_no_table_is_wider_than_its_container_and_no_svg_text_leaves_its_plot(outs: list[Path], tmp_path: Path,
                                                                              width: int) -> None:
    """Read from the DOM after layout (the page's script writes body[data-overflow]), at a narrow and a wide window."""
    exe = chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    page = tmp_path / "report.html"
    page.write_text(render_html(summarize(outs)))
    proc = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           f"--window-size={width},2000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    overflow = re.search(r'data-overflow="([^"]*)"', proc.stdout)
    assert overflow is not None, proc.stdout[:500]
    assert overflow.group(1) == "0", overflow.group(1)


def test_examples_appear_for_every_probe_kind_and_are_reproducible(outs: list[Path]) -> None:
    summary = summarize(outs)
    html = render_html(summary)
    kinds = {kind for _, kind in summary.probe_keys()}
    assert {"misselection", "negative", "phantom", "propagation"} <= kinds
    for probe, _ in summary.probe_keys():
        assert f'id="examples-{probe}"' in html, probe
    for kind in ("misselection", "negative", "propagation"):  # the request, from the recorded calls
        section = html.split(f'id="examples-{kind}"', 1)[1].split("</section>", 1)[0]
        assert re.search(r"<b>request</b><pre>(?!\(not recorded)", section), kind
    strip = lambda h: re.sub(r"generated [^<]* by", "", h)  # noqa: E731
    assert strip(render_html(summarize(outs))) == strip(html)  # a seeded sample: the same page twice
