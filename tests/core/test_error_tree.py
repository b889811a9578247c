"""One root exception: everything trialgrid raises to a caller is a ``TrialgridError``; control flow is not."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import runner
from runner.core.errors import TrialgridError, UserError
from runner.execution.backends.batch.capture import Captured
from runner.execution.replay import ReplayExhausted
from runner.probes.propagation.toolsim import ToolFailure
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim.serve.codecs import BadRequest
from tests.conftest import quickstart_dict


def test_caller_facing_errors_share_the_root() -> None:
    for error in (UserError, ProviderError, ReplayExhausted):
        assert issubclass(error, TrialgridError) and issubclass(error, Exception)
    assert isinstance(ProviderError(ErrorKind.FATAL, "no"), TrialgridError)
    assert str(UserError("bad", file="s.yaml", line=3)) == "s.yaml:3: bad"


def test_workers_exhausted_is_one_line_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster.scheduler import WorkersExhausted
    from runner.cli.app import app
    from runner.execution import modes

    assert issubclass(WorkersExhausted, TrialgridError)

    def exhausted(*args: object, **kw: object) -> None:
        raise WorkersExhausted("worker 3 lost (ActorDiedError); no replacements left after 4 lost workers")

    monkeypatch.setattr(modes, "run", exhausted)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(quickstart_dict()))
    result = CliRunner().invoke(app, ["run", str(sweep), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["error: worker 3 lost (ActorDiedError); no replacements left after 4 lost "
                                          "workers"]
    assert "Traceback" not in result.output


def test_the_tree_in_the_docstring_names_every_error() -> None:
    from runner.core import errors

    for name in ("TrialgridError", "UserError", "ProviderError", "ErrorKind", "Remedy", "ReplayExhausted",
                 "WorkersExhausted", "TrialgridWarning"):
        assert name in (errors.__doc__ or ""), name
    assert (ErrorKind, ProviderError) == (errors.ErrorKind, errors.ProviderError)  # one definition, re-exported


def test_internal_control_flow_is_outside_the_root() -> None:
    # Captured must escape a probe's `except Exception`: a BaseException, never a TrialgridError
    assert issubclass(Captured, BaseException) and not issubclass(Captured, Exception)
    for internal in (Captured, BadRequest, ToolFailure):
        assert not issubclass(internal, TrialgridError)


def test_the_root_and_its_branches_are_exported() -> None:
    assert (runner.TrialgridError, runner.UserError, runner.ProviderError, runner.ErrorKind) == \
        (TrialgridError, UserError, ProviderError, ErrorKind)
    assert {"TrialgridError", "UserError", "ProviderError", "ErrorKind", "run", "RunOptions"} <= set(runner.__all__)
