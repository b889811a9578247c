"""The shape every simulated tool domain shares: tools with schemas, and one executor.

A domain is a small, fixed world (a week of calendar events, a shop's orders, a
weather archive) behind a few tools. ``Domain.execute`` is the API gateway: it
refuses malformed calls with the status codes and messages a real service returns
(400 for bad types and unknown fields, 422 for values out of range, 404 for unknown
entities, 409 for conflicts) and otherwise runs the handler. Everything is a pure
function of the arguments and the per-trial ``state`` (what the trial already
created or cancelled), so the same trial replays identically anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.core.types import ToolSpec
from runner.probes.propagation.toolsim.validation import problems


class ToolFailure(Exception):
    """Raised by a handler for a failure the real API would report (not a bug).

    Internal control flow: ``Domain.execute`` turns it into the tool's error result.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ToolResult:
    """One execution: the data returned, or the error code and message."""

    ok: bool
    data: Mapping[str, Any] | None = None
    code: int = 200
    error: str | None = None

    def content(self) -> str:
        """The tool message the agent sees: the JSON body, or an error object."""
        if self.ok:
            return json.dumps(self.data, separators=(", ", ": "), ensure_ascii=False)
        return json.dumps({"error": {"code": self.code, "message": self.error}}, ensure_ascii=False)


Handler = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class ToolDef:
    spec: ToolSpec
    #: JSON schema of a successful result (checked by the interceptor; never shown to the agent)
    returns: Mapping[str, Any]
    handler: Handler
    #: the call changes the world (creates, cancels, deletes): its answer is an action, not a value
    side_effect: bool = False


@dataclass
class Domain:
    name: str
    summary: str
    tools: dict[str, ToolDef] = field(default_factory=dict)

    def add(self, spec: ToolSpec, returns: Mapping[str, Any], handler: Handler, *, side_effect: bool = False) -> None:
        self.tools[spec.name] = ToolDef(spec, returns, handler, side_effect)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(t.spec for t in self.tools.values())

    def execute(self, name: str, arguments: Mapping[str, Any] | None, state: dict[str, Any],
                parse_error: str | None = None) -> ToolResult:
        """Run one call as the service would: validate, then execute or refuse."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolResult(False, code=404, error=f"unknown tool {name!r}; this service offers {', '.join(self.tools)}")
        if arguments is None:
            return ToolResult(False, code=400, error=f"arguments are not a valid JSON object ({parse_error or 'unparsable'})")
        found = problems(tool.spec.parameters, dict(arguments))
        if found:
            # type and shape problems are 400 Bad Request; values of the right type but out of range are 422
            code = 400 if any("must be of type" in p or "missing required" in p or "unknown field" in p
                              for p in found) else 422
            return ToolResult(False, code=code, error="; ".join(found))
        try:
            return ToolResult(True, tool.handler(dict(arguments), state))
        except ToolFailure as exc:
            return ToolResult(False, code=exc.code, error=exc.message)
