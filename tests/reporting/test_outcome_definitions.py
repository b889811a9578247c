"""Every outcome column a report shows as a rate has its definition in the HTML, in docs/probes.md's words."""

from __future__ import annotations

import re

import pytest

from runner.probes import PROBES
from runner.reporting.outcomes import definition
from tests.docs.docpages import page, table_after


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_every_rate_has_the_definition_docs_give_it(kind: str) -> None:
    meanings = {r[0].strip("`"): r[2] for r in table_after(page("probes.md"), f"`{kind}` outcome columns:")}
    for rate in PROBES[kind].rates:
        said = definition(kind, rate)
        assert said is not None, (kind, rate)
        docs = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", meanings[rate])  # a link reads as its text
        assert said == docs.replace("; BFCL)", ")"), (kind, rate, said, docs)
