"""The run backends by name: the built-in ones, and plug-ins found through entry points.

``runner`` never imports ``cluster``: Ray mode registers itself under the entry-point
group ``trialgrid.backends`` (pyproject.toml: ``ray = cluster.cli:ray_backend``).
Built-ins are named the same way (``module:attribute``) and imported only when asked
for, so looking a backend up costs the others nothing.
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


def backend_names() -> list[str]:
    """Every backend ``runner.run(mode=...)`` accepts: the built-ins, then the installed plug-ins."""
    return [*_BUILTIN, *(e.name for e in metadata.entry_points(group=_ENTRY_POINTS) if e.name not in _BUILTIN)]


def backend(name: str) -> Backend:
    """The backend registered under ``name``. ``UserError`` if none is installed, or it is not a backend."""
    if name in _BUILTIN:
        module, _, attribute = _BUILTIN[name].partition(":")
        found = getattr(importlib.import_module(module), attribute)
        where = _BUILTIN[name]
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
