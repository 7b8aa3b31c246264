"""A clock a test moves by hand: the `clock` parameter of the bridge's time-driven rules
(proxy/common/clock.py), so a test advances time instead of sleeping."""

from __future__ import annotations


class FakeClock:
    """Seconds that pass only when the test says so (`advance`, or `now` set directly)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
