"""Deterministic tool simulators for multi-step experiments (weather, calendar, orders).

Each domain is a small fixed world behind a few tools with JSON schemas; calls are
validated and refused the way real APIs refuse them. ``DOMAINS`` maps a domain
name to its ``Domain``; task files name the domain they run against.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from runner.probes.propagation.toolsim import calendar, orders, weather
from runner.probes.propagation.toolsim.base import Domain, ToolDef, ToolFailure, ToolResult
from runner.probes.propagation.toolsim.validation import problems, type_name

DOMAINS: Mapping[str, Domain] = MappingProxyType({d.name: d for d in (weather.build(), calendar.build(), orders.build())})

__all__ = ["DOMAINS", "Domain", "ToolDef", "ToolFailure", "ToolResult", "problems", "type_name"]
