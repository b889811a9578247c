"""The ``negative`` probe: a hole in the input must not be papered over.

``probe.py`` holds the probe (cases, conditions, scoring); BFCL's own rules, used to score imported BFCL
cases a second way, are ``bfcl_checker.py`` (the checker), ``bfcl_scores.py`` (its verdict as columns) and
``bfcl_source.py`` (where an imported case came from).
"""

from runner.probes.negative.probe import (
    NegativeCase,
    NegativeConfig,
    NegativeProbe,
    case_messages,
    load_cases,
    score_response,
)

__all__ = ["NegativeCase", "NegativeConfig", "NegativeProbe", "case_messages", "load_cases", "score_response"]
