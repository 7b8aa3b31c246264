"""The OpenTelemetry SDK's tracer provider from the standard `OTEL_*` variables
(proxy/observe/tracing.py
imports this module only when the SDK is installed and tracing is not turned off)."""

from __future__ import annotations

import atexit
from collections.abc import Mapping

import structlog
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

_log = structlog.get_logger("proxy.observe.tracing")


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter | None:
    protocol = env.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    try:
        if protocol.strip().lower() == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as Grpc,
            )

            exporter: SpanExporter = Grpc()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as Http,
            )

            exporter = Http()
    except ImportError:
        _log.warning(
            "tracing_exporter_missing",
            exporter="otlp",
            hint="pip install 'mrtr-bridge[otel]' (or the gRPC exporter for protocol grpc)",
        )
        return None
    return exporter


def provider_from_env(env: Mapping[str, str], exporters: list[str]) -> TracerProvider | None:
    """A provider exporting to `exporters` (`otlp`, `console`), or None when none can be made.
    The sampler comes from `OTEL_TRACES_SAMPLER`, the batching from `OTEL_BSP_*`."""
    made: list[SpanExporter] = []
    for name in exporters:
        if name == "otlp":
            exporter = _otlp_exporter(env)
            if exporter is not None:
                made.append(exporter)
        elif name == "console":
            made.append(ConsoleSpanExporter())
        else:
            _log.warning("tracing_exporter_unknown", exporter=name)
    if not made:
        return None
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "mrtr-bridge"}
    provider = TracerProvider(resource=Resource.create(attributes))
    for exporter in made:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)  # flush what is batched when the bridge exits
    return provider


__all__ = ["provider_from_env"]
