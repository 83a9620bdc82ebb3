"""OpenTelemetry tracing, configured from the standard OTEL_* variables.

- `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: no tracing.
- `OTEL_TRACES_EXPORTER`: comma list of `otlp` (OTLP over HTTP/protobuf) and `console`. When
  unset it is `otlp` if an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
  `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), else none: a server without a collector sends nothing.
- The service name is `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`,
  else `system1-omni`; the resource's other attributes come from `OTEL_RESOURCE_ATTRIBUTES`.
- `OTEL_TRACES_SAMPLER(_ARG)` name the sampler as the SDK reads them (its built-in samplers);
  the exporter's own variables are read by the SDK as usual.

Spans: a SERVER span per /v1/* request that continues an incoming `traceparent`; children
`decode`, `prepare`, `queue`, `finish`; and one `execute` span per batch on the executor thread,
child of the oldest sampled request it served and linked to every sampled request's span. A
request that is not sampled keeps no span at all: it starts no stage spans and gives its batch no
link, and under a trace-id ratio sampler with no incoming traceparent it is decided before the
SDK is called (`Tracing.request_span`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from urllib.parse import unquote

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagate import extract
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased

log = logging.getLogger("omni.tracing")
INSTRUMENTATION = "system1-omni"
SERVICE_NAME = "system1-omni"


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


def provider_from_env(
    env: Mapping[str, str] | None = None, exporters: list[SpanExporter] | None = None
) -> TracerProvider | None:
    """A TracerProvider with batch processors, or None when tracing is off."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = _exporters(env) if exporters is None else exporters
    if not exporters:
        return None
    provider = TracerProvider(
        resource=Resource.create(resource_attributes(env)), sampler=sampler_from_env(env), id_generator=StagedIds()
    )
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def resource_attributes(env: Mapping[str, str]) -> dict[str, str]:
    """`OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`, values percent-encoded) with the service name
    by OpenTelemetry's precedence: `OTEL_SERVICE_NAME`, then the attributes' `service.name`,
    then this server's default."""
    attributes: dict[str, str] = {}
    for item in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            attributes[key.strip()] = unquote(value.strip())
    name = env.get("OTEL_SERVICE_NAME", "").strip() or attributes.get("service.name") or SERVICE_NAME
    return {**attributes, "service.name": name}


class RootedParentBased(ParentBased):
    """The SDK's ParentBased, keeping its root sampler (`root`) where the request span reads it."""

    def __init__(self, root: Sampler) -> None:
        super().__init__(root)
        self.root = root


def sampler_from_env(env: Mapping[str, str]) -> Sampler:
    """The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name, read as the SDK reads
    them: its built-in names, `parentbased_always_on` by default and for a name it does not know,
    a ratio of 1.0 where the argument is not one."""
    name = env.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip().lower()
    parent_based, _, root_name = name.rpartition("parentbased_")
    if parent_based or root_name not in ("always_on", "always_off", "traceidratio"):
        log.warning("unknown OTEL_TRACES_SAMPLER %r; using parentbased_always_on", name)
        name, root_name = "parentbased_always_on", "always_on"
    if root_name == "traceidratio":
        try:
            root: Sampler = TraceIdRatioBased(float(env.get("OTEL_TRACES_SAMPLER_ARG", "1.0")))
        except ValueError:
            log.warning(
                "OTEL_TRACES_SAMPLER_ARG %r is not a ratio in [0, 1]; using 1.0", env.get("OTEL_TRACES_SAMPLER_ARG")
            )
            root = TraceIdRatioBased(1.0)
    else:
        root = ALWAYS_ON if root_name == "always_on" else ALWAYS_OFF
    return RootedParentBased(root) if name.startswith("parentbased_") else root


class StagedIds(RandomIdGenerator):
    """Random ids, except that the next trace id can be drawn ahead and set in `staged`: the
    request span draws it, makes the ratio sampler's own decision on it, and only a sampled
    request goes on to the SDK, whose sampler then decides the same on the same id."""

    staged: int | None = None

    def generate_trace_id(self) -> int:
        if self.staged is not None:
            trace_id, self.staged = self.staged, None
            return trace_id
        return super().generate_trace_id()


def root_bound(sampler: Sampler) -> int | None:
    """The trace-id bound under which `sampler` samples a span with no parent (the low 64 bits
    of its trace id below it), when that is all it looks at; else None (a ParentBased other
    than RootedParentBased keeps its root to itself)."""
    if isinstance(sampler, RootedParentBased):
        sampler = sampler.root
    if isinstance(sampler, TraceIdRatioBased):
        return sampler.bound
    if sampler is ALWAYS_OFF:
        return 0
    return None


_NO_PARENT = Context()
_TRACE_ID_LOW = TraceIdRatioBased.TRACE_ID_LIMIT


class Tracing:
    """The app's tracer; a no-op one when tracing is off."""

    def __init__(self, provider: TracerProvider | None):
        self.provider = provider
        self.enabled = provider is not None
        self.tracer = provider.get_tracer(INSTRUMENTATION) if provider else trace.NoOpTracer()
        ids = getattr(provider, "id_generator", None)
        self._ids = ids if isinstance(ids, StagedIds) else None
        self._bound = root_bound(provider.sampler) if provider is not None and self._ids is not None else None

    def request_span(self, name: str, headers: Mapping[str, str]) -> trace.Span | None:
        """The request's SERVER span, continuing an incoming `traceparent`; None when it is not
        sampled. A request with no parent under a ratio sampler (the usual setting) is decided
        here, on a trace id drawn as the SDK would draw it, and an unsampled one never reaches
        the SDK, since creating and dropping a span costs the loop more than the rest of
        tracing's per-request work at low sampling ratios."""
        carrier = {k: headers.get(k) for k in ("traceparent", "tracestate") if k in headers}
        ids, bound = self._ids, self._bound  # a bound only where the ids are staged
        if not carrier and ids is not None and bound is not None:
            trace_id = ids.generate_trace_id()
            if trace_id & _TRACE_ID_LOW >= bound:
                return None
            ids.staged = trace_id
            try:
                span = self.tracer.start_span(name, context=_NO_PARENT, kind=trace.SpanKind.SERVER)
            finally:
                ids.staged = None  # never left for another span, whatever start_span did
        else:
            span = self.tracer.start_span(name, context=extract(carrier), kind=trace.SpanKind.SERVER)
        return span if span.is_recording() else None

    def child(self, parent: trace.Span, name: str, start_time: int | None = None) -> trace.Span:
        return self.tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=start_time)

    def shutdown(self) -> None:
        if self.provider is not None:
            self.provider.force_flush()
            self.provider.shutdown()
