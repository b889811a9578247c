"""The former names of the cluster intervals, kept as deprecated aliases.

Why this exists: ``cluster_bootstrap_ci``, ``cluster_bootstrap_many`` and
``BootstrapResult`` were named when the percentile bootstrap was the default
interval; since the default became the analytic tilted Korn–Graubard interval,
which draws no resamples, the names said the wrong method. They are now
``cluster_rate_ci``, ``cluster_rate_ci_many`` and ``ClusterIntervalResult``
(``stats.cluster_intervals``). Code that still uses an old name gets the same
object, with a ``DeprecationWarning`` that names the new one. All aliases live
here so they can be removed in one place.
"""

from __future__ import annotations

import warnings
from typing import Any

from stats.cluster_intervals import DEFAULT_METHOD, METHODS, cluster_rate_ci, cluster_rate_ci_many
from stats.results import ClusterIntervalResult

_WHY = "the default interval is analytic (tilted Korn–Graubard) and draws no resamples"


def _warn(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{old} is deprecated, use {new} ({_WHY}); the old name will be removed in a future release",
                  DeprecationWarning, stacklevel=stacklevel)


def cluster_bootstrap_ci(*args: Any, **kwargs: Any) -> ClusterIntervalResult:
    """Deprecated alias of ``stats.cluster_rate_ci`` (same arguments, same result)."""
    _warn("stats.cluster_bootstrap_ci", "stats.cluster_rate_ci")
    return cluster_rate_ci(*args, **kwargs)


def cluster_bootstrap_many(*args: Any, **kwargs: Any) -> tuple[ClusterIntervalResult, ...]:
    """Deprecated alias of ``stats.cluster_rate_ci_many`` (same arguments, same results)."""
    _warn("stats.cluster_bootstrap_many", "stats.cluster_rate_ci_many")
    return cluster_rate_ci_many(*args, **kwargs)


#: per module: old attribute name → (new dotted name, the object); functions warn when called, the rest on access
_MOVED: dict[str, dict[str, tuple[str, Any]]] = {
    "stats": {"BootstrapResult": ("stats.ClusterIntervalResult", ClusterIntervalResult)},
    "stats.results": {"BootstrapResult": ("stats.ClusterIntervalResult", ClusterIntervalResult)},
    "stats.bootstrap": {
        "BootstrapResult": ("stats.ClusterIntervalResult", ClusterIntervalResult),
        "cluster_bootstrap_ci": ("stats.cluster_rate_ci", cluster_bootstrap_ci),
        "cluster_bootstrap_many": ("stats.cluster_rate_ci_many", cluster_bootstrap_many),
        "METHODS": ("stats.cluster_intervals.METHODS", METHODS),
        "DEFAULT_METHOD": ("stats.cluster_intervals.DEFAULT_METHOD", DEFAULT_METHOD),
    },
}


def moved_from(module: str, name: str) -> Any:
    """The object an old ``module.name`` now is (a module ``__getattr__`` calls this); AttributeError if none."""
    try:
        new, obj = _MOVED[module][name]
    except KeyError:
        raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
    if not callable(obj) or isinstance(obj, type):  # the function aliases warn when called instead
        _warn(f"{module}.{name}", new, stacklevel=4)
    return obj
