"""Honest endings: a budget stop has its own exit code, every report of an unfinished grid says so
above its first table, the scorecard grades no unfinished grid, and `report -q` prints nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli.console import EXIT_BUDGET
from runner.core.manifest import read_manifest
from tests.helpers.cli import invoke
from tests.helpers.files import quickstart_sweep
from tests.helpers.rows import written_rows


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("budget")
    sweep = quickstart_sweep(folder, runs=5, budget={"tokens": 20_000}, engine={"concurrency": 4})
    result = invoke("run", str(sweep), "--out", str(folder / "out"))
    assert result.exit_code == EXIT_BUDGET, result.output
    return folder / "out", result.stdout


def test_a_budget_stop_exits_with_its_code_and_the_report_leads_with_the_counts(stopped: tuple[Path, str]) -> None:
    out, stdout = stopped
    manifest = read_manifest(out)
    assert manifest is not None and manifest.status == "stopped_budget"
    done, total = written_rows(out).height, manifest.trials_total
    assert 0 < done < total
    lines = stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("incomplete:"))
    assert lines[first].startswith(f"incomplete: {done:,} of {total:,} trials written")
    table = next(i for i, line in enumerate(lines) if "leaderboard" in line)  # the first table's title
    assert first < table  # above the first table


def test_every_report_of_it_says_incomplete_and_grades_no_scorecard(stopped: tuple[Path, str], tmp_path: Path) -> None:
    import json

    out, _ = stopped
    done, total = written_rows(out).height, read_manifest(out).trials_total  # type: ignore[union-attr]
    result = invoke("report", str(out), "--html", str(tmp_path / "r.html"), "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith(f"incomplete: {done:,} of {total:,}")
    html = (tmp_path / "r.html").read_text()
    assert html.index(f"incomplete: {done:,} of {total:,}") < html.index("<table")
    card = [r for p in json.loads((tmp_path / "r.json").read_text())["probes"] for r in p["scorecard"]]
    assert card and all(r["verdict"] == "inconclusive" and "the grid is incomplete" in r["reason"] for r in card)


def test_report_quiet_prints_nothing(stopped: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = stopped
    result = invoke("report", str(out), "-q", "--html", str(tmp_path / "r.html"), "--csv", str(tmp_path / "csv"))
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == "", result.output
    assert (tmp_path / "r.html").exists()


def test_a_run_that_is_all_errors_leads_with_why_and_prints_no_tables(tmp_path: Path) -> None:
    from tests.helpers.files import quickstart_dict, write_yaml

    data = quickstart_dict()
    data["probes"][0]["runs"] = 1
    data["models"] = [{"name": "broken", "provider": "callable", "function": "tests.providers.callable_agents:explodes"}]
    result = invoke("run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(tmp_path / "out"))
    assert result.exit_code == 3, result.output
    assert result.stdout == ""  # no table of dashes
    lines = [x for x in result.stderr.splitlines() if not x.startswith("warning:")]
    top = next(i for i, x in enumerate(lines) if x.startswith("every trial of this run ended as an error row"))
    assert lines[top + 1].startswith("model broken: all ") and "the user's agent broke" in lines[top + 1]


def test_a_lost_server_is_said_first_and_one_never_reached_too(tmp_path: Path) -> None:
    """A model whose server died (here: one that resets about half its connections, and one at a port
    nothing listens on) leads the report with one line each, counted from the rows, above the first table."""
    import socket

    import polars as pl

    from runner.core.errors import CONNECTION_FAILED
    from tests.helpers.files import quickstart_dict, write_yaml
    from tests.helpers.serving import serving

    with socket.socket() as s:  # a port that was free a moment ago: nothing answers there
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    data = quickstart_dict()
    data["probes"] = data["probes"][:1]
    data["probes"][0]["runs"] = 2
    with serving(faults={"reset": 0.5}, fault_seed=11) as server:
        common = {"provider": "openai", "api_key_env": None, "retry": {"max_attempts": 1}}
        data["models"] = [{"name": "flaky", "model": "typical", "base_url": server.base_url, **common},
                          {"name": "gone", "model": "typical", "base_url": f"http://127.0.0.1:{closed}/v1", **common}]
        result = invoke("run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(tmp_path / "out"),
                        "--no-preflight")
    assert result.exit_code == 3, result.output
    rows = written_rows(tmp_path / "out")
    lost = rows.filter(pl.col("error").str.starts_with(CONNECTION_FAILED).fill_null(False))
    per_model = dict(lost.group_by("model").len().iter_rows())
    trials = dict(rows.group_by("model").len().iter_rows())
    assert 0 < per_model["flaky"] < trials["flaky"] and per_model["gone"] == trials["gone"]
    lines = result.stdout.splitlines()
    table = next(i for i, line in enumerate(lines) if "leaderboard" in line)
    top = lines[:table]
    assert top[0] == (f"server lost: model flaky could not reach its server in {per_model['flaky']:,} of "
                       f"{trials['flaky']:,} trials — its rates cover the other {trials['flaky'] - per_model['flaky']:,}; "
                       "restart the server, then run the sweep again with --retry-errors")
    assert top[1].startswith(f"server unreachable: model gone reached no server in any of its {trials['gone']:,} trials")


def test_a_run_with_error_rows_lists_them_before_the_first_table(tmp_path: Path) -> None:
    from tests.helpers.files import quickstart_dict, write_yaml

    data = quickstart_dict()
    data["probes"][0]["runs"] = 1
    data["models"] = [{"name": "sim", "provider": "sim", "model": "typical"},
                      {"name": "broken", "provider": "callable", "function": "tests.providers.callable_agents:explodes"}]
    result = invoke("run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(tmp_path / "out"))
    assert result.exit_code == 3, result.output
    lines = result.output.splitlines()  # as a terminal shows them: stdout and stderr in the order written
    errors = next(i for i, x in enumerate(lines) if "ended as error rows" in x)
    first_table = next(i for i, x in enumerate(lines) if "leaderboard" in x)
    assert errors < first_table, lines[:first_table + 1]


def test_empty_replies_the_server_billed_tokens_for_are_a_server_finding_said_first(tmp_path: Path) -> None:
    """The llama.cpp server's chatml-function-calling answered 6 output tokens and no text, no call: the model wrote
    something its tool-call parser dropped. A loopback server answering like that (every reply empty, 6 tokens)
    makes the report open with a server finding, and the replies view count them."""
    import asyncio
    import threading

    from aiohttp import web

    from runner.analysis.leaderboard import summarize
    from runner.output import Output
    from tests.helpers.files import quickstart_dict, write_yaml

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({
            "id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app_runner = web.AppRunner(app)
    loop.run_until_complete(app_runner.setup())
    site = web.TCPSite(app_runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        data = quickstart_dict()
        data["probes"] = data["probes"][:1]
        data["probes"][0]["runs"] = 1
        data["models"] = [{"name": "local", "provider": "openai", "model": "m", "api_key_env": None,
                           "base_url": f"http://127.0.0.1:{port}/v1"}]
        result = invoke("run", str(write_yaml(tmp_path / "s.yaml", data)), "--out", str(tmp_path / "out"))
    finally:
        asyncio.run_coroutine_threadsafe(app_runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
    assert result.exit_code == 0, result.output
    trials = written_rows(tmp_path / "out").height
    lines = result.stdout.splitlines()
    table = next(i for i, line in enumerate(lines) if "leaderboard" in line)
    probe = data["probes"][0].get("name", data["probes"][0]["kind"])
    assert lines[0].startswith(f"server finding: model local: {trials:,} of its {trials:,} empty replies in {probe} "
                               "came with output tokens") and 0 < table
    view = next(v for v in summarize([Output.open(tmp_path / "out")]).runs[0].views[probe] if v.key == "replies")
    assert int(view.table["empty_with_tokens"].sum()) == int(view.table["empty_reply"].sum()) == trials
