"""The ``judge`` probe: how far do automated correctness judges agree with people?

``probe.py`` holds the probe (cases, verdict parsing, the heuristic judge); ``report.py`` its agreement views.
"""

from runner.probes.judge.probe import (
    JudgeConfig,
    JudgeProbe,
    heuristic_verdict,
    parse_verdict,
)

__all__ = ["JudgeConfig", "JudgeProbe", "heuristic_verdict", "parse_verdict"]
