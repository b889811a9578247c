"""One message channel (``runner.core.messages``): progress lines and notes are log records of ``trialgrid``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import runner
from runner.core.messages import is_note, logger, note, say
from tests.helpers.files import quickstart_sweep
from tests.helpers.messages import heard


def test_progress_and_notes_are_records_of_one_logger() -> None:
    with heard() as everything, heard(notes=True) as notes:
        say("resuming: 3 of 9 trials already written")
        note("remedy learned")
    assert everything == ["resuming: 3 of 9 trials already written", "remedy learned"]
    assert notes == ["remedy learned"]


def test_a_library_caller_hears_a_resume_through_logging(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sweep = quickstart_sweep(tmp_path, runs=1)
    runner.run(sweep, tmp_path / "out", quiet=True)
    with caplog.at_level(logging.INFO, logger="trialgrid"):
        again = runner.run(sweep, tmp_path / "out", quiet=True)
    assert again.stats.done == 0
    said = [r for r in caplog.records if r.name == "trialgrid"]
    assert any(r.getMessage().startswith("resuming: ") and not is_note(r) for r in said), said


class _Raises(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise ValueError("a handler that breaks")


def test_a_handler_that_raises_costs_no_trial(tmp_path: Path) -> None:
    broken = _Raises()
    logging.getLogger().addHandler(broken)
    before = logger.level
    logger.setLevel(logging.INFO)
    try:
        result = runner.run(quickstart_sweep(tmp_path, runs=1), tmp_path / "out", quiet=True)
        runner.run(quickstart_sweep(tmp_path, runs=1), tmp_path / "out", quiet=True)  # a resume says so
    finally:
        logging.getLogger().removeHandler(broken)
        logger.setLevel(before)
    assert result.counts == {"ok": result.total} and result.exit_code == 0


def test_the_cli_prints_progress_lines_and_quiet_drops_them(tmp_path: Path) -> None:
    from tests.helpers.cli import invoke

    sweep = quickstart_sweep(tmp_path, runs=1)
    assert invoke("run", str(sweep), "--out", str(tmp_path / "out"), "--no-report").exit_code == 0
    again = invoke("run", str(sweep), "--out", str(tmp_path / "out"), "--no-report")
    assert "resuming: " in again.stderr
    quiet = invoke("run", str(sweep), "--out", str(tmp_path / "out"), "-q")
    assert "resuming: " not in quiet.stderr
