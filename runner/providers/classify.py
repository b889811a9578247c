"""Reading an HTTP failure: its error kind, how long to wait, and the remedy it names.

Both wire formats (OpenAI, Anthropic) answer errors the same way at the HTTP level
— a status code, rate-limit headers and a JSON body with a human message — so the
reading of those lives here, once, and each wire module only says where its body
keeps the message and the parameter name.

Kinds (see ``errors.ErrorKind``): 429 is rate-limited (unless the body says the
quota is exhausted, which waiting does not fix); 408, 409 and 5xx (including
Anthropic's 529 "overloaded") are transient; a 400/422 whose body names a parameter
is a rejected parameter, with the remedy parsed from the message when it says one —
unless it says the input is over the model's context (``context_length_exceeded``,
even with ``"param": "messages"``): that is ``context_length``, fatal for the trial;
every other 4xx (auth, not found, ...) is fatal.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from runner.core.types import ChatResponse
from runner.providers.errors import ErrorKind, ProviderError, Remedy

# ---------------------------------------------------------------- retry-after


def retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from the most explicit header present.

    Order: ``retry-after-ms`` (OpenAI, float milliseconds), ``Retry-After`` (seconds or
    an HTTP date), then the vendor rate-limit headers for whichever budget is
    exhausted: ``x-ratelimit-reset-{requests,tokens}`` (OpenAI durations such as
    ``1m6.5s`` or ``20ms``) and ``anthropic-ratelimit-*-reset`` (RFC 3339 times).
    ``headers`` must be case-insensitive (httpx and aiohttp headers are).
    """
    now = time.time() if now is None else now
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            seconds = float(value) / 1000.0
        except ValueError:
            pass
        else:
            if not math.isnan(seconds):
                return max(0.0, seconds)
    value = headers.get("retry-after")
    if value is not None:
        parsed = _seconds_or_date(value, now)
        if parsed is not None:
            return parsed
    waits: list[float] = []
    for budget in ("requests", "tokens"):
        if _exhausted(headers.get(f"x-ratelimit-remaining-{budget}")):
            reset = parse_duration(headers.get(f"x-ratelimit-reset-{budget}", ""))
            if reset is not None:
                waits.append(reset)
    for budget in ("requests", "tokens", "input-tokens", "output-tokens"):
        if _exhausted(headers.get(f"anthropic-ratelimit-{budget}-remaining")):
            reset = parse_rfc3339_wait(headers.get(f"anthropic-ratelimit-{budget}-reset", ""), now)
            if reset is not None:
                waits.append(reset)
    return max(waits) if waits else None


def _exhausted(remaining: str | None) -> bool:
    if remaining is None:
        return False
    try:
        return float(remaining) <= 0
    except ValueError:
        return False


def _seconds_or_date(value: str, now: float) -> float | None:
    """Seconds from a ``Retry-After`` (a number, or an HTTP date): never negative, never NaN (no wait at all);
    a wait past any bound (``1e400``, a date in 2100) stays as large as it is, for the retry loop to refuse."""
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - now
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return None if math.isnan(seconds) else max(0.0, seconds)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float | None:
    """OpenAI's reset durations: ``6m0s``, ``1.5s``, ``20ms``, ``1h2m``."""
    text = text.strip()
    if not text:
        return None
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            return None
        pos = match.end()
        number, unit = float(match.group(1)), match.group(2)
        total += number * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    if pos != len(text):
        try:
            return max(0.0, float(text))
        except ValueError:
            return None
    return total


def parse_rfc3339_wait(text: str, now: float) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, when.timestamp() - now)


# ---------------------------------------------------------------- remedies

_Q = r"[\'\"`‘’“”]"
_NAME = r"([A-Za-z_][A-Za-z0-9_.\-]*)"
_SET = re.compile(rf"\b[Ss]et\s+{_Q}?{_NAME}{_Q}?\s+to\s+({_Q}[^\'\"`‘’“”]*{_Q}|[^\s,;]+?)(?=[\s,;]|\.?$|\.\s)")
_ONLY_DEFAULT = re.compile(r"[Oo]nly the default \(([^)]*)\) value is supported")
_USE_INSTEAD = re.compile(rf"\b[Uu]se\s+{_Q}{_NAME}{_Q}\s+instead")
_UNSUPPORTED_VALUE = re.compile(rf"[Uu]nsupported value:\s*{_Q}{_NAME}{_Q}")
_NAMES_PARAM = (
    re.compile(rf"[Uu]nsupported parameter:\s*{_Q}{_NAME}{_Q}"),
    re.compile(rf"{_Q}{_NAME}{_Q}\s+is not supported"),
    re.compile(rf"[Uu]nrecognized request arguments? supplied:\s*{_NAME}"),
    re.compile(rf"^{_Q}?{_NAME}{_Q}?:\s*Extra inputs are not permitted"),
    # pydantic-style "field: message" (Anthropic's validation errors)
    re.compile(rf"^{_Q}?{_NAME}{_Q}?:\s*(?:Input should|Field required|Value error|Invalid)"),
    re.compile(rf"{_Q}{_NAME}{_Q}\s+does not support"),
    # Google's JSON mapping: 'Invalid JSON payload received. Unknown name "topK" at 'generation_config': ...'
    re.compile(rf"[Uu]nknown name {_Q}{_NAME}{_Q}"),
    # a model's own validation on Bedrock: 'Malformed input request: #: extraneous key [top_k] is not permitted'
    re.compile(r"extraneous key \[([A-Za-z_][A-Za-z0-9_.\-]*)\] is not permitted"),
)


def _parse_value(text: str) -> Any:
    """A remedy value as written in a message: ``'none'`` → ``"none"``, ``1`` → ``1``."""
    text = text.strip().rstrip(".")
    if len(text) >= 2 and text[0] in "'\"`‘“" and text[-1] in "'\"`’”":
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _param_named(message: str, param_hint: str | None = None) -> str | None:
    """The request parameter a rejection message is about, if it names one."""
    if param_hint:
        return param_hint
    for pattern in _NAMES_PARAM:
        match = pattern.search(message)
        if match:
            return match.group(1)
    return None


def parse_remedy(message: str, param_hint: str | None = None) -> Remedy | None:
    """What to do about a rejected parameter, read from the server's message.

    - set: "set P to 'V'" (also for an unsupported *value*), or OpenAI's
      "Unsupported value: 'P' ... Only the default (V) value is supported"
    - rename: "... 'X' ... Use 'Y' instead"
    - drop: "Unsupported parameter: 'X'", "'X' is not supported with this model",
      "X: Extra inputs are not permitted", "Unrecognized request argument supplied: X", Google's
      'Unknown name "X" at ...: Cannot find field.', a Bedrock model's "extraneous key [X] is not permitted"
    """
    match = _SET.search(message)
    if match:
        return Remedy("set", match.group(1), value=_parse_value(match.group(2)))
    default = _ONLY_DEFAULT.search(message)
    if default:
        value_of = _UNSUPPORTED_VALUE.search(message)
        param = value_of.group(1) if value_of else _param_named(message, param_hint)
        if param:
            return Remedy("set", param, value=_parse_value(default.group(1)))
    if _UNSUPPORTED_VALUE.search(message):
        return None  # a value is refused but the message does not say which one to use
    param = _param_named(message, param_hint)
    if param is None:
        return None
    instead = _USE_INSTEAD.search(message)
    if instead and instead.group(1) != param:
        return Remedy("rename", param, new_name=instead.group(1))
    if re.search(r"not supported|[Uu]nsupported parameter|Extra inputs are not permitted|[Uu]nrecognized request argument"
                 r"|[Uu]nknown name .* Cannot find field|extraneous key .* is not permitted", message):
        return Remedy("drop", param)
    return None


# ---------------------------------------------------------------- status → kind


#: what servers say when the input is over the context window: OpenAI's code, llama.cpp's, vLLM's and Ollama's words
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"})
_CONTEXT_RE = re.compile(r"context[_ ]length|context window|maximum context|exceeds? (?:the )?(?:available )?context"
                         r"|n_ctx|too many tokens|prompt is too long|input is too long", re.IGNORECASE)


def is_context_overflow(message: str, code: str | None) -> bool:
    """The error says the input does not fit the model's context (a size problem, not a bad parameter)."""
    return (code or "") in _CONTEXT_CODES or _CONTEXT_RE.search(message or "") is not None


#: error codes of a prompt the vendor's content filter refused (Azure OpenAI's, for the prompt and for a jailbreak)
_FILTER_CODES = frozenset({"content_filter", "ResponsibleAIPolicyViolation"})
#: the ``finish_reason`` of an answer the content filter cut (Chat Completions, on Azure and OpenAI)
FILTERED = "content_filter"


def filtered(response: ChatResponse, where: str = "") -> ProviderError | None:
    """The error for an answer the vendor's content filter cut (``finish_reason`` ``content_filter``): whatever
    text it kept is not the model's answer. None for any other answer."""
    if response.finish_reason != FILTERED:
        return None
    return ProviderError(ErrorKind.CONTENT_FILTER, f"the vendor's content filter cut the answer{where} "
                         f"({len(response.text)} characters and {len(response.tool_calls)} tool calls kept): "
                         "not a model answer, not retried")


def classify_http(
    status: int,
    headers: Mapping[str, str],
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    where: str = "",
    retry_after: float | None = None,
) -> ProviderError:
    """The ``ProviderError`` for a non-2xx answer. ``message`` must already be scrubbed; ``retry_after`` is a wait
    the body asked for, used when no header names one."""
    wait = retry_after_s(headers)
    if wait is None:
        wait = retry_after
    text = f"HTTP {status}{where}: {message}" if message else f"HTTP {status}{where}"
    if status == 429:
        if code == "insufficient_quota" or "quota" in (code or ""):
            return ProviderError(ErrorKind.FATAL, text + " (quota exhausted: waiting will not help)", status_code=status)
        return ProviderError(ErrorKind.RATE_LIMITED, text, retry_after_s=wait, status_code=status)
    if status in (408, 409) or status >= 500:
        return ProviderError(ErrorKind.TRANSIENT, text, retry_after_s=wait, status_code=status)
    if status == 400 and code in _FILTER_CODES:
        return ProviderError(ErrorKind.CONTENT_FILTER, text + " (the vendor's content filter refused the prompt: "
                             "not a model answer, not retried)", status_code=status)
    if status in (400, 413, 422) and is_context_overflow(message, code):
        return ProviderError(ErrorKind.CONTEXT_LENGTH, text + " (the request is longer than the model's context: "
                             "shorten the case or raise the server's context size)", status_code=status, param=param)
    if status in (400, 422):
        named = _param_named(message, param)
        if named is not None:
            remedy = parse_remedy(message, param)
            return ProviderError(ErrorKind.REJECTED_PARAM, text, remedy=remedy, status_code=status, param=named)
    return ProviderError(ErrorKind.FATAL, text, status_code=status)
