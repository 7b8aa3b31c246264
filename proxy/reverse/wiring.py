"""Builds the reverse direction for the configured upstream (docs/directions.md)."""

from __future__ import annotations

from config.settings import Settings
from proxy.reverse.front import ReverseFront
from proxy.reverse.upstream import ModernHttpCaller
from proxy.upstream.http_wire import client_info


def reverse_front(settings: Settings) -> ReverseFront:
    """Legacy HTTP sessions served by the bridge in front of `upstream.url`."""
    caller = ModernHttpCaller(settings.upstream, settings.front.request_timeout_s)
    return ReverseFront(settings, caller, client_info())


__all__ = ["reverse_front"]
