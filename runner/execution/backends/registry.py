"""The run backends by name: the built-in ones, and plug-ins found through entry points.

``runner`` never imports ``cluster``: Ray mode registers itself under the entry-point
group ``trialgrid.backends`` (pyproject.toml: ``ray = cluster.cli:ray_backend``).
Built-ins are named the same way (``module:attribute``) and imported only when asked
for, so looking a backend up costs the others nothing. A process that has a backend
object but no installed entry points (a Ray Job's driver running uploaded code) names
it with ``register_backend`` before calling ``runner.run``.
"""

from __future__ import annotations

import importlib
from importlib import metadata

from runner.core.errors import UserError
from runner.execution.backends.base import Backend

_ENTRY_POINTS = "trialgrid.backends"
_BUILTIN: dict[str, str] = {
    "local": "runner.execution.backends.local:LOCAL",
    "batch": "runner.execution.backends.batch.run:BATCH",
}
#: backends named in this process (``register_backend``): found before the entry points
_REGISTERED: dict[str, Backend] = {}


def register_backend(name: str, found: Backend) -> None:
    """Make ``found`` the backend ``runner.run`` uses for mode ``name`` in this process (a plug-in whose entry
    points are not installed: a Ray Job's head running the uploaded code)."""
    if name in _BUILTIN:
        raise ValueError(f"{name!r} is a built-in backend")
    _REGISTERED[name] = found


def backend_names() -> list[str]:
    """Every backend ``runner.run(mode=...)`` accepts: the built-ins, then the installed plug-ins."""
    names = [*_BUILTIN, *_REGISTERED]
    return names + [e.name for e in metadata.entry_points(group=_ENTRY_POINTS) if e.name not in names]


def backend(name: str) -> Backend:
    """The backend registered under ``name``. ``UserError`` if none is installed, or it is not a backend."""
    if name in _BUILTIN:
        module, _, attribute = _BUILTIN[name].partition(":")
        found = getattr(importlib.import_module(module), attribute)
        where = _BUILTIN[name]
    elif name in _REGISTERED:
        found, where = _REGISTERED[name], "registered in this process"
    else:
        entry = next((e for e in metadata.entry_points(group=_ENTRY_POINTS) if e.name == name), None)
        if entry is None:
            raise UserError(f"the {name!r} run backend is not installed",
                            hint="reinstall trialgrid (`pip install -e .`): its entry points register cluster mode")
        found, where = entry.load(), entry.value
    if not isinstance(found, Backend):
        raise UserError(f"the {name!r} run backend ({where}) is not a backend: it needs a `name` and a "
                        "`run(loaded, out, options)` method", hint="reinstall the package that registers it")
    return found
