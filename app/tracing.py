"""OpenTelemetry tracing, configured from the standard OTEL_* variables.

- `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: no tracing.
- `OTEL_TRACES_EXPORTER`: comma list of `otlp` (OTLP over HTTP/protobuf) and `console`. When
  unset it is `otlp` if an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), else none: a server without a collector sends nothing.
- `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER(_ARG)` and the
  exporter's own variables are read by the SDK as usual.

Spans: a SERVER span per /v1/* request that continues an incoming `traceparent`; children
`decode`, `prepare`, `queue`, `finish`; and one `execute` span per batch on the executor thread,
child of the oldest sampled request it served and linked to every sampled request's span. A
request that is not sampled keeps no span at all (the middleware drops it): it starts no stage
spans and gives its batch no link.
"""
from __future__ import annotations

import logging
import os
from typing import Mapping

from opentelemetry import trace
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

log = logging.getLogger("omni.tracing")
INSTRUMENTATION = "system1-omni"


def _exporters(env: Mapping[str, str]) -> list[SpanExporter]:
    names = env.get("OTEL_TRACES_EXPORTER")
    if names is None:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        names = "otlp" if endpoint else "none"
    out: list[SpanExporter] = []
    for name in (n.strip().lower() for n in names.split(",")):
        if name in ("", "none"):
            continue
        if name == "otlp":
            protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            if protocol and protocol != "http/protobuf":
                log.warning("OTLP protocol %r is not supported here; using http/protobuf", protocol)
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            out.append(OTLPSpanExporter())
        elif name == "console":
            out.append(ConsoleSpanExporter())
        else:
            log.warning("unknown OTEL_TRACES_EXPORTER %r ignored", name)
    return out


def provider_from_env(env: Mapping[str, str] | None = None,
                      exporters: list[SpanExporter] | None = None) -> TracerProvider | None:
    """A TracerProvider with batch processors, or None when tracing is off."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = _exporters(env) if exporters is None else exporters
    if not exporters:
        return None
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "system1-omni"})
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class Tracing:
    """The app's tracer; a no-op one when tracing is off."""

    def __init__(self, provider: TracerProvider | None):
        self.provider = provider
        self.enabled = provider is not None
        self.tracer = provider.get_tracer(INSTRUMENTATION) if provider else trace.NoOpTracer()

    def request_span(self, name: str, headers: list[tuple[bytes, bytes]]):
        carrier = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers
                   if k.lower() in (b"traceparent", b"tracestate")}
        return self.tracer.start_span(name, context=extract(carrier), kind=trace.SpanKind.SERVER)

    def child(self, parent, name: str, start_time: int | None = None):
        return self.tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=start_time)

    def shutdown(self) -> None:
        if self.provider is not None:
            self.provider.force_flush()
            self.provider.shutdown()
