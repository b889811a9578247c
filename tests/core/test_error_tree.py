"""One root exception: everything trialgrid raises to a caller is a ``TrialgridError``; control flow is not."""

from __future__ import annotations

import runner
from runner.core.errors import TrialgridError, UserError
from runner.execution.backends.batch.capture import Captured
from runner.execution.replay import ReplayExhausted
from runner.probes.toolsim import ToolFailure
from runner.providers.errors import ErrorKind, ProviderError
from runner.sim.serve.codecs import BadRequest


def test_caller_facing_errors_share_the_root() -> None:
    for error in (UserError, ProviderError, ReplayExhausted):
        assert issubclass(error, TrialgridError) and issubclass(error, Exception)
    assert isinstance(ProviderError(ErrorKind.FATAL, "no"), TrialgridError)
    assert str(UserError("bad", file="s.yaml", line=3)) == "s.yaml:3: bad"


def test_internal_control_flow_is_outside_the_root() -> None:
    # Captured must escape a probe's `except Exception`: a BaseException, never a TrialgridError
    assert issubclass(Captured, BaseException) and not issubclass(Captured, Exception)
    for internal in (Captured, BadRequest, ToolFailure):
        assert not issubclass(internal, TrialgridError)


def test_the_root_and_its_branches_are_exported() -> None:
    assert (runner.TrialgridError, runner.UserError, runner.ProviderError, runner.ErrorKind) == \
        (TrialgridError, UserError, ProviderError, ErrorKind)
    assert {"TrialgridError", "UserError", "ProviderError", "ErrorKind", "run", "run_sweep"} <= set(runner.__all__)
