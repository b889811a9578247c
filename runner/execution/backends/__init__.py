"""Run backends: the ways a sweep can be executed — ``local``, ``batch``, and plug-ins (``ray``).

A backend is an object with a ``name`` and ``run(loaded, out, options, plan) -> RunResult``
(``base.Backend``); ``registry.backend(name)`` finds one. Which backend runs a sweep,
and which combinations are refused, is decided in one place, ``runner.execution.modes``
(``runner.run``), never here and never in the CLI.
"""

from runner.execution.backends.base import Backend, Plan
from runner.execution.backends.registry import backend, backend_names, register_backend

__all__ = ["Backend", "Plan", "backend", "backend_names", "register_backend"]
