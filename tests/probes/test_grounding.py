"""The shared grounding rule (runner/probes/grounding.py): its verdicts leaf by leaf, and that the phantom
probe's baseline is that rule, trace for trace, with the verdicts the bundled traces had before it was shared."""

from __future__ import annotations

from typing import Any

import pytest

from runner.core.jsonwalk import contained, leaves, normalise, numbers_in, top_field
from runner.core.types import Message, ToolCall, ToolSpec
from runner.probes.grounding import GroundingContext, Reason, check_call, check_calls, fields_of
from runner.probes.phantom import CONDITIONS, Trace, baseline_fields, load_traces
from tests.conftest import CONFIGS


def _legacy_baseline(trace: Trace, hide_results: bool) -> list[str]:
    """The phantom baseline as it was written before the rule was shared (commit 0167be9), kept as the reference."""
    ctx = trace.shown(hide_results)["context"]
    context = normalise("\n".join(str(v) for _, v in leaves(ctx) if v is not None))
    numbers = numbers_in(context)
    out: list[str] = []
    for call in trace.calls:
        for path, value in leaves(call.args):
            field = f"{call.tool}.{top_field(path)}"
            if field not in out and not contained(value, context, numbers):
                out.append(field)
    return out


@pytest.fixture(scope="module")
def bundled_traces() -> list[Trace]:
    return load_traces(CONFIGS / "phantom" / "traces.yaml")[0]


def test_the_shared_checker_gives_the_bundled_phantom_traces_the_baselines_verdicts(bundled_traces: list[Trace]) -> None:
    assert len(bundled_traces) >= 12
    compared = 0
    for trace in bundled_traces:
        for condition in CONDITIONS:
            hide = condition == "results_hidden"
            shared = fields_of(f for c in trace.calls
                               for f in check_call(c.tool, c.args, GroundingContext.of_values(trace.shown(hide)["context"])))
            assert shared == _legacy_baseline(trace, hide) == baseline_fields(trace, hide), (trace.id, condition)
            compared += 1
    assert compared == 2 * len(bundled_traces)
    # the traces exercise both verdicts and the hidden-results condition changes some
    assert any(baseline_fields(t, False) for t in bundled_traces)
    assert any(baseline_fields(t, True) != baseline_fields(t, False) for t in bundled_traces)


def _spec(name: str, **props: dict[str, Any]) -> ToolSpec:
    return ToolSpec(name, "", {"type": "object", "properties": props})


def _reasons(tool: ToolSpec, args: dict[str, Any], *texts: str) -> dict[str, Reason]:
    return {f.path: f.reason for f in check_call(tool.name, args, GroundingContext(texts), tool)}


def test_a_value_that_restates_its_parameter_name_is_ungrounded_even_when_the_request_says_the_words() -> None:
    payroll = _spec("get_payroll_summary", payroll_vendor={"type": "string"})
    request = "Summarise this month's payroll from our payroll vendor."
    assert _reasons(payroll, {"payroll_vendor": "payroll vendor"}, request) == {"payroll_vendor": Reason.RESTATES_PARAMETER}
    assert _reasons(payroll, {"payroll_vendor": "Payroll_Vendors"}, request) == {"payroll_vendor": Reason.RESTATES_PARAMETER}
    assert _reasons(payroll, {"payroll_vendor": "Gusto"}, "Summarise payroll from Gusto.") == {}


def test_placeholders_and_description_copies_are_named_as_such() -> None:
    invoices = _spec("fetch_invoices", vendor={"type": "string", "description": "billing vendor name"},
                     period={"type": "string", "description": "month as YYYY-MM, or 'last_month'"})
    request = "Pull last month's invoices from Stripe."
    assert _reasons(invoices, {"vendor": "Stripe", "period": "last_month"}, request) == {}  # _ read as a space
    assert _reasons(invoices, {"vendor": "Stripe", "period": "YYYY-MM, or 'last_month'"}, request) == {
        "period": Reason.DESCRIPTION_ECHO}
    assert _reasons(invoices, {"vendor": "<vendor_id>", "period": "YYYY-MM"}, request) == {
        "vendor": Reason.PLACEHOLDER, "period": Reason.PLACEHOLDER}
    assert _reasons(invoices, {"vendor": "string", "period": "2026-11"}, request) == {
        "vendor": Reason.PLACEHOLDER, "period": Reason.NOT_IN_CONTEXT}


def test_an_enum_option_counts_only_where_the_context_supports_it() -> None:
    weather = _spec("get_weather", city={"type": "string"}, units={"type": "string", "enum": ["celsius", "fahrenheit"]})
    assert _reasons(weather, {"city": "Porto", "units": "celsius"}, "Weather in Porto, in Celsius please") == {}
    assert _reasons(weather, {"city": "Porto", "units": "celsius"}, "Weather in Porto?") == {
        "units": Reason.ENUM_UNSUPPORTED}


def test_numbers_match_whole_numbers_in_any_format_and_nested_leaves_are_checked() -> None:
    order = _spec("create_order", items={"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer"}}}}, total={"type": "number"})
    context = GroundingContext(["Order 3 of FLT-220 for a total of 1,064.50."])
    assert check_call("create_order", {"items": [{"sku": "FLT-220", "qty": 3}], "total": 1064.5}, context, order) == []
    found = check_call("create_order", {"items": [{"sku": "FLT-221", "qty": 5}], "total": 64}, context, order)
    assert [(f.path, f.reason) for f in found] == [("items[0].sku", Reason.NOT_IN_CONTEXT),
                                                   ("items[0].qty", Reason.NOT_IN_CONTEXT),
                                                   ("total", Reason.NOT_IN_CONTEXT)]
    assert fields_of(found) == ["create_order.items", "create_order.total"]
    assert found[0].describe() == 'create_order.items[0].sku="FLT-221" (not in the context)'


def test_the_common_columns_read_system_user_and_tool_turns_but_not_the_assistants_own() -> None:
    messages = (Message("system", "Home airport: LHR."), Message("user", "Fly me to Oslo."),
                Message("assistant", "Shall I book economy?"), Message("tool", '{"flight": "SK-802"}'))
    context = GroundingContext.of_messages(messages)
    calls = (ToolCall("book", '{}', {"origin": "LHR", "to": "Oslo", "flight": "SK-802", "cabin": "economy",
                                     "direct": True, "note": None}),
             ToolCall("book", "{oops", None, parse_error="not JSON"))
    findings, row = check_calls(calls, context)
    assert row == {"ungrounded_args": ["book.cabin"], "ungrounded_values": ['book.cabin="economy" (not in the context)'],
                   "all_args_grounded": False}
    assert [(f.field, f.reason) for f in findings] == [("book.cabin", Reason.NOT_IN_CONTEXT)]
    assert check_calls(calls[1:], context)[1]["all_args_grounded"] is None  # nothing readable: no verdict
    assert check_calls((), context)[1] == {"ungrounded_args": [], "ungrounded_values": [], "all_args_grounded": None}


def test_a_restated_name_the_context_gives_as_a_value_is_grounded() -> None:
    server = _spec("add_server", password={"type": "string"}, unit={"type": "string"})
    assert _reasons(server, {"password": "password"}, "The username is 'admin' and the password is 'password'.") == {}
    assert _reasons(server, {"unit": "units"}, "A base of 10 units and a height of 5 units.") == {}
    assert _reasons(server, {"password": "password"}, "Reset it, I forgot the password.") == {
        "password": Reason.RESTATES_PARAMETER}
    carrier = _spec("track", carrier={"type": "string"})
    assert _reasons(carrier, {"carrier": "carrier"}, "It went out with our usual carrier.") == {
        "carrier": Reason.RESTATES_PARAMETER}


def test_a_number_written_against_a_unit_is_still_a_whole_number() -> None:
    context = GroundingContext(["A wire of 5m and 0.01m², at 298K; 10个 burgers; the 18th century; 16x16 inches; 2026-12-04"])
    assert all(context.grounds(v) for v in (5, 0.01, 298, 10, 18, 16, "2026-12-04"))
    assert not any(context.grounds(v) for v in (1, 8, 4, 26, 202))  # no digits cut out of a longer number or a date


def test_propagation_reads_each_call_against_the_tool_results_before_it_and_not_the_harness_corruption() -> None:
    from runner.probes.propagation.probe import _grounding
    from runner.probes.propagation.toolsim import DOMAINS
    from runner.probes.propagation.trace import Step

    request = ["You help customers.", "Cancel the most recent order of customer C-17."]
    steps = [Step(0, "call", "", "cancel_order", "a", '{"order_id": "O-552"}'),  # before any result: invented
             Step(0, "call", "", "list_orders", "b", '{"customer_id": "C-17"}'),
             Step(0, "result", '{"orders": [{"id": "O-552"}]}', "list_orders", "b", ok=True),
             Step(1, "call", "", "get_order", "c", '{"order_id": "O-552"}'),  # from the result: grounded
             Step(1, "call", "", "list_orders", "d", '{"customer_id": "C-99"}',
                  injected='customer_id: "C-17" -> "C-99" (wrong_id)')]  # the harness's value: not read
    row = _grounding(steps, DOMAINS["orders"], request)
    assert row == {"ungrounded_args": ["cancel_order.order_id"],
                   "ungrounded_values": ['cancel_order.order_id="O-552" (not in the context)'],
                   "all_args_grounded": False}
    assert _grounding(steps[1:], DOMAINS["orders"], request)["all_args_grounded"] is True
    assert _grounding([], DOMAINS["orders"], request)["all_args_grounded"] is None


def test_a_contexts_remembered_verdicts_are_those_of_the_rule_per_schema_type_and_path() -> None:
    """A context remembers leaf verdicts; the memo must key on the tool's schema, the value's type and path."""
    messages = (Message("system", "You are helpful."), Message("user", "Weather in Porto? Use 1 decimal."))
    context = GroundingContext.of_messages(messages)
    assert GroundingContext.of_messages(messages) is context  # one context per distinct conversation text
    free = _spec("get_weather", units={"type": "string"}, decimals={"type": "integer"}, city={"type": "string"})
    enum = _spec("get_weather", units={"type": "string", "enum": ["celsius"]}, decimals={"type": "integer"},
                 city={"type": "string"})
    for _ in range(2):  # the second round is answered from the memo
        assert [f.reason for f in check_call("get_weather", {"units": "celsius"}, context, free)] == [Reason.NOT_IN_CONTEXT]
        assert [f.reason for f in check_call("get_weather", {"units": "celsius"}, context, enum)] == [Reason.ENUM_UNSUPPORTED]
        assert check_call("get_weather", {"decimals": 1}, context, free) == []
        assert check_call("get_weather", {"decimals": True}, context, free) == []  # True == 1, but says nothing
        assert [f.path for f in check_call("get_weather", {"decimals": 1.5}, context, free)] == ["decimals"]
        assert check_call("get_weather", {"city": "Porto"}, context, free) == []
        assert [f.path for f in check_call("get_weather", {"city": "Lisbon"}, context, free)] == ["city"]
