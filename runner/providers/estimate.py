"""What a request will cost, guessed before it is sent: the limiter's token budget, the budget's reservation and
the cost estimate of ``validate`` read it. Apart from the retrying wrapper so that reading a sweep does not import
the limiter, the pacing and asyncio."""

from __future__ import annotations

from runner.core.types import ChatRequest

#: the output a request is assumed to take when it sets no cap
_DEFAULT_OUTPUT_ESTIMATE = 256


def estimate_tokens(request: ChatRequest) -> int:
    """A cheap upper-ish guess of what a request will cost: ~4 characters a token, plus its output cap."""
    return sum(estimate_usage(request))


def estimate_usage(request: ChatRequest) -> tuple[int, int]:
    """``estimate_tokens`` as (input, output) tokens, for pricing them apart (a batch priced before it is sent)."""
    chars = 0
    for m in request.messages:
        chars += len(m.content)
        for c in m.tool_calls:
            chars += len(c.name) + len(c.raw_arguments)
    for t in request.tools:
        chars += len(t.name) + len(t.description) + len(repr(t.parameters))
    params = request.params
    cap = params.get("max_tokens") or params.get("max_completion_tokens") or params.get("max_output_tokens")
    output = min(int(cap), 4096) if isinstance(cap, (int, float)) and cap > 0 else _DEFAULT_OUTPUT_ESTIMATE
    return chars // 4, output
