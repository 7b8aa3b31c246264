"""What operators see: structured logs, the access log, Prometheus metrics and OpenTelemetry
tracing."""
