"""Task files for multi-step probes: one domain per file, each task with a real reference answer.

A task is a request the agent must complete with the domain's tools, the values a
correct final answer must state (``expect``: real values from the simulator, never
templates), the call that produces them (``reference``, replayed by the tests), and
which argument / result field an injection corrupts (``inject_param`` /
``inject_result``; default: the first required one present).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runner.core.errors import UserError
from runner.core.jsonwalk import canonical_number, normalise
from runner.core.sources import load_source, validate
from runner.probes.answertext import numbers_stated
from runner.probes.propagation.toolsim import DOMAINS


class ReferenceCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    error: int | None = Field(default=None, description="the status code when the right outcome is a refusal")


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    query: str = Field(min_length=1)
    expect: list[str] = Field(min_length=1, description="values a correct final answer states, all of them")
    reference: ReferenceCall | None = None
    inject_param: str | None = None
    inject_result: str | None = None


class TaskFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    domain: str
    tasks: list[Task] = Field(min_length=1)


def load_tasks(path: Path) -> tuple[str, list[Task], str]:
    """(domain, tasks, sha256) of one task file; every problem a located ``UserError``."""
    source = load_source(path, what="task file")
    if not isinstance(source.data, dict):
        raise UserError("a task file is a mapping with 'domain' and 'tasks'", file=path, line=1)
    parsed: TaskFile = validate(TaskFile, source.data, source)
    if parsed.domain not in DOMAINS:
        raise UserError(f"unknown domain {parsed.domain!r}: expected one of {', '.join(DOMAINS)}", file=path,
                        line=source.line_of(("domain",)), key_path=("domain",))
    tools = DOMAINS[parsed.domain].tools
    for i, task in enumerate(parsed.tasks):
        if task.reference and task.reference.tool not in tools:
            raise UserError(f"tool {task.reference.tool!r} is not in the {parsed.domain} domain ({', '.join(tools)})",
                            file=path, line=source.line_of(("tasks", i, "reference", "tool")),
                            key_path=("tasks", i, "reference", "tool"))
        params = {p for t in tools.values() for p in t.spec.parameters.get("properties", {})}
        if task.inject_param and task.inject_param not in params:
            raise UserError(f"inject_param {task.inject_param!r} is no argument of any {parsed.domain} tool "
                            f"({', '.join(sorted(params))})", file=path,
                            line=source.line_of(("tasks", i, "inject_param")), key_path=("tasks", i, "inject_param"))
    return parsed.domain, parsed.tasks, source.sha256


def answer_matches(answer: str, expect: list[str]) -> bool:
    """Does ``answer`` state every expected value? Numbers compare as numbers, the rest as normalised text."""
    stated = numbers_stated(answer)
    text = normalise(answer)
    for value in expect:
        if re.fullmatch(r"[-+]?\d+(?:\.\d+)?", value.strip()):
            ok = canonical_number(value.strip()) in stated  # 19.9 is not found inside 119.9
        elif _TOKEN_RE.fullmatch(value.strip()):
            ok = value.strip().upper().replace("_", "-") in stated or value.strip() in stated
        else:
            ok = normalise(value) in text
        if not ok:
            return False
    return True


_TOKEN_RE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|[A-Za-z]{2,}[-_]\d+")
