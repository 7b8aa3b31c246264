"""Settings of the upstream: where it is, how the bridge reaches it (transport, proxy, TLS,
static headers and credentials) and how many sessions it keeps (docs/operations.md,
"Configuration"). Part of `config.settings.Settings`, which re-exports it."""

from __future__ import annotations

import re
from typing import Final, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from config.base import Frozen

# A header value the bridge sends upstream (Authorization, upstream.headers): visible ASCII and
# spaces, nothing that could end the header.
_HEADER_VALUE: Final = re.compile(r"[\x20-\x7e]+")

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
        16_777_216,
        ge=1024,
        description="largest accepted message from the server: a stdio line, an HTTP body or an"
        " SSE event (read to its end within this, never held past it)",
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
        256,
        ge=1,
        description="upstream sessions open at once, all principals (1 over HTTP: the same as"
        ' session_limit = "one")',
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
        description="HTTP: does the upstream serve one session at a time (learned once by a second"
        " session beside the first, whoever opens it: the pool, the revision negotiation, the roots"
        " probe, check; or declared); one: one session, kept for as long as the bridge runs, for"
        " every caller in turn, never DELETEd, reaped or replaced, and no other opened",
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
