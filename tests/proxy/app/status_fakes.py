"""Upstreams as the status page reads them (`proxy.app.status_facts.ShownUpstream`), with held-call
registries filled without a bridge: for the page's unit tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from config.settings import Settings
from proxy.calls.registry import HeldCallRegistry
from proxy.common.per_principal import PrincipalCounts, held_call_caps
from translators.held.machine import HeldCallState


@dataclass
class Shown:
    """An upstream with a registry and no pool, era tracker or readiness check."""

    name: str
    registry: HeldCallRegistry[Any] | None = None
    settings: Settings = field(default_factory=Settings)
    modern: None = None
    engine: None = None
    readiness: None = None
    pool: None = None

    @property
    def runtime(self) -> Any:
        return SimpleNamespace(registry=self.registry) if self.registry is not None else None


def held_registry(
    count: int, *, tools: int = 1, registry: HeldCallRegistry[Any] | None = None
) -> HeldCallRegistry[Any]:
    """`count` calls waiting for their clients (tools `tool-0`…), the last added the oldest."""
    if registry is None:
        registry = HeldCallRegistry(PrincipalCounts(held_call_caps(count + 1, count + 1)))
    now = time.monotonic()
    for index in range(count):
        machine = SimpleNamespace(round=1 + index % 3, state=HeldCallState.WAITING_CLIENT)
        registry.add(
            SimpleNamespace(  # what the page reads of a Call
                continuation_id=index.to_bytes(16, "big"),
                principal=f"{index:032x}",
                started=now - index,
                method="tools/call",
                name=f"tool-{index % tools}",
                machine=machine,
            )
        )
    return registry
