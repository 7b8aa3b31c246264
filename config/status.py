"""Settings of the status page (`[status]`): who may read `GET /status` and `GET /status.json`
(docs/operations.md § Status page)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from config.base import Frozen

MIN_ADMIN_TOKEN_CHARS = 16


class StatusSettings(Frozen):
    """The status page is off the public front: served to loopback peers (`loopback`) and to a
    request bearing `admin_token`; anyone else gets 403."""

    loopback: bool = Field(
        True,
        description="serve the status page to loopback peers without a token (turn off when a "
        "proxy on the same host forwards public traffic)",
    )
    admin_token: SecretStr | None = Field(
        None,
        description="a bearer token that opens the status page from anywhere (Authorization: "
        "Bearer <token>); a secret: environment or file, never a flag",
    )

    snapshot_max_age_s: float = Field(
        1.0,
        ge=0,
        description="how old the page may be: it is built at most once in this many seconds, "
        "whoever polls (0: for every request, exact to the moment but paid by every poller)",
    )

    @field_validator("admin_token")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < MIN_ADMIN_TOKEN_CHARS:
            raise ValueError(f"admin_token must be at least {MIN_ADMIN_TOKEN_CHARS} characters")
        return value


__all__ = ["MIN_ADMIN_TOKEN_CHARS", "StatusSettings"]
