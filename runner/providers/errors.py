"""The provider error taxonomy, under the name the providers import it by.

``ErrorKind``, ``Remedy`` and ``ProviderError`` are defined in ``runner.core.errors``,
the one module that holds (and draws) every error trialgrid raises. The rule stays:
a provider classifies every failure once, where it is raised (``classify.py``), into
an ``ErrorKind``; everything above it (engine retries, rows, reports) reads only the kind.
"""

from __future__ import annotations

from runner.core.errors import ErrorKind, ProviderError, Remedy

__all__ = ["ErrorKind", "ProviderError", "Remedy"]
