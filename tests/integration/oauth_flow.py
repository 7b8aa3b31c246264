"""OAuth for the integration tests: the real authorization server (npm `oauth2-mock-server`,
`tests/peers/oauth_as.mjs`), the legacy resource server (`tests/peers/oauth_legacy_server.py`)
and the bridge in front of it, plus the mcp 2.x client's `OAuthClientProvider` driven headless:
its redirect handler follows the authorization URL the way a browser would (the server redirects
at once, there is no login page) and hands the code and state from the redirect to the callback.

Every HTTP exchange the client makes is recorded (`Wire`), so a test can show the order of the
flow: the 401, the metadata fetched through the bridge, the token, the retried call.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from translators.protocol.eras import MODERN_VERSION

from .harness import (
    BRIDGE_EXE,
    PEERS_DIR,
    REPO_ROOT,
    PeerProcess,
    Peers,
    PeerStartError,
    bridge_env,
    free_port,
    run_legacy_script,
)

OAUTH_AS_PREFIX = REPO_ROOT / ".tools" / "oauth-as"
REDIRECT_URI = "http://127.0.0.1:1/callback"  # never contacted: the code is read off the redirect
SCOPE = "mcp:tools"


@dataclass
class OAuthStack:
    """The authorization server, the legacy resource server and the bridge in front of it."""

    issuer: str
    legacy: PeerProcess
    bridge: PeerProcess

    @property
    def url(self) -> str:
        return self.bridge.url

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.bridge.port}"

    @property
    def metadata_url(self) -> str:
        return f"{self.origin}/.well-known/oauth-protected-resource/mcp"


def start_authorization_server(peers: Peers) -> str:
    """Start `oauth_as.mjs`; returns its issuer URL (`http://127.0.0.1:N/`)."""
    node = shutil.which("node")
    if node is None or not (OAUTH_AS_PREFIX / "node_modules" / "oauth2-mock-server").is_dir():
        raise PeerStartError(
            "node or .tools/oauth-as is missing: run `make test`, which installs oauth2-mock-server"
        )
    port = free_port()
    argv = [
        node,
        str(PEERS_DIR / "oauth_as.mjs"),
        "--port",
        str(port),
        "--prefix",
        str(OAUTH_AS_PREFIX),
    ]
    peers.start("oauth-as", argv, port)
    return f"http://127.0.0.1:{port}/"


def _bridge(
    peers: Peers, port: int, legacy: PeerProcess, settings: dict[str, Any] | None
) -> PeerProcess:
    """The bridge on `port` in front of `legacy`, with `front.public_url` = its own address."""
    env = bridge_env({"front": {"public_url": f"http://127.0.0.1:{port}/mcp"}, **(settings or {})})
    argv = [str(BRIDGE_EXE), "serve", "--upstream", legacy.url, "--listen", f"127.0.0.1:{port}"]
    return peers.start("bridge", argv, port, env, inherit_bridge_env=False)


def start_stack(
    peers: Peers, *legacy_args: str, bridge_settings: dict[str, Any] | None = None
) -> OAuthStack:
    """AS, legacy server (audience: the bridge's public URL) and bridge (`front.public_url` set)."""
    issuer = start_authorization_server(peers)
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    legacy = peers.legacy(
        "oauth_legacy_server.py", "--issuer", issuer, "--audience", audience, *legacy_args
    )
    return OAuthStack(issuer, legacy, _bridge(peers, port, legacy, bridge_settings))


def start_own_issuer_stack(peers: Peers) -> OAuthStack:
    """A 2025-03-26 server that is its own authorization server (no RFC 9728 document), and the
    bridge."""
    port = free_port()
    legacy = peers.legacy("oauth_own_as_server.py", "--audience", f"http://127.0.0.1:{port}/mcp")
    issuer = legacy.url.removesuffix("mcp")
    return OAuthStack(issuer, legacy, _bridge(peers, port, legacy, None))


async def client_credentials_token(issuer: str, *, audience: str, scope: str) -> str:
    """A token minted by the authorization server for `audience` (the client credentials grant)."""
    form = {
        "grant_type": "client_credentials",
        "client_id": "service",
        "aud": audience,
        "scope": scope,
    }
    async with aiohttp.ClientSession() as http, http.post(f"{issuer}token", data=form) as response:
        assert response.status == 200, await response.text()
        token = (await response.json())["access_token"]
    assert isinstance(token, str)
    return token


@dataclass
class MemoryStorage:
    """The client's `TokenStorage`: pre-registered as a public client (oauth2-mock-server has no
    /register), or empty so that the client registers itself dynamically."""

    client_id: str
    preregistered: bool = True
    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None

    def __post_init__(self) -> None:
        if self.preregistered:
            self.client_info = OAuthClientInformationFull(
                client_id=self.client_id,
                redirect_uris=[REDIRECT_URI],
                token_endpoint_auth_method="none",
            )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class Browser:
    """Follows the authorization URL like a user agent and keeps what the redirect carried."""

    visited: list[str] = field(default_factory=list)
    redirect: dict[str, list[str]] = field(default_factory=dict)

    async def open(self, authorization_url: str) -> None:
        self.visited.append(authorization_url)
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            response = await http.get(authorization_url)
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(REDIRECT_URI + "?"), location
        self.redirect = parse_qs(urlsplit(location).query)

    async def callback(self) -> AuthorizationCodeResult:
        issuer = self.redirect.get("iss", [None])[0]
        return AuthorizationCodeResult(
            code=self.redirect["code"][0], state=self.redirect["state"][0], iss=issuer
        )


@dataclass
class Wire:
    """(method, URL without query, status) of every HTTP exchange of one client."""

    exchanges: list[tuple[str, str, int]] = field(default_factory=list)

    async def record(self, response: httpx2.Response) -> None:
        request = response.request
        self.exchanges.append(
            (request.method, str(request.url).split("?", 1)[0], response.status_code)
        )


@dataclass
class OAuthUser:
    """One user of the bridge: a client id (the token's subject), its storage, browser and wire."""

    client_id: str
    preregistered: bool = True
    storage: MemoryStorage = field(init=False)
    browser: Browser = field(default_factory=Browser)
    wire: Wire = field(default_factory=Wire)

    def __post_init__(self) -> None:
        self.storage = MemoryStorage(self.client_id, self.preregistered)

    def provider(self, server_url: str) -> OAuthClientProvider:
        metadata = OAuthClientMetadata(
            client_name=self.client_id,
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        )
        return OAuthClientProvider(
            server_url,
            metadata,
            self.storage,
            redirect_handler=self.browser.open,
            callback_handler=self.browser.callback,
        )

    @property
    def authorization(self) -> str:
        assert self.storage.tokens is not None, "no token yet"
        return f"Bearer {self.storage.tokens.access_token}"


@contextlib.asynccontextmanager
async def oauth_client(user: OAuthUser, url: str, **client_kwargs: Any) -> AsyncIterator[Client]:
    """An entered modern `mcp.Client` for `url` that logs in as `user` when challenged."""
    client_kwargs.setdefault("mode", MODERN_VERSION)
    client_kwargs.setdefault("cache", None)
    timeout = httpx2.Timeout(30.0, read=120.0)
    hooks = {"response": [user.wire.record]}
    async with httpx2.AsyncClient(
        auth=user.provider(url), timeout=timeout, event_hooks=hooks
    ) as http:
        async with Client(streamable_http_client(url, http_client=http), **client_kwargs) as client:
            yield client


async def run_legacy_oauth_client(url: str, client_id: str) -> dict[str, Any]:
    """Run tests/peers/legacy_oauth_client.py (mcp 1.x, its own OAuth client); its report."""
    return await run_legacy_script("legacy_oauth_client.py", "--url", url, "--client-id", client_id)


async def answer_name(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


__all__ = [
    "SCOPE",
    "Browser",
    "OAuthStack",
    "OAuthUser",
    "Wire",
    "answer_name",
    "client_credentials_token",
    "oauth_client",
    "run_legacy_oauth_client",
    "start_authorization_server",
    "start_own_issuer_stack",
    "start_stack",
]
