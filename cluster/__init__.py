"""Cluster mode: run a sweep on Ray with the same sweep file and the same output.

``cluster`` wraps ``runner`` and never the other way round: the driver runs inside the
same session as a single-node run (``runner.execution.session.Session``), streams the
grid in chunks to worker actors that each run ``runner.execution.engine.run_trials`` with a
``runner.execution.trial.TrialRunner``, and writes the Arrow record batches they return
through ``runner.output.sink.TrialSink``. Rate limits and remedies are shared through two
small actors behind runner's ``Limiter`` and ``RemedyBook`` interfaces.

Ray is an extra (``pip install 'trialgrid[ray]'``) and is imported lazily (inside
functions), as are the names below: importing ``cluster`` — as the CLI does to discover
its commands — costs nothing until a Ray command runs. What a Ray session records in the
manifest is cluster mode's own (``cluster.records``, in the session's extension slot), and
so are its options (``cluster.options``, from ``RunOptions.backend_options``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cluster.driver import run_on_ray
    from cluster.options import RayOptions
    from cluster.records import RaySessionRecord, WatchRecord, WorkerWatch, ray_record

#: public name -> "module:attribute"
_EXPORTS: dict[str, str] = {
    "run_on_ray": "cluster.driver:run_on_ray",
    "RayOptions": "cluster.options:RayOptions",
    "RaySessionRecord": "cluster.records:RaySessionRecord",
    "WatchRecord": "cluster.records:WatchRecord",
    "WorkerWatch": "cluster.records:WorkerWatch",
    "ray_record": "cluster.records:ray_record",
}

__all__ = ["RayOptions", "RaySessionRecord", "WatchRecord", "WorkerWatch", "ray_record", "run_on_ray"]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
