"""No behaviour change by accident: every outcome column of the bundled sweeps is pinned.

Each bundled sweep (configs/*.yaml) runs against the simulated agent into a temporary
directory; its rows, minus the columns that depend on the clock (``latency_ms``,
``finished_at``) or on the sweep's identity hash (``sweep_id``, ``trial_id``), and minus
the recorded exchange (``calls``, ``call_blobs``: what was asked and answered, not an
outcome; it holds each call's latency, and its blobs sit on whichever row a batch
carries them), are sorted and hashed. A change that alters what any probe measures changes a digest: if
the change is on purpose, update the digest here and list the changed counts in the
commit and the CHANGELOG.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

import runner

CONFIGS = Path(__file__).resolve().parent.parent / "configs"

#: sha256 of the sorted outcome columns, per bundled sweep (computed before the structural move)
DIGESTS = {
    # with the reply columns (empty_reply / unparsable_call / unknown_tool / calls_from_text) dropped, the digest
    # is the earlier acf37d39…611b6: no count changed when they came (the sim never sends an empty reply, and every
    # one of its questions asks under the shared rule of runner/probes/replies.py); 50 garbled calls are counted;
    # EARLIER holds the digest before the grounding columns
    "quickstart": "ca7e79b92283d48d118903b6d41b91a3d5191de1a8a4e5eb808b26a7db8e4af3",
    # the bfcl_passed / bfcl_category / bfcl_error columns are all null here (no BFCL case); with them dropped the
    # digest is the earlier c1f85eef…ab409; with empty_reply / calls_from_text (all false here) dropped too, the
    # earlier 3541df0f…c316: no action, asked or passed count changed under the shared asking rule;
    # + the grounding columns, `invented` strict, the narrow reading as `invented_forbidden`
    "negatives": "1e33ba8bf5bc956e74740142363e20a0745b64aadb70bd9ada9be7d0b9b403b1",
    # + call_fields / conversation (EARLIER, which drops them, is unchanged: no verdict moved)
    "phantom": "8fc43be42ab4f4d054de4814d990a1600f29c39397f6de4a9472ad5b55626c65",
    # + the grounding columns (EARLIER holds the digest before them)
    "propagation": "aa5e283a49abf41ef38e89092fafed8273e6cc2d71a1e92ab7c9c603c4761883",
}

#: the grounding columns were added on purpose: ``ungrounded_args`` / ``ungrounded_values`` / ``all_args_grounded``
#: (misselection, negative, propagation), ``expected_grounded`` (misselection), and negative's ``invented`` now the strict reading,
#: its earlier forbidden-token reading kept as ``invented_forbidden``. ``earlier_digest`` undoes exactly that (drops
#: the new columns, renames ``invented_forbidden`` back to ``invented``); the result must be the digest from before
#: the change, so no other outcome moved
EARLIER = {
    "quickstart": "97337ca18bdc17af5bd212a1756a4d0db7ef22a296fddb48a3e5a9e4506a10ab",
    "negatives": "55602fa0c8369a45d21e27071abc70895a2d137b703175a64825141fed9a2201",
    "phantom": "351615f3b15984330928cb88b357d7d9dd1415ac3a1ddabbb015511d7b0c1130",
    "propagation": "fca510d4cdd9f8add0e464f874b79e65c58b91cbeeb6a94e985ab7876ac5b64a",
}
_GROUNDING_COLUMNS = ("ungrounded_args", "ungrounded_values", "all_args_grounded", "expected_grounded")
#: phantom's ``call_fields`` / ``conversation`` (the units of the gold-free flag rates) came later; dropped with
#: the grounding columns, the phantom digest is the one from before, so no verdict moved
_FLAG_RATE_COLUMNS = ("call_fields", "conversation")

#: the recorded calls and the volatile columns are left out: the digests above do not depend on them
_VOLATILE = {"latency_ms", "finished_at", "sweep_id", "trial_id", "calls", "call_blobs"}
_ORDER = ["model", "probe", "case_id", "condition", "run"]


def outcome_digest(frame: pl.DataFrame) -> str:
    """sha256 over the rows' non-volatile columns, in a canonical row and column order."""
    cols = sorted(c for c in frame.columns if c not in _VOLATILE)
    rows = frame.sort(_ORDER).select(cols).to_dicts()
    text = json.dumps(rows, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def earlier_digest(frame: pl.DataFrame) -> str:
    """The digest of the columns as they were before the grounding columns (see ``EARLIER``)."""
    frame = frame.drop([c for c in _GROUNDING_COLUMNS + _FLAG_RATE_COLUMNS if c in frame.columns])
    if "invented_forbidden" in frame.columns:
        frame = frame.drop("invented").rename({"invented_forbidden": "invented"})
    return outcome_digest(frame)


def run_bundled(name: str, out: Path) -> pl.DataFrame:
    loaded = runner.load_sweep(CONFIGS / f"{name}.yaml")
    runner.run(loaded, out, quiet=True)
    return runner.load(out).collect()


#: the bundled propagation sweep (multi-turn, the whole configs/propagation.yaml) takes ~20 s on 2 idle cores: it is
#: pinned in the full suite (`pytest tests`, CI) and when this file is run; the fast subset pins the other three
_SLOW = {"propagation"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n for n in sorted(DIGESTS)])
def test_bundled_sweep_outcomes_unchanged(name: str, tmp_path: Path) -> None:
    frame = run_bundled(name, tmp_path / name)
    assert frame.height > 0
    assert earlier_digest(frame) == EARLIER[name], f"an outcome column of configs/{name}.yaml other than the grounding ones changed"
    assert outcome_digest(frame) == DIGESTS[name], f"outcome columns of configs/{name}.yaml changed"


if __name__ == "__main__":  # print the digests of the current code
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for sweep in sorted(DIGESTS):
            rows = run_bundled(sweep, Path(tmp) / sweep)
            print(f'    "{sweep}": "{outcome_digest(rows)}",  # earlier view {earlier_digest(rows)}', file=sys.stdout)
