"""How a run ends, as numbers: the exit codes, and the error kinds a retry re-attempts by default.

Defined here, at the bottom, so the library's verdict (``runner.analysis.verdict.Ending``), the
run modes and the CLI agree on them without importing each other; nothing is imported.
"""

from __future__ import annotations

from typing import Final

#: every trial ok (or within ``max_error_rate``), every gate passed
EXIT_OK: Final = 0
#: a gate failed: ``--fail-on`` (a case of a pass/fail probe) or ``--gate`` / ``gates:`` (an interval bound)
EXIT_GATE: Final = 1
#: bad input: a sweep, a file or an option that cannot work (one ``error:`` line)
EXIT_BAD_INPUT: Final = 2
#: the run finished but error rows remain (beyond ``max_error_rate``)
EXIT_ERRORS: Final = 3
#: the sweep's budget stopped the run before its grid was finished: rerun with a raised budget to continue
EXIT_BUDGET: Final = 4
#: stopped by Ctrl-C (SIGINT) / by SIGTERM: finished trials are kept, rerun to resume
EXIT_INTERRUPTED: Final = 130
EXIT_TERMINATED: Final = 143

#: the error kinds ``--retry-errors`` re-attempts when none are named: the ones a later attempt may pass
DEFAULT_RETRY_KINDS: Final = ("rate_limited", "transient", "timeout")
