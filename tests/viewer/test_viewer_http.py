"""The viewer's server over plain HTTP: nothing outside the outputs given is reachable, bad queries are 400s,
and viewing writes nothing into an output."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from runner.output import Output


@pytest.fixture(scope="module")
def base(quick_out: Path, serve: Any) -> Iterator[tuple[str, int]]:
    with serve([quick_out]) as url:
        parts = urlsplit(url)
        yield str(parts.hostname), int(parts.port or 0)


def get(base: tuple[str, int], path: str) -> tuple[int, bytes, dict[str, str]]:
    """``path`` sent exactly as written (no client-side normalisation of ``..`` or escapes)."""
    conn = http.client.HTTPConnection(*base, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        conn.close()


def _tree(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


@pytest.mark.parametrize("path", [
    "/../../../../etc/passwd", "/static/../server.py", "/static/..%2fserver.py", "/static/%2e%2e/data.py",
    "/static/data.py", "/static/", "/manifest.json", "/trials/", "/api/runs/1", "/api/runs/-1", "/api/runs/0x0",
    "/api/runs/0/../../manifest.json", "/api/runs/0/trials/nope", "//etc/passwd", "/api/runs/0/manifest.json",
    "/static/app.js/../../__init__.py", "/%2e%2e/%2e%2e/etc/passwd",
    "/api/runs/%C2%B2", "/api/runs/%D9%A0", "/api/runs/%C2%B2/trials",  # digits int() refuses, or reads as 0
])
def test_a_path_outside_the_outputs_is_404(base: tuple[str, int], path: str, quick_out: Path) -> None:
    status, body, _ = get(base, path)
    assert status == 404, (path, status, body[:200])
    assert b"root:" not in body and b"sweep_id" not in body


def test_the_page_and_its_files_are_served_with_a_strict_policy(base: tuple[str, int]) -> None:
    for path, kind in (("/", "text/html"), ("/static/app.js", "text/javascript"), ("/static/app.css", "text/css")):
        status, body, headers = get(base, path)
        assert status == 200 and headers["Content-Type"].startswith(kind) and body
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
    _, page, _ = get(base, "/")
    assert b"http" not in page.replace(b"http-equiv", b"")  # no URL of anywhere else: no CDN


def test_a_bad_filter_is_a_400_that_says_what_was_wrong(base: tuple[str, int]) -> None:
    for query, says in (("f.nope=1", "no column 'nope'"), ("f.decoy_called=maybe", "expected true or false"),
                        ("f.run=x", "whole number"), ("limit=100000", "limit"), ("sort=calls", "cannot sort")):
        status, body, _ = get(base, "/api/runs/0/trials?" + query)
        assert status == 400 and says in json.loads(body)["error"], (query, body)


def test_pages_are_cut_from_the_scan_and_add_up_to_every_trial(base: tuple[str, int], quick_out: Path) -> None:
    ids = Output.open(quick_out).scan().select("trial_id").collect()["trial_id"].to_list()
    seen: list[str] = []
    offset = 0
    while True:
        status, body, _ = get(base, f"/api/runs/0/trials?limit=7&offset={offset}&sort=trial_id")
        page = json.loads(body)
        assert status == 200 and page["total"] == len(ids) and len(page["rows"]) <= 7
        if not page["rows"]:
            break
        seen += [r["trial_id"] for r in page["rows"]]
        offset += 7
    assert seen == sorted(ids)


def test_viewing_writes_nothing_into_the_output(base: tuple[str, int], quick_out: Path) -> None:
    before = _tree(quick_out)
    first = Output.open(quick_out).scan().select("trial_id").head(1).collect().item()
    for path in ("/api/runs", "/api/runs/0", "/api/runs/0/trials?q=a", f"/api/runs/0/trials/{first}?pos=0",
                 "/api/runs/0/rates", "/api/runs/0/compare?probe=misselection&case_id=x&condition=y"):
        status, _, _ = get(base, path)
        assert status == 200, path
    assert _tree(quick_out) == before


def test_the_command_serves_on_loopback_and_says_where(quick_out: Path) -> None:
    import subprocess
    import sys

    from tests.helpers.files import ROOT

    proc = subprocess.Popen([sys.executable, "-m", "runner", "view", str(quick_out), "--port", "0"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("trialgrid view: http://127.0.0.1:"), line
        url = urlsplit(line.split(": ", 1)[1].split(" ", 1)[0])
        status, body, _ = get((str(url.hostname), int(url.port or 0)), "/api/runs")
        assert status == 200 and json.loads(body)["runs"][0]["trials"] == Output.open(quick_out).scan().select(
            "trial_id").collect().height
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr:  # closed here, not by the garbage collector (a ResourceWarning in a later test)
            proc.stderr.close()


def test_a_missing_output_is_one_error_line(tmp_path: Path) -> None:
    from tests.helpers.cli import invoke, invoke_error_line

    assert "not a trialgrid output directory" in invoke_error_line(invoke("view", str(tmp_path / "nowhere")))


#: ``trialgrid view`` whose background warm-up takes a minute (as a 1M-trial output's takes seconds)
_SLOW_WARM = """
import sys, time
import runner.viewer.data as data
data.Source.warm = data.Source.verify = lambda self: time.sleep(60)
from runner.cli import main
sys.argv = ["trialgrid", "view", sys.argv[1], "--port", "0"]
main()
"""


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_the_viewer_during_its_warm_up_with_its_own_line(quick_out: Path,
                                                                                 signum: str) -> None:
    import signal
    import subprocess
    import sys

    from tests.helpers.files import ROOT

    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WARM, str(quick_out)], cwd=ROOT, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = urlsplit(line.split(": ", 1)[1].split(" ", 1)[0])
        status, _, _ = get((str(url.hostname), int(url.port or 0)), "/api/runs/0/trials")
        assert status == 200  # the first page answered: the warm-up has started (and sleeps a minute)
        proc.send_signal(getattr(signal, signum))
        assert proc.wait(timeout=30) == 0  # not after the warm-up's minute
        said = proc.stderr.read()
        assert "trialgrid view: stopped" in said and "rerun" not in said and "Traceback" not in said
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
