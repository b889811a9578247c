"""How ``stats`` keeps a former name working: the same object, with a ``DeprecationWarning`` naming the new one.

Why this exists: ``cluster_bootstrap_ci``, ``cluster_bootstrap_many`` and
``BootstrapResult`` were named when the percentile bootstrap was the default
interval; since the default became the analytic tilted Korn–Graubard interval,
which draws no resamples, the names said the wrong method. They are now
``cluster_rate_ci``, ``cluster_rate_ci_many`` and ``ClusterIntervalResult``.
The function aliases are defined beside the functions (``stats.cluster_intervals``)
and warn when called; a former type or constant name is answered by the module
``__getattr__`` of the module it used to live in, through ``renamed_attribute``,
and warns on access. Imports nothing of ``stats``, so any module can use it.
"""

from __future__ import annotations

import warnings
from typing import Any

_WHY = "the default interval is analytic (tilted Korn–Graubard) and draws no resamples"


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (``stacklevel`` 3: the caller of the alias)."""
    warnings.warn(f"{old} is deprecated, use {new} ({_WHY}); the old name will be removed in a future release",
                  DeprecationWarning, stacklevel=stacklevel)


def renamed_attribute(module: str, name: str, renamed: dict[str, tuple[str, Any]]) -> Any:
    """For a module ``__getattr__``: the object ``module.name`` now is (``renamed``: old → (new name, object)).

    Warns on access; any other name is the usual AttributeError.
    """
    try:
        new, obj = renamed[name]
    except KeyError:
        raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
    warn_renamed(f"{module}.{name}", new, stacklevel=4)  # 4: past this function and the module __getattr__
    return obj
