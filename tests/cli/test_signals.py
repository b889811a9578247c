"""SIGTERM stops a run as Ctrl-C does, also when the shell that started it ignores SIGINT."""

from __future__ import annotations

import os
import signal

import pytest

from runner.cli.signals import sigterm_as_interrupt


@pytest.mark.parametrize("sigint", [signal.default_int_handler, signal.SIG_IGN], ids=["foreground", "background"])
def test_sigterm_interrupts_the_block_and_the_handlers_are_restored(sigint: object) -> None:
    # `trialgrid run ... &` in a script starts with SIGINT ignored: a SIGTERM turned into SIGINT was swallowed
    before_int = signal.signal(signal.SIGINT, sigint)  # type: ignore[arg-type]
    before_term = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt() as seen:
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen.received
        assert signal.getsignal(signal.SIGINT) is sigint and signal.getsignal(signal.SIGTERM) is before_term
    finally:
        signal.signal(signal.SIGINT, before_int)
