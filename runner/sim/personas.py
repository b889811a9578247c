"""Personas of the simulated agent: how often it guesses, asks, or reaches wide.

Rates are per *entity state* of the request (see ``reading.py``): ``known`` (a
vendor it has heard of), ``unfamiliar`` (a proper name it has not), ``unnamed``
(a referent like "our billing provider"), ``none`` (no external entity needed).
Each prompt gets a latent logit shift drawn from N(0, sigma) seeded by the prompt
text, so some prompts fire far more often than others — the clustering that real
models show and that trialgrid's statistics are built for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

_STATES = ("known", "unfamiliar", "unnamed", "none")


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    summary: str
    #: P(call the broad inspection tool) by entity state, before the prompt's shift
    reach_wide: Mapping[str, float]
    #: P(ask the user instead of acting | did not reach wide), by entity state
    ask: Mapping[str, float]
    #: P(after reaching wide, also call the specific tool in the same turn)
    chain: float
    #: P(fill a required argument it cannot ground with an invented value)
    invent: float
    #: P(call a plausible but wrong specific tool)
    off_target: float
    #: sd of the per-prompt logit shift (prompt-level heterogeneity)
    sigma: float
    #: odds multiplier on reaching wide when the broad tool is among the first three listed
    position_boost: float
    #: P(ask instead of calling when a required identifier, contact, time zone or confirmation
    #: is missing from the request); entity referents are governed by ``ask`` above
    ask_missing: float = 0.0
    #: P(per optional argument) of adding it, schema-legal but unrequested
    pad: float = 0.0
    #: P(a tool call's argument JSON comes out broken)
    garble: float = 0.0


def _rates(known: float, unfamiliar: float, unnamed: float, none: float) -> Mapping[str, float]:
    return MappingProxyType({"known": known, "unfamiliar": unfamiliar, "unnamed": unnamed, "none": none})


PERSONAS: Mapping[str, Persona] = MappingProxyType({
    p.name: p
    for p in (
        Persona("careful", "asks when it cannot resolve an entity; rarely guesses",
                reach_wide=_rates(0.01, 0.02, 0.05, 0.01), ask=_rates(0.02, 0.30, 0.75, 0.02),
                chain=0.10, invent=0.05, off_target=0.01, sigma=1.0, position_boost=1.2,
                ask_missing=0.85, pad=0.03, garble=0.0),
        Persona("typical", "acts when it can; sometimes inspects broadly or guesses under an unnamed referent",
                reach_wide=_rates(0.02, 0.07, 0.20, 0.02), ask=_rates(0.02, 0.15, 0.55, 0.02),
                chain=0.30, invent=0.35, off_target=0.03, sigma=1.3, position_boost=1.3,
                ask_missing=0.45, pad=0.15, garble=0.01),
        Persona("reckless", "never wants to ask; reaches for whatever tool might know, invents what is missing",
                reach_wide=_rates(0.05, 0.25, 0.45, 0.04), ask=_rates(0.00, 0.02, 0.06, 0.00),
                chain=0.50, invent=0.85, off_target=0.06, sigma=1.5, position_boost=1.5,
                ask_missing=0.08, pad=0.35, garble=0.04),
    )
})


_BY_MODEL: dict[str, Persona] = {}


def persona_for_model(model: str) -> Persona:
    """The persona named by a sim model string: ``typical``, ``sim-careful``, ``reckless-b``…

    Tokens are split on ``-_:/@.``; the first that names a persona wins, and the whole
    string still seeds the per-prompt propensities, so ``typical-a`` and ``typical-b``
    are two different models with the same temperament.
    """
    persona = _BY_MODEL.get(model)
    if persona is not None:
        return persona
    tokens = _split(model)
    for token in tokens:
        if token in PERSONAS:
            _BY_MODEL[model] = PERSONAS[token]
            return PERSONAS[token]
    # an auditor persona (``auditor-strict``) is a model too: when handed tools it acts
    # with the agent temperament its auditor persona names
    from runner.sim.auditor import AUDITORS, auditor_for_model

    auditor = auditor_for_model(model)
    if auditor is not None:
        _BY_MODEL[model] = PERSONAS[auditor.agent]
        return _BY_MODEL[model]
    raise ValueError(f"unknown sim persona in model {model!r}: expected one of {', '.join(PERSONAS)} "
                     f"(agents) or {', '.join(AUDITORS)} (auditors)")


def _split(model: str) -> list[str]:
    out, cur = [], ""
    for ch in model.lower():
        if ch in "-_:/@.":
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out
