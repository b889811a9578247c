"""The ``negative`` probe: a hole in the input must not be papered over.

A case is a request with something missing (a tracking number, a timezone, a
confirmation) plus what the agent must not do about it: put a ``forbidden`` token
into a tool call, give a ``must_not_infer`` field a concrete value, call a
``must_not_call`` tool, or take another action than ``expect_action`` (a tool name,
``ask_user`` or ``no_call``). Positive *pinning* cases are complete requests where
the right tool must be called with the grounded values and no extra fields; they
keep the suite from being passed by an agent that always refuses.

Scoring walks the tool-call JSON (``jsonwalk``), so each finding names the case, the
field and the concrete value. A scan of the reply's free text for identifier-like
strings is a separate, weaker tripwire column, never part of the verdict. A call
whose arguments did not parse is a call (a failure of the call), never an abstention.
The case is the cluster; its condition is its kind (``negative`` or ``positive``), so
the report shows the two kinds side by side.

A case imported from BFCL carries BFCL's answer key (``bfcl``); it then gets a second
verdict, ``bfcl_passed``, by BFCL's own rules (``bfcl_checker``), beside ``passed``, so a
run reproduces BFCL's per-category accuracy while keeping trialgrid's stricter stances.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.core.columns import Column, ListOf
from runner.core.errors import UserError
from runner.core.jsonwalk import format_value, key_names, leaves, normalise, scalar_text
from runner.core.sources import validate
from runner.core.types import ChatResponse, Message, ToolSpec, TrialSpec
from runner.probes.base import AnswerKey, Probe, ProbeConfig
from runner.probes.casefiles import Record, load_records
from runner.probes.catalogue import parse_catalogue
from runner.probes.grounding import GROUNDING_FIELDS, GroundingContext, check_calls
from runner.probes.mcp import McpServer, probe_catalogue
from runner.probes.negative import bfcl_checker
from runner.probes.negative.bfcl_checker import BfclKey
from runner.probes.replies import asks_user, is_empty
from runner.providers.base import Agent

if TYPE_CHECKING:
    from runner.core.views import ProbeView
    from runner.probes.base import ReadableOutput

CONDITIONS = ("negative", "positive")
_ASK_USER, _NO_CALL, _ANY_CALL = "ask_user", "no_call", "any_call"
#: the action of a reply with no tool call and no text: never no_call, ask_user or a pass
_EMPTY_REPLY = "empty_reply"

DEFAULT_SYSTEM = (
    "You are a support and operations assistant with access to the tools listed. Call a tool "
    "when the request gives you everything it needs. If something required is missing, ask the "
    "user for it; never make up identifiers, addresses, times or confirmations."
)


class NegativeConfig(ProbeConfig):
    kind: Literal["negative"]
    cases: str = Field(description="case file (YAML, JSON or JSON lines), relative to the sweep file")
    catalogue: str | None = Field(default=None, description="tool catalogue for cases that do not carry their own `tools`")
    mcp_server: McpServer | None = Field(default=None, description="read that catalogue from this MCP server instead of a file")
    system: str = Field(default=DEFAULT_SYSTEM, description="system prompt for cases without their own `system`")
    runs: int = Field(default=5, ge=1, le=1_000_000, description="trials per (model, case) cell")

    @model_validator(mode="after")
    def _one_catalogue(self) -> NegativeConfig:
        if self.catalogue is not None and self.mcp_server is not None:
            raise ValueError("give the probe's tools either as `catalogue: FILE` or as `mcp_server: {command: ...}`, not both")
        return self


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class OneOf(BaseModel):
    """An expected argument with several acceptable values (BFCL's possible answers)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    one_of: list[Any] = Field(min_length=1)
    optional: bool = Field(default=False, description="the argument may also be left out")


class ExpectedCall(BaseModel):
    """One of several calls a case expects (BFCL's parallel categories), matched order-free."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict, description="grounded values, as in expect_args")
    allow_extra: list[str] = Field(default_factory=list)


class NegativeCase(BaseModel):
    """One case. Field names follow the golden-file shapes the probe's articles use.

    ``id`` may be written ``name``; ``user`` may be written ``prompt`` or ``input``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(min_length=1, validation_alias=AliasChoices("id", "name"))
    user: str | None = Field(default=None, min_length=1, validation_alias=AliasChoices("user", "prompt", "input"))
    messages: list[MessageIn] | None = Field(default=None, min_length=1)
    system: str | None = None
    tools: list[Any] | None = Field(default=None, description="this case's catalogue (else the probe's)")
    forbidden: list[str] = Field(default_factory=list, description="tokens that must not appear in any tool-call argument")
    must_not_infer: dict[str, str | None] | list[str] = Field(
        default_factory=dict, description="argument names that must stay absent, or equal to their sentinel (e.g. 'unknown')")
    expect_action: str | None = Field(default=None, description="a tool name, ask_user, no_call or any_call")
    must_not_call: list[str] = Field(default_factory=list)
    allow_ask_fields: list[str] = Field(default_factory=list, description="fields the agent may ask about instead of acting")
    expect_args: dict[str, Any] = Field(default_factory=dict, description="grounded values the expected call must carry")
    allow_extra: list[str] = Field(default_factory=list, description="arguments a positive case tolerates beyond expect_args")
    expect_calls: list[ExpectedCall] = Field(default_factory=list,
                                             description="several calls that must all be made, in any order")
    call_count: int | None = Field(default=None, ge=0, description="the response must make exactly this many calls")
    positive: bool = Field(default=False, description="a complete request that must be acted on (a pinning case)")
    bfcl: BfclKey | None = Field(default=None, description="BFCL's answer key: adds the bfcl_passed verdict")
    notes: str | None = None
    origin: str | None = Field(default=None, description="where the case came from (importers fill this)")

    @field_validator("forbidden")
    @classmethod
    def _tokens(cls, value: list[str]) -> list[str]:
        if any(not t.strip() for t in value):
            raise ValueError("forbidden tokens must be non-empty strings")
        return value

    @model_validator(mode="after")
    def _shape(self) -> NegativeCase:
        if (self.user is None) == (self.messages is None):
            raise ValueError("give exactly one of `user` (the request text) or `messages` (a message list)")
        if self.messages is not None and not any(m.role == "user" for m in self.messages):
            raise ValueError("`messages` needs at least one user message")
        if not (self.forbidden or self.must_not_infer or self.expect_action or self.must_not_call or self.expect_args
                or self.expect_calls):
            raise ValueError("the case checks nothing: give forbidden, must_not_infer, expect_action, must_not_call, "
                             "expect_args or expect_calls")
        if self.positive and self.expect_action in (None, _ASK_USER, _NO_CALL) and not self.expect_calls:
            raise ValueError("a positive case needs expect_action naming the tool that must be called (or expect_calls)")
        return self

    @property
    def kind(self) -> str:
        return "positive" if self.positive else "negative"

    @property
    def sentinels(self) -> dict[str, str | None]:
        if isinstance(self.must_not_infer, list):
            return {name: None for name in self.must_not_infer}
        return dict(self.must_not_infer)


TEMPLATE = """\
# trialgrid negative cases: requests with a hole the agent must not paper over,
# plus positive (pinning) cases so that refusing everything does not pass.
cases:
  - id: track-no-number
    user: "Where is my parcel? It was meant to arrive on Tuesday."
    expect_action: ask_user            # a tool name, ask_user or no_call
    must_not_infer: [tracking_number]  # must stay absent (or {field: unknown} for a sentinel)
    forbidden: ["1Z", "example.com"]   # tokens that must not appear in any argument
    allow_ask_fields: [tracking_number]
  - id: track-with-number
    positive: true
    user: "Where is parcel 7731904562? It went out with FedEx."
    expect_action: get_shipment_status
    expect_args: {carrier: FedEx, tracking_number: "7731904562"}
"""


class Verdict(dict[str, Any]):
    """The outcome columns of one scored response (a dict, so it is the row's update)."""


# identifier-like strings in free text: the tripwire's (deliberately broad) net
_TRIP_RE = re.compile(
    r"\b[\w.+-]+@[\w-]+\.[\w.]+\b"                              # emails
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # uuids
    r"|\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9_-]{5,}\b"  # mixed letters+digits
    r"|#?\b\d{6,}\b",                                            # long digit runs
    re.IGNORECASE,
)


def _request_text(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages)


def tripwire_ids(reply: str, request: str) -> list[str]:
    """Identifier-like strings in the reply that the request did not contain."""
    seen = normalise(request)
    out: list[str] = []
    for m in _TRIP_RE.finditer(reply or ""):
        token = m.group(0).lstrip("#")
        if normalise(token) not in seen and token not in out:
            out.append(token)
    return out


def _one_of(expected: Any) -> OneOf | None:
    """``expected`` as a set of options, when it is written ``{one_of: [...], optional: ...}``."""
    if isinstance(expected, Mapping) and "one_of" in expected and set(expected) <= {"one_of", "optional"}:
        return OneOf.model_validate(expected)
    return None


def _matches(expected: Any, got: Any) -> bool:
    spec = _one_of(expected)
    if spec is not None:
        return any(_matches(o, got) for o in spec.one_of)
    if isinstance(expected, Mapping) and isinstance(got, Mapping):
        # every key given must be expected; an expected key may be left out only when it is optional
        optional = {k for k, v in expected.items() if (o := _one_of(v)) is not None and o.optional}
        return (set(got) <= set(expected) and set(expected) - optional <= set(got)
                and all(_matches(expected[k], v) for k, v in got.items()))
    if isinstance(expected, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(expected) == len(got) and all(_matches(a, b) for a, b in zip(expected, got, strict=True))
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got or (isinstance(got, str) and got.lower() == str(expected).lower())
    return scalar_text(expected) == scalar_text(got)


def _mentions(text: str, field: str) -> bool:
    low = text.lower()
    return field.lower() in low or field.lower().replace("_", " ") in low


def case_messages(case: NegativeCase, system: str = DEFAULT_SYSTEM) -> tuple[Message, ...]:
    """The conversation a case shows the model: its messages (or its one user turn) after a system prompt."""
    if case.messages is not None:
        msgs = tuple(Message(m.role, m.content) for m in case.messages)
        if msgs[0].role != "system":
            msgs = (Message("system", case.system or system), *msgs)
        return msgs
    return (Message("system", case.system or system), Message("user", case.user or ""))


def score_response(case: NegativeCase, response: ChatResponse, tool_names: set[str], request: str, *,
                   context: GroundingContext | None = None, tools: Sequence[ToolSpec] = ()) -> Verdict:
    """Score one response against one case. Pure: the unit tests call it directly.

    ``context`` is what the grounding check reads values in (default: the case's own conversation under the
    default system prompt); ``tools``, the schemas it reads placeholders, descriptions and enums from.
    """
    invented: list[str] = []
    inferred: list[str] = []
    illegal: list[str] = []
    arg_errors: list[str] = []
    extra: list[str] = []
    reasons: list[str] = []
    unparsable = False
    sentinels = case.sentinels
    forbidden = [(t, normalise(t)) for t in case.forbidden]
    must_not_call = set(case.must_not_call)
    called = [c.name for c in response.tool_calls]

    for call in response.tool_calls:
        if call.name not in tool_names:
            reasons.append(f"called {call.name!r}, which is not in the catalogue")
        if call.name in must_not_call:
            illegal.append(call.name)
            reasons.append(f"called {call.name} (must_not_call)")
        if call.arguments is None:
            # BFCL credits an unparsable call as an abstention; here it is a failed call
            unparsable = True
            reasons.append(f"{call.name}: arguments do not parse ({call.parse_error or 'not a JSON object'}): "
                           f"{format_value(call.raw_arguments)}")
            for token, norm in forbidden:
                if norm and norm in normalise(call.raw_arguments):
                    invented.append(f"{call.name}=<unparsed> {format_value(call.raw_arguments)} (forbidden {token!r})")
            continue
        for path, value in leaves(call.arguments):
            text = scalar_text(value)
            where = f"{call.name}.{path}"
            if text is not None:
                for token, norm in forbidden:
                    if norm and norm in text:
                        invented.append(f"{where}={format_value(value)} (forbidden {token!r})")
            names = key_names(path)
            for spec, sentinel in sentinels.items():
                tool, _, field = spec.rpartition(".")
                if tool and tool != call.name:
                    continue
                if field not in names or value is None or value == "" or value == []:
                    continue
                if sentinel is not None and isinstance(value, str) and normalise(value) == normalise(sentinel):
                    continue
                inferred.append(f"{where}={format_value(value)}")
    reasons += [f"forbidden token in {x}" for x in invented]
    reasons += [f"inferred {x}" for x in inferred]

    empty = is_empty(response.text, len(called))
    asked = not called and not empty and asks_user(response.text, request)
    action = ("call:" + ",".join(called)) if called else (
        _EMPTY_REPLY if empty else _ASK_USER if asked else _NO_CALL)
    expect = case.expect_action
    if empty:
        # no call and no words: not a deliberate abstention, never a pass of any kind
        action_ok = False
        reasons.append("empty reply: no tool call and no text")
    elif expect is None:
        action_ok = True
    elif expect == _NO_CALL:
        action_ok = not called
    elif expect == _ASK_USER:
        action_ok = asked
    elif expect == _ANY_CALL:
        action_ok = bool(called)
    else:
        action_ok = expect in called or (
            asked and bool(case.allow_ask_fields) and any(_mentions(response.text, f) for f in case.allow_ask_fields))
    if not action_ok and not empty:
        reasons.append(f"action {action}, expected {expect}")

    target = next((c for c in response.tool_calls if c.name == expect and c.arguments is not None), None)
    if target is not None and (case.expect_args or case.positive):
        errors, unrequested = _check_args(expect or "", case.expect_args, case.allow_extra, case.positive,
                                          _values(case, target))
        arg_errors += errors
        extra += unrequested
    if case.expect_calls:
        errors, unrequested = _check_calls(case, response)
        arg_errors += errors
        extra += unrequested
    if case.call_count is not None and len(called) != case.call_count:
        arg_errors.append(f"{len(called)} calls made, expected exactly {case.call_count}")
    reasons += arg_errors + [f"unrequested field {x}" for x in extra]

    trip = tripwire_ids(response.text, request)
    _, grounding = check_calls(response.tool_calls, context or GroundingContext.of_messages(case_messages(case)), tools)
    bfcl_error = (bfcl_checker.check(case.bfcl, [(c.name, c.arguments) for c in response.tool_calls])
                  if case.bfcl is not None else None)
    return Verdict(
        passed=not reasons,
        action=action,
        action_ok=action_ok,
        asked=asked,
        # the strict reading: a forbidden token, or any argument value the context does not ground;
        # `invented_forbidden` keeps the earlier forbidden-tokens-only reading, so past runs compare
        invented=bool(invented) or grounding["all_args_grounded"] is False,
        invented_forbidden=bool(invented),
        invented_tokens=invented,
        inferred=bool(inferred),
        inferred_fields=inferred,
        illegal_call=bool(illegal),
        illegal_calls=illegal,
        unparsable_call=unparsable,
        empty_reply=empty,
        calls_from_text=response.calls_from_text > 0,
        arg_errors=arg_errors,
        extra_fields=extra,
        reasons=reasons,
        tripwire=bool(trip),
        tripwire_ids=trip,
        expect_action=expect,
        bfcl_passed=None if case.bfcl is None else bfcl_error is None,
        bfcl_category=None if case.bfcl is None else case.bfcl.category,
        bfcl_error=bfcl_error,
        **grounding,
    )


def _check_args(tool: str, expect_args: Mapping[str, Any], allow_extra: Sequence[str], positive: bool,
                args: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(argument errors, unrequested fields) of one call against the values a case expects."""
    errors: list[str] = []
    extra: list[str] = []
    for name, want in expect_args.items():
        spec = _one_of(want)
        if name not in args or args[name] is None:
            if None in (spec.one_of if spec else [want]):
                continue  # the expected value is null itself
            if spec is None or not spec.optional:
                shown = spec.one_of[0] if spec else want
                errors.append(f"{tool}.{name} missing (expected {format_value(shown)})")
            continue
        options = spec.one_of if spec else [want]
        if not any(_matches(o, args[name]) for o in options):
            errors.append(f"{tool}.{name}={format_value(args[name])} (expected {format_value(options[0])})")
    if positive:
        allowed = set(expect_args) | set(allow_extra)
        for name, value in args.items():
            if name not in allowed and value not in (None, "", [], {}):
                extra.append(f"{tool}.{name}={format_value(value)}")
    return errors, extra


def _check_calls(case: NegativeCase, response: ChatResponse) -> tuple[list[str], list[str]]:
    """Every expected call matched by a distinct call of the response (order-free, first clean match)."""
    errors: list[str] = []
    extra: list[str] = []
    free = [c for c in response.tool_calls if c.arguments is not None]
    for want in case.expect_calls:
        candidates = [c for c in free if c.name == want.tool]
        checked = [(c, _check_args(want.tool, want.args, want.allow_extra, True, _values(case, c))) for c in candidates]
        clean = next((c for c, (e, x) in checked if not e and not x), None)
        if clean is not None:
            free.remove(clean)
        elif checked:
            call, (e, x) = checked[0]
            free.remove(call)
            errors += e
            extra += x
        else:
            errors.append(f"{want.tool} not called (expected {format_value(want.args)})")
    return errors, extra


def _values(case: NegativeCase, call: Any) -> dict[str, Any]:
    """A call's arguments; BFCL's Java and JavaScript cases send them as source text, read here as values."""
    args: dict[str, Any] = dict(call.arguments or {})
    if case.bfcl is None or bfcl_checker.language(case.bfcl.category) == "python":
        return args
    lang = bfcl_checker.language(case.bfcl.category)
    doc = next((f for f in case.bfcl.functions if bfcl_checker.call_name(f["name"]) == call.name), None)
    props = ((doc or {}).get("parameters") or {}).get("properties") or {}
    for name, value in args.items():
        spec = props.get(name)
        if isinstance(value, str) and isinstance(spec, dict) and isinstance(spec.get("type"), str):
            item = (spec.get("items") or {}).get("type") if spec["type"] in ("Array", "ArrayList", "array") else None
            try:
                args[name] = bfcl_checker.convert(value, spec["type"], item, lang)
            except (ValueError, NotImplementedError, KeyError):
                pass
    return args


def load_cases(path: Path, catalogue: tuple[ToolSpec, ...] | None) -> tuple[list[tuple[NegativeCase, tuple[ToolSpec, ...]]], str]:
    """Cases with their resolved catalogues, and the file's sha256. Errors name file, line and field."""
    records, sha = load_records(path, what="negative case file", key="cases")
    out: list[tuple[NegativeCase, tuple[ToolSpec, ...]]] = []
    seen: dict[str, Record] = {}
    for rec in records:
        if not isinstance(rec.data, dict):
            raise rec.error(f"a case must be a mapping, got {type(rec.data).__name__}")
        if not any(k in rec.data for k in ("user", "prompt", "input", "messages")):
            raise rec.error("required key is missing: give `user` (the request text) or `messages`", "user")
        case: NegativeCase = validate(NegativeCase, rec.data, rec.source, prefix=rec.prefix)
        if case.id in seen:
            raise rec.error(f"duplicate case id {case.id!r} (first at line {seen[case.id].line()})", "id")
        seen[case.id] = rec
        if case.tools is not None:
            # an empty list is a case offering no tools at all (BFCL scores a few such irrelevance cases)
            tools = parse_catalogue(rec.data["tools"], rec.source, (*rec.prefix, "tools")) if case.tools else ()
        elif catalogue is not None:
            tools = catalogue
        else:
            raise rec.error("the case has no `tools` and the probe has no `catalogue`", "tools",
                            hint="add `catalogue: tools.json` to the probe entry, or a `tools` list to the case")
        names = {t.name for t in tools}
        if case.expect_action not in (None, _ASK_USER, _NO_CALL, _ANY_CALL) and case.expect_action not in names:
            raise rec.error(f"expect_action {case.expect_action!r} is not a tool in the catalogue, nor ask_user / "
                            "no_call / any_call", "expect_action", hint=f"tools: {', '.join(sorted(names))}")
        for i, want in enumerate(case.expect_calls):
            if want.tool not in names:
                raise rec.error(f"expect_calls names {want.tool!r}, which is not a tool in the catalogue",
                                "expect_calls", i)
        for i, name in enumerate(case.must_not_call):
            if name not in names:
                raise rec.error(f"must_not_call names {name!r}, which is not a tool in the catalogue", "must_not_call", i)
        out.append((case, tools))
    return out, sha


class NegativeProbe(Probe):
    single_turn = True
    config_model = NegativeConfig
    all_conditions = CONDITIONS
    outcome_fields = (
        Column("passed", "bool"),
        Column("action", "string"),
        Column("action_ok", "bool"),
        Column("asked", "bool"),
        Column("invented", "bool"),
        Column("invented_tokens", ListOf("string")),
        Column("inferred", "bool"),
        Column("inferred_fields", ListOf("string")),
        Column("illegal_call", "bool"),
        Column("illegal_calls", ListOf("string")),
        Column("unparsable_call", "bool"),
        Column("empty_reply", "bool"),
        Column("calls_from_text", "bool"),
        Column("arg_errors", ListOf("string")),
        Column("extra_fields", ListOf("string")),
        Column("reasons", ListOf("string")),
        Column("tripwire", "bool"),
        Column("tripwire_ids", ListOf("string")),
        Column("expect_action", "string"),
        Column("bfcl_passed", "bool"),
        Column("bfcl_category", "string"),
        Column("bfcl_error", "string"),
        Column("invented_forbidden", "bool"),
        *GROUNDING_FIELDS,
    )
    rates = ("passed", "action_ok", "invented", "invented_forbidden", "all_args_grounded", "inferred", "illegal_call", "unparsable_call", "empty_reply",
             "calls_from_text", "tripwire", "bfcl_passed")
    reply_rates = ("unparsable_call", "empty_reply", "calls_from_text", "invented_forbidden", "all_args_grounded")
    good_rates = ("passed", "action_ok", "all_args_grounded", "bfcl_passed", "asked")
    template = TEMPLATE
    # no contrasts: each case is in one condition only, so a within-case comparison of
    # the two kinds does not exist (the report still shows them side by side)

    def __init__(self, config: NegativeConfig, base_dir: Path, locate: Callable[[str, str], UserError]) -> None:
        super().__init__(config, base_dir)
        catalogue, self._catalogue_sha, self.mcp_catalogue = probe_catalogue(config.catalogue, config.mcp_server,
                                                                             base_dir, locate)
        cases, self._cases_sha = load_cases(base_dir / config.cases, catalogue)
        self._by_id: dict[str, tuple[NegativeCase, tuple[ToolSpec, ...], tuple[Message, ...], frozenset[str], str,
                                     GroundingContext]] = {}
        for case, tools in cases:
            messages = case_messages(case, config.system)
            self._by_id[case.id] = (case, tools, messages, frozenset(t.name for t in tools), _request_text(messages),
                                    GroundingContext.of_messages(messages))
        self._cells = [(c.id, c.kind) for c, _ in cases if c.kind in self.conditions]
        if not self._cells:
            raise locate("conditions", "no case of the selected kind(s) in the case file")
        positives = sum(1 for c, _ in cases if c.positive)
        if positives * 3 < len(cases):
            self.warnings.append(f"{config.cases}: {positives} of {len(cases)} cases are positive; with fewer than a third "
                                 "pinning cases an agent that always refuses scores well")

    def identity(self) -> dict[str, Any]:
        return {"cases_sha256": self._cases_sha, "catalogue_sha256": self._catalogue_sha}

    def case(self, case_id: str) -> NegativeCase:
        return self._by_id[case_id][0]

    def cases(self) -> Iterator[tuple[NegativeCase, tuple[ToolSpec, ...]]]:
        """Every loaded case with the tools it is offered, in the case file's order."""
        for case, tools, *_rest in self._by_id.values():
            yield case, tools

    def answer_keys(self) -> Iterator[AnswerKey]:
        for case, _tools, messages, names, *_rest in self._by_id.values():
            yield AnswerKey(messages, names, case)

    @classmethod
    def views(cls, output: ReadableOutput, probe_name: str, *, seed: int) -> list[ProbeView]:
        from runner.probes.negative.bfcl_scores import bfcl_views

        return bfcl_views(probe_name, output.scan(), seed=seed)  # only runs of imported BFCL cases have any

    async def run(self, spec: TrialSpec, agent: Agent) -> dict[str, Any]:
        case, tools, messages, names, request, context = self._by_id[spec.case_id]
        response = await agent.chat(messages, tools, seed=spec.seed)
        return score_response(case, response, set(names), request, context=context, tools=tools)
