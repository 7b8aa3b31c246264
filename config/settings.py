"""The bridge's settings: one frozen pydantic model, safe defaults (docs/decisions.md § 1)."""

from __future__ import annotations

import os
import re
from typing import Final, Literal
from urllib.parse import urlsplit

from pydantic import Field, PositiveInt, SecretStr, field_validator

from config.base import PUBLIC_URL, Frozen
from config.recovery import RecoverySettings
from config.replicas import ClusterSettings
from config.reverse import ReverseSettings
from config.status import StatusSettings
from config.tasks import TasksSettings

# A header value the bridge sends upstream (Authorization, upstream.headers): visible ASCII and
# spaces, nothing that could end the header.
_HEADER_VALUE: Final = re.compile(r"[\x20-\x7e]+")


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
        description="legacy client sessions relayed at once, all principals; when full, one idle "
        "for upstream.session_idle_s or the opener's own oldest is evicted (DELETEd upstream), "
        "else 503",
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


# Headers `upstream.headers` may not set, and where each belongs instead.
_TRANSPORT: Final = "the bridge sets it for each request"
_NOT_STATIC_HEADERS: Final = {
    "authorization": "use upstream.authorization (or the client's, forwarded)",
    "proxy-authorization": "give the credentials in upstream.proxy's URL",
    "cookie": "each upstream session keeps the cookies its server sets",
    "host": _TRANSPORT,
    "content-type": _TRANSPORT,
    "content-length": _TRANSPORT,
    "transfer-encoding": _TRANSPORT,
    "connection": _TRANSPORT,
    "accept": _TRANSPORT,
    "mcp-session-id": _TRANSPORT,
    "mcp-protocol-version": _TRANSPORT,
    "last-event-id": _TRANSPORT,
}
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


class UpstreamSettings(Frozen):
    """The legacy server behind the bridge."""

    url: str | None = Field(
        None, description="legacy HTTP endpoint, e.g. http://127.0.0.1:8931/mcp (or .../sse)"
    )
    transport: Literal["auto", "streamable-http", "sse"] = Field(
        "auto",
        description="HTTP transport of url: Streamable HTTP, the old HTTP+SSE, or auto-detected",
    )
    command: str | None = Field(
        None,
        description="legacy stdio server to launch instead of url: a command line, split like a "
        "shell",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="extra environment for the stdio command"
    )
    cwd: str | None = Field(None, description="working directory for the stdio command")
    max_line_bytes: int = Field(
        16_777_216, ge=1024, description="longest accepted stdio line from the server"
    )
    kill_grace_s: float = Field(
        0.75,
        gt=0,
        description="stdio shutdown: wait after closing stdin, then SIGTERM, the same again, then "
        "SIGKILL",
    )
    spare_processes: int = Field(
        2,
        ge=0,
        le=64,
        description="stdio: processes kept started ahead of need, so a new session skips the spawn"
        " (`mrtr-bridge stdio`: only after its first answer)",
    )
    connect_timeout_s: float = Field(5.0, gt=0, description="TCP connect timeout to the upstream")
    tls_ca_file: str | None = Field(
        None,
        description="https upstream: PEM file of the CAs to trust instead of the system's "
        "(SSL_CERT_FILE does the same for every OpenSSL program)",
    )
    tls_client_cert: str | None = Field(
        None,
        description="https upstream that asks for a client certificate (mutual TLS): PEM file "
        "with the certificate, and its key unless tls_client_key names another file",
    )
    tls_client_key: str | None = Field(
        None, description="PEM file with tls_client_cert's private key (unencrypted)"
    )
    proxy: str = Field(
        "env",
        description="forward proxy to the upstream: env (https_proxy, http_proxy, all_proxy and "
        "no_proxy, as curl and httpx read them), none, or an http:// or https:// proxy URL",
    )
    init_timeout_s: float = Field(10.0, gt=0, description="longest an upstream initialize may take")
    authorization: SecretStr | None = Field(
        None, description="static Authorization header sent upstream instead of the client's"
    )
    authorization_file: str | None = Field(
        None, description="file holding that static Authorization header value (read at start-up)"
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="extra HTTP headers on every request to the upstream (an API key, say: a "
        "secret, never echoed); not the transport's own, Authorization or Cookie",
    )
    forward_authorization: bool = Field(
        True, description="forward the client's Authorization header upstream"
    )
    max_sessions: int = Field(
        256, ge=1, description="upstream sessions open at once, all principals"
    )
    max_sessions_per_principal: int = Field(
        64,
        ge=1,
        description="upstream sessions open at once per principal (relayed legacy client sessions"
        " too: one more evicts the principal's least recently used)",
    )
    session_wait_s: float = Field(
        10.0,
        ge=0,
        description="how long a call waits for a free session when upstream.max_sessions are all "
        "in use",
    )
    session_limit: Literal["auto", "one", "many"] = Field(
        "auto",
        description="Streamable HTTP: does the upstream serve one session at a time (learned once"
        " by a second session beside the first, opened for an interactive call or, with no call"
        " running, for crowded plain calls; or declared); one: at most one session, never DELETEd"
        " nor reaped",
    )
    session_check_s: float = Field(
        2.0,
        gt=0,
        description="how long the session-limit check waits for the first session to answer a ping"
        " once a second one is open",
    )
    session_idle_s: float = Field(
        300.0, gt=0, description="idle upstream sessions are closed after this"
    )
    plain_calls_per_session: int = Field(
        4,
        ge=0,
        description="Streamable HTTP, once the upstream is known to serve many sessions: a client's"
        " plain calls one session carries at once before its next one opens another session of"
        " the same key (within the session limits); 0: they all share one",
    )
    unowned_roots: tuple[str, ...] = Field(
        (),
        description="root URIs answered to a roots/list push that no call owns (empty list if "
        "none)",
    )
    roots_affinity: Literal["auto", "always"] = Field(
        "auto",
        description="roots-affine sessions: learn (probe once) whether the upstream keeps roots, "
        "or always",
    )
    roots_probe_ms: float = Field(
        500.0,
        gt=0,
        description="how long the one-time probe (and a fresh roots-affine session) waits for a "
        "roots ask",
    )
    roots_settle_ms: float = Field(
        50.0,
        ge=0,
        description="after a fresh session's roots ask is answered, wait this long before its "
        "first call",
    )
    session_per_call: bool = Field(
        False, description="give every interactive call a fresh upstream session, closed after it"
    )
    share_attributed_calls: bool = Field(
        True,
        description="let interactive calls of one principal and capability set share an upstream"
        " session when the server sends their pushes on each call's own POST stream (Streamable"
        " HTTP; learned per tool)",
    )
    era_probe_timeout_s: float = Field(
        3.0,
        gt=0,
        description="how long a server/discover era probe waits for an answer before taking the"
        " upstream as legacy (stdio probes run in a throwaway process)",
    )
    era_probe_interval_s: float = Field(
        60.0,
        ge=0,
        description="probe the upstream's era again this often (and soon after a failure); 0: only"
        " at start and after failures",
    )

    @field_validator("authorization")
    @classmethod
    def _check_authorization(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and _HEADER_VALUE.fullmatch(value.get_secret_value()) is None:
            raise ValueError(
                "authorization must be one line of visible ASCII (an HTTP header value)"
            )
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header in value.items():
            lowered = name.lower()
            if lowered in _NOT_STATIC_HEADERS:
                raise ValueError(f"{name} cannot be set here: {_NOT_STATIC_HEADERS[lowered]}")
            if not _HEADER_NAME.fullmatch(name) or not _HEADER_VALUE.fullmatch(header):
                raise ValueError(
                    "allowed: header names that are HTTP tokens, values of visible ASCII and "
                    "spaces (not empty, no line breaks)"
                )
        return value

    @field_validator("proxy")
    @classmethod
    def _proxy(cls, value: str) -> str:
        if value in ("env", "none"):
            return value
        parts = urlsplit(value)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "allowed: env, none, or an http:// or https:// proxy URL, e.g. "
                "http://proxy.internal:3128"
            )
        return value

    @field_validator("url")
    @classmethod
    def _no_credentials_in_url(cls, value: str | None) -> str | None:
        if value is not None and (
            urlsplit(value).scheme.lower() not in ("http", "https") or not urlsplit(value).netloc
        ):
            raise ValueError(
                "allowed: an http:// or https:// URL, e.g. http://127.0.0.1:8931/mcp "
                "(a stdio server goes in upstream.command, --upstream-command)"
            )
        # Refused rather than turned into a header: see docs/security.md § Upstream credentials.
        if value is not None and "@" in urlsplit(value).netloc:
            raise ValueError(
                "must not carry credentials (user:password@host); give them as "
                "upstream.authorization "
                '(config file or MRTR_BRIDGE_UPSTREAM_AUTHORIZATION), e.g. "Basic <base64>"'
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
        description="held calls (asked for input, not ended) at once per principal; plain calls "
        "not counted",
    )
    max_total: int = Field(
        4096, ge=1, description="held calls at once, all principals; plain calls not counted"
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
    level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")
    format: Literal["auto", "json", "console"] = Field(
        "auto", description="json; console on a TTY when auto"
    )
    access: bool = Field(
        True,
        description="one info line per front request (front_request_finished); false: debug level",
    )


class Settings(Frozen):
    front: FrontSettings = FrontSettings()
    upstream: UpstreamSettings = UpstreamSettings()
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
