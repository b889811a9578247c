"""A command's flags declared once, as the fields of a dataclass, and its body given one object.

Why a module of its own: typer reads a command's flags from its function's parameters, so a command with twenty
flags was a function of twenty parameters. Here the flags are the fields of a frozen dataclass (each field's
default is its ``typer.Option`` or ``typer.Argument``, exactly as a parameter's would be); ``command`` shows typer
those fields as the signature of the function it registers, and calls the body with one instance holding the
values given on the command line.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["command"]

F = TypeVar("F")


def command(flags: type[F]) -> Callable[[Callable[[F], None]], Callable[..., None]]:
    """Decorate ``body(flags: F)``: the function returned takes ``F``'s fields as keyword parameters (what typer
    reads: names, types, ``typer.Option`` defaults) and calls ``body(F(**values))``; register it with
    ``app.command(name=...)``. Its help is ``body``'s docstring."""
    if not dataclasses.is_dataclass(flags):
        raise TypeError(f"{flags.__name__} is not a dataclass")
    hints = typing.get_type_hints(flags)  # the fields' types resolved (the module says ``from __future__ import annotations``)
    params = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
              for f in dataclasses.fields(flags)]

    def wrap(body: Callable[[F], None]) -> Callable[..., None]:
        @functools.wraps(body)
        def run(**values: Any) -> None:
            body(flags(**values))

        del run.__wrapped__  # typer reads the signature below, not the body's one parameter
        run.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return run

    return wrap
