"""The ``propagation`` probe: does an injected parameter error reach the final answer?

``probe.py`` holds the probe (conditions, scoring); ``agenttasks.py`` its task files, ``agentloop.py``
the multi-step tool loop, ``toolsim/`` the deterministic domain simulators, ``injection.py`` the
parameter errors, ``interceptor.py`` the interceptor condition, ``fabrication.py`` claimed results,
``trace.py`` and ``stages.py`` how far an error travelled, ``report.py`` the stage-reach views.
"""

from runner.probes.propagation.probe import (
    PropagationConfig,
    PropagationProbe,
    score,
)

__all__ = ["PropagationConfig", "PropagationProbe", "score"]
