"""Recovery of lost held calls: which calls may run again, and for how long (docs/operations.md
§ Recovery)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from config.base import Frozen


class RecoverySettings(Frozen):
    """Re-executing a call whose held call is gone (restart, lost replica, expiry);
    docs/operations.md."""

    reexecute: Literal["annotated", "allowlist", "off"] = Field(
        "annotated",
        description="which calls may run again: tools annotated readOnlyHint/idempotentHint (and"
        " prompts/get, resources/read), those matching recovery.tools, or none",
    )
    tools: tuple[str, ...] = Field(
        (), description="allowlist globs: a tool name, prompts/get:<name> or resources/read:<uri>"
    )
    grace_s: float = Field(
        3600.0,
        ge=0,
        description="a requestState still recovers up to this long after its held call's expiry",
    )
    max_answers_bytes: int = Field(
        4096,
        ge=0,
        le=16_384,
        description="earlier answers sealed into requestState (compressed); above it, "
        "recovery is not offered for that call",
    )


__all__ = ["RecoverySettings"]
