#!/usr/bin/env python3
"""A legacy MCP server in the 2025-03-26 authorization model: it is its own authorization server.

Written with FastMCP from `mcp` 1.x and its `auth_server_provider`: the SDK serves RFC 8414
metadata at this server's origin (`/.well-known/oauth-authorization-server`), dynamic client
registration, `/authorize` (PKCE) and `/token`; the provider below keeps clients, codes and
opaque tokens in memory and approves every authorization at once (no login page). There is no
Protected Resource Metadata (`resource_server_url` is unset), as before RFC 9728. A token is
accepted only when it was issued for `--audience` (the RFC 8707 `resource` of its request).

- tool `whoami()`: the token's subject (the registered client's name).

Usage: python tests/peers/oauth_own_as_server.py --port N --audience URL
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
import time

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.fastmcp import FastMCP
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl

TOKEN_TTL_S = 3600


class MemoryProvider:
    """An `OAuthAuthorizationServerProvider` in memory; tokens are bound to one audience."""

    def __init__(self, audience: str) -> None:
        self._audience = audience.rstrip("/")
        self._clients: dict[str, OAuthClientInformationFull] = {}
        self._codes: dict[str, AuthorizationCode] = {}
        self._tokens: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self._clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self._clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(24)
        self._codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=client.client_name,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, code: str
    ) -> AuthorizationCode | None:
        found = self._codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, code: AuthorizationCode
    ) -> OAuthToken:
        self._codes.pop(code.code, None)
        token = secrets.token_urlsafe(32)
        self._tokens[token] = AccessToken(
            token=token,
            client_id=code.client_id,
            scopes=code.scopes,
            expires_at=int(time.time()) + TOKEN_TTL_S,
            resource=code.resource,
            subject=code.subject,
        )
        return OAuthToken(
            access_token=token, expires_in=TOKEN_TTL_S, scope=" ".join(code.scopes) or None
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        raise TokenError("invalid_grant", "refresh tokens are not issued")

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self._tokens.get(token)
        if found is None or (found.resource or "").rstrip("/") != self._audience:
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self._tokens.pop(token.token, None)


def build(port: int, audience: str) -> FastMCP:
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(f"http://127.0.0.1:{port}"),
        resource_server_url=None,
        client_registration_options=ClientRegistrationOptions(enabled=True),
    )
    server = FastMCP(
        name="oauth-own-as",
        host="127.0.0.1",
        port=port,
        auth=auth,
        auth_server_provider=MemoryProvider(audience),
    )

    @server.tool()
    async def whoami() -> str:
        """Who the token says the caller is."""
        token = get_access_token()
        return f"{token.subject if token else None}"

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--audience", required=True, help="the resource URL tokens must be issued for"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    build(args.port, args.audience).run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
