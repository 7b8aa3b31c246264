"""Builds the reverse direction for the configured upstream (docs/directions.md)."""

from __future__ import annotations

from config.settings import Settings
from proxy.common.faults import Observe
from proxy.common.per_principal import PrincipalCounts
from proxy.passthrough.modern_upstream import ModernUpstream
from proxy.reverse.front import ReverseFront
from proxy.upstream.http.wire import client_info


def reverse_front(
    settings: Settings,
    modern: ModernUpstream,
    held: PrincipalCounts,
    observe: Observe | None = None,
) -> ReverseFront:
    """Legacy HTTP sessions served by the bridge in front of the upstream `modern` tracks (a
    stdio upstream's process is shared with the modern relay); `held` counts the calls waiting for
    their client's input (with the held calls of the other direction), `observe` hears of
    refusals."""
    return ReverseFront(settings, modern.reverse_caller(), client_info(), held, observe)


__all__ = ["reverse_front"]
