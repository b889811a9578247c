"""The simulated agent: deterministic, reads the request text, clusters by prompt."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from runner.core.seeding import permutation, uniform
from runner.core.types import ChatRequest, Message
from runner.probes.catalogue import load_catalogue
from runner.probes.misselection import DEFAULT_DECOY
from runner.sim import PERSONAS, SimProvider, persona_for_model
from runner.sim.reading import find_entity, read
from tests.conftest import CONFIGS

TOOLS = load_catalogue(CONFIGS / "misselection" / "tools.json")[0] + (DEFAULT_DECOY,)


def _ask(model: str, text: str, seed: int, tools=TOOLS) -> tuple:  # type: ignore[no-untyped-def]
    response = SimProvider().respond(ChatRequest(model, (Message("user", text),), tuple(tools), {}, seed))
    return response.text, tuple((c.name, c.raw_arguments) for c in response.tool_calls)


@pytest.mark.parametrize(("text", "state", "surface"), [
    ("Pull last month's invoices from our billing provider.", "unnamed", "our billing provider"),
    ("Pull last month's invoices from Vantrel Billing.", "unfamiliar", "Vantrel Billing"),
    ("Pull last month's invoices from Stripe.", "known", "Stripe"),
    ("Is Quorbis Mail having an outage right now?", "unfamiliar", "Quorbis Mail"),
    ("What time is it?", "none", None),
])
def test_entity_state_comes_from_the_words(text: str, state: str, surface: str | None) -> None:
    entity = find_entity(text)
    assert (entity.state, entity.surface) == (state, surface)


def test_reading_picks_the_specific_tool_and_finds_the_broad_one() -> None:
    r = read("Where is parcel 7731904562? It went out with FedEx.", TOOLS)
    assert r.specific == "get_shipment_status"
    assert r.broad == DEFAULT_DECOY.name


def test_same_request_and_seed_same_answer_any_instance() -> None:
    for seed in range(50):
        assert _ask("typical", "Pull last month's invoices from our billing provider.", seed) == \
            _ask("typical", "Pull last month's invoices from our billing provider.", seed)


def test_answers_are_independent_of_catalogue_order_except_position_effect() -> None:
    """Reordering the catalogue may only change the decision through the documented position boost."""
    text = "Pull last month's invoices from Stripe."
    for seed in range(30):
        perm = permutation(len(TOOLS), seed, 5)
        shuffled = [TOOLS[i] for i in perm]
        broad_late = [t for t in shuffled if t.name != DEFAULT_DECOY.name] + [DEFAULT_DECOY]
        baseline = [t for t in TOOLS if t.name != DEFAULT_DECOY.name] + [DEFAULT_DECOY]
        assert _ask("careful", text, seed, broad_late) == _ask("careful", text, seed, baseline)


def test_persona_names_and_variants() -> None:
    assert persona_for_model("sim-careful").name == "careful"
    assert persona_for_model("typical-b").name == "typical"
    with pytest.raises(ValueError, match="unknown sim persona"):
        persona_for_model("gpt-9")
    assert set(PERSONAS) >= {"careful", "typical", "reckless"}


def _rate(model: str, text: str, n: int = 400) -> float:
    hits = sum(DEFAULT_DECOY.name in [c[0] for c in _ask(model, text, seed)[1]] for seed in range(n))
    return hits / n


def test_rates_order_by_entity_state_and_persona() -> None:
    u = "Pull last month's invoices from our billing provider."
    k = "Pull last month's invoices from Stripe."
    for model in ("careful", "typical", "reckless"):
        assert _rate(model, u) > _rate(model, k)
    assert _rate("careful", u) < _rate("typical", u) < _rate("reckless", u)


def test_outcomes_cluster_by_prompt() -> None:
    """Per-prompt decoy rates of one persona vary far beyond binomial noise (the latent propensity)."""
    prompts = [f"Pull the {w} report from our {v} provider." for w in ("weekly", "monthly", "annual", "audit", "usage", "tax")
               for v in ("billing", "payments", "data")]
    n = 100  # 14x the binomial variance at 100 seeds a prompt (50x at 300): far beyond the 5x asked, a third the calls
    rates = np.array([_rate("typical", p, n) for p in prompts])
    binomial_var = rates.mean() * (1 - rates.mean()) / n
    assert rates.var() > 5 * binomial_var


def test_unknown_value_invented_at_persona_rate() -> None:
    """Under an unnamed referent the vendor argument is invented by reckless agents, left out by careful ones."""
    text = "Pull last month's invoices from our billing provider."

    def invented(model: str) -> float:
        n = hits = 0
        for seed in range(400):
            for name, raw in _ask(model, text, seed)[1]:
                if name == "fetch_invoices":
                    n += 1
                    hits += '"vendor"' in raw
        return hits / max(n, 1)

    assert invented("careful") < 0.2 < 0.6 < invented("reckless")


def test_uniform_and_permutation_are_well_behaved() -> None:
    u = np.array([uniform(12345, s) for s in range(20000)])
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    counts: dict[tuple, int] = {}
    for seed in range(6000):
        key = tuple(permutation(3, seed, 0))
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6 and min(counts.values()) > 850


def test_complete_is_the_async_face_of_respond() -> None:
    request = ChatRequest("typical", (Message("user", "Pull last month's invoices from Stripe."),), TOOLS, {}, 3)
    provider = SimProvider()
    assert asyncio.run(provider.complete(request)) == provider.respond(request)
