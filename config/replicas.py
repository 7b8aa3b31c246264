"""Settings for more than one replica: the peer set (`[cluster]`) and recovering a call whose held
call is gone (`[recovery]`); docs/operations.md § Replicas and § Recovery."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from config.base import PUBLIC_URL, Frozen


class ClusterSettings(Frozen):
    """Replicas behind a load balancer: a retry reaching a replica other than its owner is forwarded
    to the owner (docs/operations.md § Replicas). Off while neither `peers` nor `peers_dns` is set.
    """

    advertise_url: str | None = Field(
        None,
        description="this replica's base URL as the other replicas reach it (e.g. "
        "http://10.0.0.5:8080)",
    )
    peers: tuple[str, ...] = Field(
        (), description="base URLs of every replica (this one may be listed too)"
    )
    peers_dns: str | None = Field(
        None,
        description="HOST:PORT of a DNS name resolving to every replica (headless Service); "
        "re-resolved",
    )
    refresh_s: float = Field(
        5.0, gt=0, description="how often the peer set is re-resolved and asked for ids"
    )
    connect_timeout_s: float = Field(
        2.0, gt=0, description="longest a forwarded retry waits to connect to its owner"
    )
    max_forwards: int = Field(
        256, ge=1, description="forwarded retries in flight at once from this replica"
    )
    proof_max_age_s: float = Field(
        30.0, gt=0, description="oldest accepted replica proof on a forwarded retry"
    )

    @property
    def enabled(self) -> bool:
        return bool(self.peers) or self.peers_dns is not None

    @field_validator("advertise_url")
    @classmethod
    def _check_advertise(cls, value: str | None) -> str | None:
        return None if value is None else _base_url(value)

    @field_validator("peers")
    @classmethod
    def _check_peers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(_base_url(url) for url in value))

    @field_validator("peers_dns")
    @classmethod
    def _check_dns(cls, value: str | None) -> str | None:
        if value is None:
            return None
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                "peers_dns must be HOST:PORT, e.g. bridge-peers.default.svc.cluster.local:8080"
            )
        return value


def _base_url(value: str) -> str:
    if PUBLIC_URL.fullmatch(value) is None or urlsplit(value).path not in ("", "/"):
        raise ValueError(
            f"{value!r} is not a base URL like http://10.0.0.5:8080 (no path, credentials or query)"
        )
    return value.rstrip("/")
