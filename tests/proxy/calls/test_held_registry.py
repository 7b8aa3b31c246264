"""The held-call caps count held calls only (issue 16, defect 3): a call is counted from its first
InputRequiredResult until it ends; during shutdown no call may become held."""

from __future__ import annotations

from dataclasses import dataclass, field
from os import urandom
from typing import Any, cast

import pytest

from proxy.calls.call import Call
from proxy.calls.registry import HeldCallRegistry
from proxy.common.per_principal import PrincipalCounts, held_call_caps
from translators.wire.errors import CapacityExceeded, ClientLimitExceeded, ShuttingDown


@dataclass
class FakeDriver:
    """What the registry reads of a driver."""

    principal: str
    continuation_id: bytes = field(default_factory=lambda: urandom(16))


def driver(principal: str) -> Call:
    return cast(Call, FakeDriver(principal))


def limit_of(caught: pytest.ExceptionInfo[Any]) -> str:
    return str(caught.value.data["limit"])


def test_only_admitted_calls_count_against_the_caps() -> None:
    """Calls in progress that never asked for input are not counted; held ones are, once each."""
    registry = HeldCallRegistry(PrincipalCounts(held_call_caps(2, 3)))
    plain = [driver("alice") for _ in range(10)]
    for call in plain:
        registry.add(call)
    first, second = driver("alice"), driver("alice")
    for call in (first, second, first):  # admitting the same call twice counts it once
        registry.add(call)
        registry.admit_held(call)
    with pytest.raises(ClientLimitExceeded) as caught:  # the caller's own cap: its fault
        registry.admit_held(driver("alice"))
    assert limit_of(caught) == "held.max_per_principal"
    registry.admit_held(driver("bob"))
    with pytest.raises(CapacityExceeded) as caught:  # the bridge is full: not the caller's fault
        registry.admit_held(driver("carol"))
    assert limit_of(caught) == "held.max_total"
    registry.remove(first)
    registry.remove(plain[0])  # never held: frees nothing
    registry.admit_held(driver("alice"))
    assert len(registry) == 10  # calls in progress: 9 plain and the second held one


def test_no_call_becomes_held_during_shutdown() -> None:
    registry = HeldCallRegistry(PrincipalCounts(held_call_caps(2, 3)))
    registry.closing = True
    with pytest.raises(ShuttingDown):
        registry.admit_held(driver("alice"))
