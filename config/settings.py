"""The bridge's settings: one frozen pydantic model, safe defaults (docs/decisions.md § 1)."""

from __future__ import annotations

import os
import re
from typing import Final, Literal

from pydantic import Field, PositiveInt, SecretStr, field_validator

from config.base import PUBLIC_URL, Frozen
from config.recovery import RecoverySettings
from config.replicas import ClusterSettings
from config.reverse import ReverseSettings
from config.status import StatusSettings
from config.tasks import TasksSettings
from config.upstream import UpstreamSettings as UpstreamSettings  # re-exported: its old home


class FrontSettings(Frozen):
    """The modern Streamable HTTP endpoint."""

    listen: str = Field("127.0.0.1:8080", description="HOST:PORT the modern endpoint binds to")
    path: str = Field("/mcp", description="URL path of the MCP endpoint")
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="largest accepted POST body (413 beyond)"
    )
    max_json_depth: int = Field(64, ge=4, description="deepest accepted JSON nesting")
    allowed_hosts: tuple[str, ...] = Field(
        ("127.0.0.1", "localhost", "[::1]", "::1"),
        description="Host header values accepted (DNS-rebinding protection); '*' accepts any",
    )
    allowed_origins: tuple[str, ...] = Field(
        (), description="extra Origin values accepted besides http(s)://<allowed host>[:port]"
    )
    sse_keepalive_s: float = Field(
        15.0, gt=0, description="SSE comment keep-alive interval on quiet streams"
    )
    shutdown_grace_s: float = Field(
        10.0,
        ge=0,
        description="on SIGTERM, the whole shutdown: attached requests finish, the rest is cut off",
    )
    request_timeout_s: float = Field(
        60.0, gt=0, description="longest a front request waits for the upstream before -32603"
    )
    max_header_line_bytes: int = Field(
        8190,
        ge=1024,
        description="longest request line or header name (aiohttp max_line_size); 400 beyond",
    )
    max_header_field_bytes: int = Field(
        8190, ge=1024, description="longest header value (aiohttp max_field_size); 400 beyond"
    )
    max_headers: int = Field(
        128, ge=16, description="most header lines in one request (aiohttp max_headers)"
    )
    ready_timeout_s: float = Field(
        2.0,
        gt=0,
        description="longest /readyz waits for an upstream check; past it, the last known state",
    )
    ready_requires: Literal["any", "all"] = Field(
        "any",
        description="/readyz answers 200 while any upstream is ready (one down never takes the "
        "others out of a load balancer), or only while all are",
    )
    public_url: str | None = Field(
        None,
        description="the MCP endpoint's URL as clients reach it (e.g. "
        "https://mcp.example.com/mcp), named in"
        " OAuth metadata and challenges; unset: http://<listen><path>",
    )
    legacy_clients: Literal["pass", "refuse"] = Field(
        "pass",
        description="legacy (initialize, Mcp-Session-Id) clients: relayed to the upstream as legacy"
        " sessions, or refused with an error naming the modern version",
    )
    max_legacy_sessions: int = Field(
        4096,
        ge=1,
        description="legacy client sessions at once, all principals: relayed ones, and apart "
        "those the bridge keeps in front of a modern upstream; when full, one idle for the session "
        "idle timeout or the opener's own oldest is evicted (a relayed one DELETEd upstream), "
        "never another principal's in use; else 503",
    )
    event_loop: Literal["auto", "asyncio", "uvloop"] = Field(
        "auto",
        description="event loop: auto takes uvloop when installed, else asyncio's; uvloop requires "
        "it; asyncio never uses it",
    )

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        if "://" in value or "/" in value:
            raise ValueError(
                "allowed: HOST:PORT, not a URL, e.g. 127.0.0.1:8080 "
                "(the endpoint's path is front.path, /mcp)"
            )
        host, sep, port = value.rpartition(":")
        if sep and not host and port.isdigit():  # ":9000": never all interfaces by default
            raise ValueError(
                f"allowed: HOST:PORT with the host: 127.0.0.1:{port} (this machine only) or "
                f"0.0.0.0:{port} (every interface)"
            )
        if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError("allowed: HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080")
        return value

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str | None) -> str | None:
        if value is not None and PUBLIC_URL.fullmatch(value) is None:
            raise ValueError(
                "public_url must be an absolute http(s) URL without credentials, query or fragment"
            )
        return value


class IdentitySettings(Frozen):
    """Who the caller is (docs/decisions.md § 8)."""

    principal: Literal["authorization", "header", "none"] = Field(
        "authorization",
        description="principal source: digest of Authorization, a trusted header, or none",
    )
    principal_header: str | None = Field(None, description="trusted header naming the principal")

    @field_validator("principal_header")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.lower() if value else value


class CacheSettings(Frozen):
    """Cache hints stamped on cacheable modern results (docs/decisions.md § 15)."""

    ttl_ms: int = Field(0, ge=0, description="ttlMs on discover, list and read results")
    scope: Literal["private", "public"] = Field(
        "private", description="cacheScope on those results"
    )


class HeldCallSettings(Frozen):
    """Held calls and requestState (docs/decisions.md §§ 4, 9)."""

    ttl_s: float = Field(
        600.0, gt=0, description="a held call not resumed within this is cancelled"
    )
    max_per_principal: int = Field(
        64,
        ge=1,
        description="held calls (asked for input, not ended) at once per principal, legacy "
        "clients' requests waiting for a push's answer (reverse) included; plain calls not counted",
    )
    max_total: int = Field(
        4096,
        ge=1,
        description="held calls at once, all principals, reverse requests waiting for a push's "
        "answer included; plain calls not counted",
    )
    max_rounds: int = Field(32, ge=1, description="input rounds one call may take")
    max_pushes_per_round: int = Field(
        64,
        ge=1,
        le=4096,
        description="requests for input (pushes) one upstream call may have waiting for the "
        "client at once, i.e. in one input round",
    )
    max_pushes_per_call: int = Field(
        1024,
        ge=1,
        le=1_000_000,
        description="requests for input (pushes) one upstream call may send in all",
    )
    max_input_responses: int = Field(
        64, ge=1, description="entries accepted in one request's inputResponses"
    )
    max_input_response_bytes: int = Field(
        524_288,
        ge=256,
        description="largest accepted inputResponses entry (its JSON in UTF-8 bytes)",
    )
    batch_quiet_ms: float = Field(
        50.0,
        ge=0,
        description="ceiling: a batch smaller than learned (or of a tool not seen yet) closes "
        "after this long without a push",
    )
    batch_max_ms: float = Field(
        250.0, ge=0, description="longest a batch stays open after its first push"
    )
    batch_sizes: dict[str, PositiveInt] = Field(
        default_factory=dict,
        description="pushes a tool sends together in each input round, when known in advance "
        "(tool name -> count); what the bridge learns replaces it round by round",
    )
    keys: dict[str, SecretStr] = Field(
        default_factory=dict, description="requestState keys by key id (base64url of 32 bytes)"
    )
    active_key: str | None = Field(None, description="key id that seals; defaults to the only key")
    aead: Literal["aes-256-gcm", "chacha20-poly1305"] = Field(
        "aes-256-gcm", description="requestState AEAD"
    )
    replica_id: str = Field(
        "r0",
        min_length=1,
        max_length=16,
        description="this replica's id, sealed into requestState; 'auto': a random id at each "
        "start (replicas)",
    )

    @field_validator("replica_id")
    @classmethod
    def _auto_replica_id(cls, value: str) -> str:
        return "r" + os.urandom(6).hex() if value == "auto" else value


class LogSettings(Frozen):
    """Logs: one line per event on stderr, JSON or console (docs/operations.md § Logs)."""

    level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")

    @field_validator("level", mode="before")
    @classmethod
    def _level_in_any_case(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value  # DEBUG, Debug: debug

    format: Literal["auto", "json", "console"] = Field(
        "auto", description="json; console on a TTY when auto"
    )
    access: bool = Field(
        True,
        description="one info line per front request (front_request_finished); false: debug level",
    )


UPSTREAM_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]*")
MAX_UPSTREAM_NAME: Final = 64
SERVERS_PATH: Final = "/servers"


def server_path(name: str) -> str:
    """Where the named upstream `name` is served."""
    return f"{SERVERS_PATH}/{name}/mcp"


class Settings(Frozen):
    front: FrontSettings = FrontSettings()
    upstream: UpstreamSettings = UpstreamSettings()
    # named upstreams, each served at /servers/NAME/mcp; each is `[upstream]` with its own table
    # over it (config/loader.py merges them); empty: the one unnamed `upstream` at `front.path`
    upstreams: dict[str, UpstreamSettings] = Field(
        default_factory=dict,
        description="named upstreams ([upstreams.NAME] tables over [upstream]), each served at "
        "/servers/NAME/mcp",
    )
    identity: IdentitySettings = IdentitySettings()
    cache: CacheSettings = CacheSettings()
    held: HeldCallSettings = HeldCallSettings()
    recovery: RecoverySettings = RecoverySettings()
    cluster: ClusterSettings = ClusterSettings()
    tasks: TasksSettings = TasksSettings()
    log: LogSettings = LogSettings()
    status: StatusSettings = StatusSettings()
    reverse: ReverseSettings = ReverseSettings()
    server_identity: Literal["upstream", "bridge"] = Field(
        "upstream", description="serverInfo reported to clients: the upstream's or the bridge's own"
    )

    @field_validator("upstreams")
    @classmethod
    def _upstream_names(cls, upstreams: dict[str, UpstreamSettings]) -> dict[str, UpstreamSettings]:
        for name in upstreams:
            if not UPSTREAM_NAME.fullmatch(name) or len(name) > MAX_UPSTREAM_NAME:
                raise ValueError(
                    f"upstream name {name[:MAX_UPSTREAM_NAME]!r} must be 1-{MAX_UPSTREAM_NAME} "
                    "lower-case letters, digits, '-' and '_', starting with a letter or digit"
                )
        return upstreams

    def units(self) -> list[tuple[str | None, Settings]]:
        """The upstreams these settings configure, each with the settings it runs with: these, with
        its own `[upstream]` and, for a named one, its own endpoint path (so everything that keys on
        `front.path`, OAuth pass-through's metadata among it, is per upstream). No named upstream:
        the one unnamed upstream at `front.path`."""
        if not self.upstreams:
            return [(None, self)]
        return [
            (
                name,
                self.model_copy(
                    update={
                        "upstream": upstream,
                        "upstreams": {},
                        "front": self.front.model_copy(update={"path": server_path(name)}),
                    }
                ),
            )
            for name, upstream in sorted(self.upstreams.items())
        ]
