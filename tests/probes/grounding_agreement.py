"""The grounding rule against a hand-labelled sample of calls from the bundled sweeps.

``tests/probes/fixtures/grounding_labels.json`` holds 100 distinct tool calls the simulated agent made in
``configs/quickstart.yaml`` (misselection) and ``configs/negatives.yaml`` (negative), sampled with seed 34, each
labelled by hand — arguments only, before the rule's verdict was looked at — with the ``tool.arg`` fields nothing
in the request supports and why. Each call is replayed alone through its probe (a recorded response), so the
verdict compared is the probe's own ``ungrounded_args`` column.

    python -m tests.probes.grounding_agreement     # the figures, and every disagreement
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import runner
from runner.core.types import ChatResponse, ToolCall, TrialSpec
from runner.probes.base import Probe
from runner.providers.base import Agent
from tests.conftest import CONFIGS
from tests.helpers.fakes import Recorded

LABELS = Path(__file__).parent / "fixtures" / "grounding_labels.json"


@dataclass
class Agreement:
    calls: int = 0
    calls_agree: int = 0
    fields: int = 0
    fields_agree: int = 0
    # (label, rule) counts per call: True = all arguments grounded
    table: dict[tuple[bool, bool], int] = field(default_factory=dict)
    disagreements: list[dict[str, Any]] = field(default_factory=list)

    def kappa(self) -> float:
        n = self.calls
        p_o = self.calls_agree / n
        label_yes = sum(v for (lab, _), v in self.table.items() if lab) / n
        rule_yes = sum(v for (_, rule), v in self.table.items() if rule) / n
        p_e = label_yes * rule_yes + (1 - label_yes) * (1 - rule_yes)
        return (p_o - p_e) / (1 - p_e) if p_e < 1 else 1.0


def bundled_probes() -> dict[str, Probe]:
    return {p.kind: p for name in ("quickstart", "negatives") for p in runner.load_sweep(CONFIGS / f"{name}.yaml").probes}


def replay(probe: Probe, call: dict[str, Any]) -> dict[str, Any]:
    """The probe's outcome columns for a response that is this one call."""
    raw = json.dumps(call["arguments"])
    response = ChatResponse(text="", tool_calls=(ToolCall(call["tool"], raw, call["arguments"], "c0"),))
    spec = TrialSpec("s", "t", call["model"], probe.name, call["case_id"], call["condition"], call["run"], 7, 7)
    return dict(asyncio.run(probe.run(spec, Agent(Recorded(response), call["model"], {}, 7))))


def measure(probes: dict[str, Probe], calls: list[dict[str, Any]]) -> Agreement:
    out = Agreement()
    for call in calls:
        row = replay(probes[call["probe"]], call)
        rule = set(row["ungrounded_args"])
        label = set(call["ungrounded"])
        out.calls += 1
        out.calls_agree += (not rule) == (not label)
        out.table[(not label, not rule)] = out.table.get((not label, not rule), 0) + 1
        for arg in call["arguments"]:
            f = f"{call['tool']}.{arg}"
            out.fields += 1
            out.fields_agree += (f in rule) == (f in label)
        if rule != label:
            out.disagreements.append({"case": call["case_id"], "condition": call["condition"], "tool": call["tool"],
                                      "arguments": call["arguments"], "rule_only": sorted(rule - label),
                                      "label_only": sorted(label - rule), "values": row["ungrounded_values"],
                                      "limit": call.get("limit")})
    return out


def labelled_calls() -> list[dict[str, Any]]:
    return list(json.loads(LABELS.read_text())["calls"])


if __name__ == "__main__":
    fig = measure(bundled_probes(), labelled_calls())
    print(f"calls: {fig.calls_agree}/{fig.calls} agree on all_args_grounded ({fig.calls_agree / fig.calls:.0%}), "
          f"Cohen's kappa {fig.kappa():.2f}; (label, rule) grounded counts {fig.table}")
    print(f"fields: {fig.fields_agree}/{fig.fields} agree ({fig.fields_agree / fig.fields:.1%})")
    for d in fig.disagreements:
        print(" ", json.dumps(d, ensure_ascii=False))
