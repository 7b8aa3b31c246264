"""Builds the reverse direction for the configured upstream (docs/directions.md)."""

from __future__ import annotations

from config.settings import Settings
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.front import ReverseFront
from proxy.upstream.http.wire import client_info


def reverse_front(settings: Settings, modern: ModernUpstream) -> ReverseFront:
    """Legacy HTTP sessions served by the bridge in front of the upstream `modern` tracks (a
    stdio upstream's process is shared with the modern relay)."""
    return ReverseFront(settings, modern.reverse_caller(), client_info())


__all__ = ["reverse_front"]
