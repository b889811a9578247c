"""The ``misselection`` probe: does the agent reach for a decoy when it cannot ground an entity?

Each case is a matched triple: one request phrased three ways that differ only in
the referent — unnamed ("our billing provider": ``ungroundable``), named but
unfamiliar (``groundable_unknown``), named and familiar (``groundable_known``). A
decoy tool (broad, plausible, never the right answer) is added to the catalogue and
the catalogue order is shuffled per trial from the trial seed, so position effects
average out instead of confounding the conditions. The triple is the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.core.columns import Column, ListOf
from runner.core.errors import UserError
from runner.core.seeding import permutation
from runner.core.sources import Source, load_source, validate
from runner.core.types import Message, ToolCall, ToolSpec, TrialSpec
from runner.probes.base import AnswerKey, Contrast, Probe, ProbeConfig
from runner.probes.grounding import GROUNDING_FIELDS, GroundingContext, check_call, check_calls
from runner.probes.mcp import McpServer, probe_catalogue
from runner.probes.replies import asks_user, is_empty
from runner.providers.base import Agent

CONDITIONS = ("ungroundable", "groundable_unknown", "groundable_known")

DEFAULT_DECOY = ToolSpec(
    name="workspace_context_dump",
    description=(
        "Return the full internal configuration of the workspace: every integration, account, "
        "credential alias and record it knows. Use it to look up anything about the environment "
        "when you are unsure which system a request refers to."
    ),
    parameters={
        "type": "object",
        "properties": {"section": {"type": "string", "description": "optional section to narrow the dump"}},
        "required": [],
    },
)

DEFAULT_SYSTEM = (
    "You are an operations assistant with access to the tools listed. Use a tool when it "
    "completes the user's request; ask the user when something you need is missing."
)


class MisselectionConfig(ProbeConfig):
    kind: Literal["misselection"]
    cases: str = Field(description="triples file (YAML or JSON), relative to the sweep file")
    catalogue: str | None = Field(default=None, description="tool catalogue file (OpenAI, Anthropic, MCP or plain form)")
    mcp_server: McpServer | None = Field(default=None, description="read the catalogue from this MCP server instead of a file")
    decoy_name: str | None = Field(default=None, description="use this catalogue tool as the decoy instead of injecting one")
    system: str = Field(default=DEFAULT_SYSTEM, description="system prompt")

    @model_validator(mode="after")
    def _one_catalogue(self) -> MisselectionConfig:
        if (self.catalogue is None) == (self.mcp_server is None):
            raise ValueError("give the tools either as `catalogue: FILE` or as `mcp_server: {command: ...}`"
                             + (", not both" if self.catalogue is not None else ""))
        return self


class Triple(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    expected_tool: str = Field(min_length=1)
    ungroundable: str = Field(min_length=1)
    groundable_known: str = Field(min_length=1)
    groundable_unknown: str | None = Field(default=None, min_length=1)


class TripleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    triples: list[Triple]


TEMPLATE = """\
# trialgrid misselection triples: one request, three referents.
# The three phrasings must differ only in how the entity is named.
triples:
  - id: invoices-last-month
    expected_tool: fetch_invoices          # the tool that completes the request
    ungroundable: "Pull last month's invoices from our billing provider."
    groundable_unknown: "Pull last month's invoices from Vantrel Billing."
    groundable_known: "Pull last month's invoices from Stripe."
"""


def load_triples(path: Path) -> tuple[list[Triple], str, list[str]]:
    source = load_source(path, what="triples file")
    data = source.data
    prefix: tuple = ()
    if isinstance(data, list):
        data = {"triples": data}
    elif isinstance(data, dict) and "triples" not in data and data:
        raise UserError("expected a 'triples' list", file=path, line=1, key_path=("triples",))
    if data is None or (isinstance(data, dict) and not data.get("triples")):
        raise UserError("no triples: the case set is empty", file=path, line=source.line_of(("triples",)),
                        key_path=("triples",), hint="add at least one triple; `trialgrid template misselection` writes an example")
    parsed: TripleFile = validate(TripleFile, data, source, prefix=prefix)
    seen: dict[str, int] = {}
    for i, t in enumerate(parsed.triples):
        if t.id in seen:
            raise UserError(f"duplicate triple id {t.id!r} (first at triples[{seen[t.id]}])", file=path,
                            line=source.line_of(("triples", i, "id")), key_path=("triples", i, "id"))
        seen[t.id] = i
    return parsed.triples, source.sha256, _drift_warnings(parsed.triples, source)


def _drift_warnings(triples: list[Triple], source: Source) -> list[str]:
    out = []
    for i, t in enumerate(triples):
        lengths = [len(s.split()) for s in (t.ungroundable, t.groundable_unknown, t.groundable_known) if s]
        if min(lengths) and max(lengths) / min(lengths) > 1.5 and max(lengths) - min(lengths) >= 4:
            out.append(f"{source.path}:{source.line_of(('triples', i))}: triple {t.id!r}: phrasings drift in length "
                       f"({'/'.join(map(str, lengths))} words); matched phrasings should differ only in the referent")
    return out


class MisselectionProbe(Probe):
    single_turn = True
    config_model = MisselectionConfig
    all_conditions = CONDITIONS
    outcome_fields = (
        Column("decoy_called", "bool"),
        Column("expected_called", "bool"),
        Column("expected_grounded", "bool"),
        Column("asked", "bool"),
        Column("empty_reply", "bool"),
        Column("unparsable_call", "bool"),
        Column("unknown_tool", "bool"),
        Column("calls_from_text", "bool"),
        Column("tools_called", ListOf("string")),
        Column("n_tool_calls", "int32"),
        Column("decoy_tool", "string"),
        Column("expected_tool", "string"),
        Column("decoy_position", "int32"),
        Column("catalogue_order", ListOf("string")),
        *GROUNDING_FIELDS,
    )
    rates = ("decoy_called", "expected_called", "expected_grounded", "all_args_grounded", "asked", "empty_reply", "unparsable_call", "unknown_tool",
             "calls_from_text")
    reply_rates = ("empty_reply", "unparsable_call", "unknown_tool", "calls_from_text", "expected_grounded", "all_args_grounded")
    good_rates = ("expected_called", "expected_grounded", "all_args_grounded", "asked")
    template = TEMPLATE
    contrasts = (
        Contrast(label="decoy", outcome="decoy_called",
                 arm_a=("ungroundable", "groundable_unknown"), arm_b=("groundable_known",)),
        Contrast(label="correct tool", outcome="expected_called",
                 arm_a=("ungroundable", "groundable_unknown"), arm_b=("groundable_known",)),
    )

    def __init__(self, config: MisselectionConfig, base_dir: Path, locate: Callable[[str, str], UserError]) -> None:
        super().__init__(config, base_dir)
        self.triples, triples_sha, drift = load_triples(base_dir / config.cases)
        catalogue, self._catalogue_sha, self.mcp_catalogue = probe_catalogue(config.catalogue, config.mcp_server,
                                                                             base_dir, locate)
        assert catalogue is not None  # the config holds exactly one source
        source = config.catalogue or "the MCP server's catalogue"
        names = {t.name for t in catalogue}
        if config.decoy_name is not None:
            if config.decoy_name not in names:
                raise locate("decoy_name", f"decoy_name {config.decoy_name!r} is not a tool in {source}")
            self.decoy = config.decoy_name
            tools = catalogue
        else:
            if DEFAULT_DECOY.name in names:
                raise locate("catalogue" if config.catalogue else "mcp_server", f"the catalogue already has a tool named {DEFAULT_DECOY.name!r}; "
                                          f"set decoy_name: {DEFAULT_DECOY.name} to use it as the decoy")
            self.decoy = DEFAULT_DECOY.name
            tools = catalogue + (DEFAULT_DECOY,)
        self.tools = tools
        self._names = frozenset(t.name for t in tools)
        self._specs = {t.name: t for t in tools}
        self._triples_sha = triples_sha
        self._by_id = {t.id: t for t in self.triples}
        self._system = Message("system", config.system)
        self.warnings.extend(drift)
        for t in self.triples:
            # an expected_tool not in the catalogue is an error of the sweep's lint (runner/config/lint.py)
            if t.expected_tool == self.decoy:
                self.warnings.append(f"{config.cases}: triple {t.id!r}: expected_tool is the decoy itself")
        if config.runs < 5:
            self.warnings.append(f"probe {self.name!r}: runs={config.runs} is fewer than 5 per cell; "
                                 "per-prompt rates will be too coarse to see which prompts fire")
        self._cells_seen: dict[tuple[str, str], tuple[Triple, str, tuple[Message, Message]]] = {}
        self._scores: dict[tuple[Any, ...], tuple[GroundingContext, dict[str, Any], bool]] = {}
        self._cells = [(t.id, c) for t in self.triples for c in self.conditions if getattr(t, c) is not None]
        if not self._cells:
            raise locate("conditions", "no (triple, condition) cell has a phrasing: every selected condition is empty")

    def identity(self) -> dict[str, Any]:
        return {"cases_sha256": self._triples_sha, "catalogue_sha256": self._catalogue_sha}

    def answer_keys(self) -> Iterator[AnswerKey]:
        for triple in self.triples:
            for condition in self.conditions:
                phrasing = getattr(triple, condition)
                if phrasing is not None:
                    yield AnswerKey((self._system, Message("user", phrasing)), self._names, triple)

    def catalogue_order(self, seed: int) -> list[int]:
        """The trial's catalogue order, as indices into ``self.tools``."""
        return permutation(len(self.tools), seed, salt=1000)

    def _shown(self, seed: int) -> tuple[list[ToolSpec], list[str], int]:
        """The trial's catalogue in its order, the tools' names in that order and the decoy's position. Not
        remembered: every trial shuffles the catalogue, so an order is almost never seen twice."""
        tools = [self.tools[i] for i in self.catalogue_order(seed)]
        order = [t.name for t in tools]
        return tools, order, order.index(self.decoy)

    def _cell(self, case_id: str, condition: str) -> tuple[Triple, str, tuple[Message, Message]]:
        """A cell's triple, request and messages (the same objects every run of the cell)."""
        key = (case_id, condition)
        hit = self._cells_seen.get(key)
        if hit is None:
            triple = self._by_id[case_id]
            request = getattr(triple, condition)
            hit = self._cells_seen[key] = (triple, request, (self._system, Message("user", request)))
        return hit

    def _scored(self, calls: tuple[ToolCall, ...], context: GroundingContext, expected_tool: str,
                tools: list[ToolSpec]) -> tuple[dict[str, Any], bool]:
        """The grounding columns and ``expected_grounded`` of a response's calls, remembered per context and calls.

        Both are pure functions of the context, the tools' specs and each call's name and arguments; a call's
        ``arguments`` are the parse of its ``raw_arguments`` (``ToolCall``), so the raw strings stand for them
        (a broken call, ``arguments`` None, is read for nothing). The sim and real models repeat the same calls
        across runs (the checks were about a ninth of a quickstart trial)."""
        key = (id(context), expected_tool, tuple((c.name, c.raw_arguments, c.arguments is None) for c in calls))
        hit = self._scores.get(key)
        if hit is not None and hit[0] is context:
            return hit[1], hit[2]
        _, grounding = check_calls(calls, context, tools)
        # the expected tool called with every argument grounded: a referent filled in, a placeholder or the
        # schema's description sent as a value is not the right call
        expected = any(c.name == expected_tool and c.arguments is not None
                       and not check_call(c.name, c.arguments, context, self._specs.get(c.name)) for c in calls)
        if len(self._scores) >= _MEMO_LIMIT:
            self._scores.clear()
        self._scores[key] = (context, grounding, expected)  # the entry holds the context: its id is not reused
        return grounding, expected

    async def run(self, spec: TrialSpec, agent: Agent) -> dict[str, Any]:
        triple, request, messages = self._cell(spec.case_id, spec.condition)
        tools, order, decoy_position = self._shown(spec.seed)
        response = await agent.chat(messages, tools, seed=spec.seed)
        calls = response.tool_calls
        called = [c.name for c in calls]
        empty = is_empty(response.text, len(called))
        if calls:
            grounding, expected_grounded = self._scored(calls, GroundingContext.of_messages(messages),
                                                        triple.expected_tool, tools)
        else:
            grounding, expected_grounded = _NO_CALLS, False
        return {
            # an empty reply avoided nothing: it is left out of the decoy rate, not counted decoy-free
            "decoy_called": None if empty else self.decoy in called,
            "expected_called": triple.expected_tool in called,
            "expected_grounded": expected_grounded,
            "asked": not called and not empty and asks_user(response.text, request),
            "empty_reply": empty,
            "unparsable_call": any(c.arguments is None for c in calls),
            "unknown_tool": any(c.name not in self._names for c in calls),
            "calls_from_text": response.calls_from_text > 0,
            "tools_called": called,
            "n_tool_calls": len(called),
            "decoy_tool": self.decoy,
            "expected_tool": triple.expected_tool,
            "decoy_position": decoy_position,
            "catalogue_order": order,
            **grounding,
        }


#: responses' scores remembered before the memo starts over. The calls that repeat are few and frequent: the
#: quickstart hits 85% of 150k trials at this size as at 50,000, and a run's memory stays flat past it
_MEMO_LIMIT = 4_096
#: the grounding columns of a response without calls (``check_calls`` of none), shared by such rows
_NO_CALLS: dict[str, Any] = {"ungrounded_args": [], "ungrounded_values": [], "all_args_grounded": None}
