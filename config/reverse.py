"""Settings of the reverse direction: legacy clients served by the bridge in front of a
2026-07-28 upstream (docs/directions.md)."""

from __future__ import annotations

from pydantic import Field

from config.base import Frozen


class ReverseSettings(Frozen):
    """Legacy clients in front of a 2026-07-28 upstream: the sessions the bridge keeps for them
    and the pushes it sends them (docs/directions.md)."""

    push_timeout_s: float = Field(
        120.0,
        gt=0,
        description="longest a legacy client may take to answer a push (elicitation, sampling, "
        "roots) before the push is cancelled and its request fails",
    )
    max_sessions_per_principal: int = Field(
        64,
        ge=1,
        description="legacy sessions one principal keeps; one more closes its own least recently "
        "used (one with nothing in flight first)",
    )
    session_idle_s: float = Field(
        3600.0,
        gt=0,
        description="a legacy session unused (no request, no GET stream) this long is closed; "
        "until then no other principal's new session takes its place",
    )
