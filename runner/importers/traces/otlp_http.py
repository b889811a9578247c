"""The OTLP/HTTP trace export request, as the receiver gets it: a body in, the OTLP JSON shape out.

An OpenTelemetry SDK's exporter and a Collector's ``otlphttp`` exporter POST ``ExportTraceServiceRequest``s to
``/v1/traces``: protobuf (``application/x-protobuf``, the SDKs' default) or JSON (``application/json``),
either of them gzip-compressed (``Content-Encoding: gzip``, undone by aiohttp as the body is read). The body is turned into the dict that OTLP JSON
files parse to, so the one reader of spans (``runner.importers.traces.otlp``) reads both. Protobuf is decoded
with the official generated classes (``opentelemetry-proto``, the ``otlp`` extra): its JSON mapping writes ids
as base64, which that reader already decodes back to hex.

A body is bounded after decompression (aiohttp stops reading a gzip bomb at ``MAX_BODY_BYTES``); what cannot
be read is a ``BadExport`` carrying the HTTP status the OTLP/HTTP spec gives it (400: do not
retry, 413: too large, 415: a content type the receiver does not read).
"""

from __future__ import annotations

from typing import Any

import orjson

#: the largest export request read, compressed or not (the SDK's batch of 512 spans is a few MiB at most)
MAX_BODY_BYTES = 64 << 20

JSON_TYPE = "application/json"
PROTOBUF_TYPE = "application/x-protobuf"


class BadExport(ValueError):
    """An export request the receiver cannot read: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` header, without parameters, lower case."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def decode_export(data: bytes, content_type: str | None) -> dict[str, Any]:
    """The export request in ``data`` (the body, decompressed) as OTLP JSON's dict (``{"resourceSpans": [...]}``)."""
    if len(data) > MAX_BODY_BYTES:
        raise BadExport(413, f"the body is over {MAX_BODY_BYTES >> 20} MiB")
    kind = media_type(content_type)
    if kind == JSON_TYPE:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise BadExport(400, f"the body is not JSON: {str(exc)[:120]}") from None
        if not isinstance(value, dict):
            raise BadExport(400, f"an export request is a JSON object, got {type(value).__name__}")
        return value
    if kind == PROTOBUF_TYPE:
        request = _protobuf_classes()[0]()
        try:
            request.ParseFromString(data)
        except Exception as exc:  # protobuf's DecodeError, or a message nested past its recursion limit
            raise BadExport(400, f"the body is not an ExportTraceServiceRequest: {str(exc)[:120]}") from None
        from google.protobuf.json_format import MessageToDict

        return MessageToDict(request)
    raise BadExport(415, f"Content-Type {kind[:60]!r} is not read; send {PROTOBUF_TYPE} or {JSON_TYPE}")


def export_response(content_type: str | None, rejected: int = 0, message: str = "") -> tuple[bytes, str]:
    """The body of a successful answer, in the request's encoding: an ``ExportTraceServiceResponse``, with its
    ``partialSuccess`` when some spans were rejected (the exporter logs the message and does not retry)."""
    if media_type(content_type) == PROTOBUF_TYPE:
        response = _protobuf_classes()[1]()
        if rejected or message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return response.SerializeToString(), PROTOBUF_TYPE
    body: dict[str, Any] = {}
    if rejected or message:
        body["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
    return orjson.dumps(body), JSON_TYPE


def _protobuf_classes() -> tuple[Any, Any]:
    try:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )
    except ImportError:
        raise BadExport(415, "protobuf export requests need the otlp extra: pip install 'trialgrid[otlp]' "
                             "(or set the exporter's protocol to http/json)") from None
    return ExportTraceServiceRequest, ExportTraceServiceResponse
