"""Cluster mode: run a sweep on Ray with the same sweep file and the same output.

``cluster`` wraps ``runner`` and never the other way round: the driver runs inside the
same session as a single-node run (``runner.execution.session.Session``), streams the
grid in chunks to worker actors that each run ``runner.execution.engine.run_trials`` with a
``runner.execution.trial.TrialRunner``, and writes the Arrow record batches they return
through ``runner.output.sink.TrialSink``. Rate limits and remedies are shared through two
small actors behind runner's ``Limiter`` and ``RemedyBook`` interfaces.

Ray itself is imported lazily (inside functions), so importing ``cluster`` — as the
CLI does to discover its commands — costs nothing until a Ray command runs.
"""

from __future__ import annotations

__all__ = ["run_on_ray"]


def __getattr__(name: str):
    if name == "run_on_ray":
        from cluster.driver import run_on_ray

        return run_on_ray
    raise AttributeError(name)
