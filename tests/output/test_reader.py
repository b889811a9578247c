"""The public reader: ``Output.open`` reads an output's manifest and part footers once; ``scan``, ``counts`` and
``spend`` follow the rules every reader follows (own readable parts, each trial once, the newest row)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from runner.config.cost import ModelPrice
from runner.core.errors import UserError
from runner.core.manifest import MANIFEST, read_manifest
from runner.output import Output, spent_in
from runner.output.parts import SWEEP_ID_KEY
from runner.output.sink import TrialSink

STOCK_MANIFEST = Path(__file__).resolve().parents[1] / "core" / "fixtures" / "manifest-run.json"
SCHEMA = pa.schema([("trial_id", pa.string()), ("probe", pa.string()), ("model", pa.string()),
                    ("case_id", pa.string()), ("condition", pa.string()), ("run", pa.int32()),
                    ("status", pa.string()), ("error_kind", pa.string()),
                    ("finished_at", pa.timestamp("us", tz="UTC")),
                    ("input_tokens", pa.int64()), ("output_tokens", pa.int64())])
T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
PRICES = {"m": ModelPrice(input=1_000_000.0, output=2_000_000.0)}  # $1 an input token, $2 an output token


def row(trial: str, status: str, tokens: tuple[int, int], minute: int) -> dict[str, Any]:
    return {"trial_id": trial, "probe": "p", "model": "m", "case_id": trial, "condition": "c", "run": 0,
            "status": status, "error_kind": "transient" if status == "error" else None,
            "finished_at": T0 + dt.timedelta(minutes=minute), "input_tokens": tokens[0], "output_tokens": tokens[1]}


def output_dir(tmp_path: Path, *sessions: list[dict[str, Any]], schema: pa.Schema = SCHEMA) -> Path:
    """An output whose sessions each wrote one part (a stock manifest: the reader needs one)."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    shutil.copyfile(STOCK_MANIFEST, out / MANIFEST)
    for i, rows in enumerate(sessions):
        with TrialSink(out, schema, worker=f"s{i}") as sink:
            for r in rows:
                sink.append(r)
    return out


def test_spend_after_retry_errors_counts_each_trial_once_its_newest_row(tmp_path: Path) -> None:
    # first run: t1 ends as a transient error after its calls used tokens; --retry-errors writes t1 again
    out = output_dir(tmp_path, [row("t1", "error", (100, 50), 0), row("t2", "ok", (10, 1), 0)],
                     [row("t1", "ok", (20, 2), 5)])
    output = Output.open(out)
    assert output.counts() == {"ok": 2}
    spend = output.spend(PRICES)
    assert (spend.usd, spend.tokens) == (20 + 2 * 2 + 10 + 2 * 1, 33)
    # the resume's budget reads the same way (it used to glob the parts and pay t1 twice: $236, 183 tokens)
    assert spent_in(out / "trials", PRICES) == (spend.usd, spend.tokens)
    assert output.usage(PRICES).row(0, named=True)["cost_usd"] == spend.usd  # what the report shows


def test_open_reads_the_manifest_and_parts_once_and_scan_is_each_trial_once(tmp_path: Path) -> None:
    out = output_dir(tmp_path, [row("t1", "error", (1, 0), 0)], [row("t1", "ok", (1, 0), 1), row("t2", "ok", (1, 0), 1)])
    output = Output.open(out)
    assert output.path == out and output.manifest == read_manifest(out)
    assert [p.name for p in output.parts] == ["part-s0-00000.arrow", "part-s1-00000.arrow"] and not output.issues
    frame = output.scan().collect().sort("trial_id")
    assert frame["trial_id"].to_list() == ["t1", "t2"] and frame["status"].to_list() == ["ok", "ok"]
    assert output.scan() is output.scan()  # one lazy plan per opened output


def test_reader_errors_are_one_line_where_the_reading_happens(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such directory"):
        Output.open(tmp_path / "missing")
    out = output_dir(tmp_path)
    with pytest.raises(UserError, match="no finished trial files"):
        Output.open(out).scan()
    assert Output.open(out).counts() == {} and Output.open(out).spend(PRICES).tokens == 0
    foreign = SCHEMA.with_metadata({SWEEP_ID_KEY: b"another-sweep"})
    output_dir(tmp_path, [row("t1", "ok", (1, 0), 0)], schema=foreign)
    with pytest.raises(UserError, match=r"foreign trial part .*belongs to sweep 'another-sweep'"):
        Output.open(out)
    relaxed = Output.open(out, strict=False)  # a writer holding the lock counts without the foreign part
    assert relaxed.parts == () and [i.problem for i in relaxed.issues] == ["foreign"]
    (out / "trials" / "part-s0-00000.arrow").unlink()
    (out / "trials" / "part-x-00000.arrow").write_bytes(b"ARROW1\x00\x00cut short")
    with pytest.raises(UserError, match="damaged trial part"):
        Output.open(out)
