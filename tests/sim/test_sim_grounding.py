"""The sim's grounding behaviours: asking for missing values, padding, broken calls, auditor models."""

from __future__ import annotations

from runner.core.types import ChatRequest, Message, ToolSpec
from runner.providers import check_model
from runner.sim import SimProvider

TRACK = ToolSpec("get_shipment_status", "Track a parcel by its tracking number.", {
    "type": "object", "properties": {"tracking_number": {"type": "string"}, "carrier": {"type": "string"},
                                     "notify_email": {"type": "string"}}, "required": ["tracking_number"]})


def _responses(model: str, text: str, n: int = 300):
    sim = SimProvider()
    msgs = (Message("system", "Help."), Message("user", text))
    return [sim.respond(ChatRequest(model, msgs, (TRACK,), seed=s)) for s in range(n)]


def test_missing_identifier_careful_asks_reckless_invents() -> None:
    text = "Where is my parcel? It should have arrived on Tuesday."
    careful, reckless = _responses("careful", text), _responses("reckless", text)
    asks = lambda rs: sum(1 for r in rs if not r.tool_calls)  # noqa: E731
    assert asks(careful) > 2 * asks(reckless)
    invented = [c.arguments["tracking_number"] for r in reckless for c in r.tool_calls
                if c.arguments and "tracking_number" in c.arguments]
    assert invented and all(v.startswith("tracking_") for v in invented)
    assert any("tracking number" in r.text for r in careful if not r.tool_calls)


def test_stated_values_fill_optional_fields_padding_and_garbling_follow_persona_rates() -> None:
    rs = _responses("reckless", "Where is parcel 7731904562? It went out with FedEx.", 600)
    calls = [c for r in rs for c in r.tool_calls]
    parsed = [c for c in calls if c.arguments is not None]
    assert all(c.arguments["carrier"] == "FedEx" for c in parsed)  # stated optional value
    assert any("notify_email" in c.arguments for c in parsed)      # unrequested, schema-legal
    assert any(c.arguments is None and c.parse_error for c in calls)  # a broken call now and then
    again = _responses("reckless", "Where is parcel 7731904562? It went out with FedEx.", 600)
    assert [r.tool_calls for r in rs] == [r.tool_calls for r in again]  # deterministic from the seed


def test_auditor_model_strings_are_valid_sim_models() -> None:
    for model in ("auditor", "auditor-strict", "auditor-lenient", "auditor-flaky", "auditor-balanced"):
        check_model("sim", model)
