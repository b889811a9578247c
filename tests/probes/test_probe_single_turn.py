"""Every probe says itself whether it is single-turn (batch mode runs only those)."""

from __future__ import annotations

from runner.probes import PROBES


def test_every_probe_declares_single_turn() -> None:
    for kind, probe in PROBES.items():
        assert isinstance(vars(probe).get("single_turn"), bool), f"{kind} does not declare single_turn"
    assert {k for k, p in PROBES.items() if p.single_turn} == {"misselection", "negative", "phantom", "judge"}
    assert not PROBES["propagation"].single_turn
