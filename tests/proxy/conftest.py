"""Fixtures shared by the proxy tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import aiohttp
import pytest

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    """An aiohttp client session (the bridge's upstream side uses one like it)."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The bridge traces into the OpenTelemetry SDK's in-memory exporter for the test."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from proxy.observe import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider.get_tracer("test"))
    try:
        yield exporter
    finally:
        tracing.use(None)
