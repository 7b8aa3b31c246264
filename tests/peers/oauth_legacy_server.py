#!/usr/bin/env python3
"""A legacy (MCP 2025-11-25) server that is an OAuth 2.1 resource server, written with FastMCP
from `mcp` 1.x (`token_verifier` + `AuthSettings`): every request needs a Bearer JWT from
`--issuer`, checked against the issuer's JWKS, its `iss`, its expiry and its audience.

The audience it accepts is `--audience`, the URL clients reach it at. Behind the bridge that is
the bridge's public URL (what a client puts in RFC 8707 `resource`), as it would be behind any
TLS-terminating reverse proxy. Its own metadata and challenges name its own origin
(`resource_server_url` is its own address), which the bridge must rewrite.

- `--required-scope S` (repeatable): a token without S gets `403 insufficient_scope`;
- `--introspect`: a token must also be `active` at the issuer's `/introspect` (so a token revoked
  at the authorization server is refused from then on: 401);
- `--task-tools`: the legacy task tools of `legacy_task_tools.py` (`slow_compute`, ...);
- tool `whoami()`: the token's subject and a number for the legacy session it runs in;
- tool `book_table(restaurant)`: asks for a name (form elicitation), then books.

Usage: python tests/peers/oauth_legacy_server.py --port N --issuer URL --audience URL
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
import weakref

import anyio
import httpx
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import Context, FastMCP
from pydantic import AnyHttpUrl, BaseModel, Field

_session_numbers = itertools.count(1)
_sessions: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()


class JwtVerifier:
    """RS256 JWTs of one issuer, for one audience (the mcp 1.x `TokenVerifier` protocol)."""

    def __init__(self, issuer: str, audience: str, *, introspect: bool = False) -> None:
        self._issuer = issuer
        self._audience = audience
        self._keys = jwt.PyJWKClient(issuer.rstrip("/") + "/jwks")
        self._introspection = issuer.rstrip("/") + "/introspect" if introspect else None

    async def _active(self, token: str) -> bool:
        """The authorization server's word on the token (RFC 7662), when asked to check it."""
        if self._introspection is None:
            return True
        async with httpx.AsyncClient(timeout=5.0) as http:
            response = await http.post(self._introspection, json={"token": token})
        return response.status_code == 200 and response.json().get("active") is True

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = await anyio.to_thread.run_sync(self._keys.get_signing_key_from_jwt, token)
            claims = jwt.decode(
                token, key.key, algorithms=["RS256"], audience=self._audience, issuer=self._issuer
            )
        except jwt.PyJWTError as exc:
            logging.getLogger("oauth_legacy_server").info("token refused: %s", type(exc).__name__)
            return None
        if not await self._active(token):
            logging.getLogger("oauth_legacy_server").info("token refused: not active (revoked)")
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("sub") or ""),
            scopes=str(claims.get("scope") or "").split(),
            expires_at=claims.get("exp"),
            resource=self._audience,
            subject=claims.get("sub"),
        )


class Guest(BaseModel):
    name: str = Field(description="Name for the reservation")


def build(
    port: int,
    issuer: str,
    audience: str,
    scopes: list[str],
    *,
    introspect: bool = False,
    task_tools: bool = False,
) -> FastMCP:
    own_url = f"http://127.0.0.1:{port}/mcp"
    auth = AuthSettings(
        issuer_url=AnyHttpUrl(issuer),
        resource_server_url=AnyHttpUrl(own_url),
        required_scopes=scopes or None,
        validate_token_resource=False,
    )
    server = FastMCP(
        name="oauth-legacy",
        host="127.0.0.1",
        port=port,
        auth=auth,
        token_verifier=JwtVerifier(issuer, audience, introspect=introspect),
    )
    if task_tools:
        import legacy_task_tools  # a sibling module (tests/peers/ is the script's directory)

        legacy_task_tools.install(server)

    @server.tool()
    async def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
        """Who the token says the caller is, and which legacy session this is."""
        token = get_access_token()
        number = _sessions.setdefault(ctx.session, next(_session_numbers))
        return f"{token.subject if token else None} session={number}"

    @server.tool()
    async def book_table(restaurant: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """Book a table; asks for a name (form elicitation)."""
        token = get_access_token()
        answer = await ctx.elicit(
            message=f"Booking at {restaurant}: under what name?", schema=Guest
        )
        if answer.action != "accept":
            return f"Booking at {restaurant} {answer.action}ed."
        return (
            f"Booked {restaurant} under {answer.data.name} for {token.subject if token else None}."
        )

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", required=True, help="the authorization server's issuer URL")
    parser.add_argument(
        "--audience", required=True, help="the resource URL tokens must be issued for"
    )
    parser.add_argument("--required-scope", action="append", default=[])
    parser.add_argument("--introspect", action="store_true")
    parser.add_argument("--task-tools", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    server = build(
        args.port,
        args.issuer,
        args.audience,
        args.required_scope,
        introspect=args.introspect,
        task_tools=args.task_tools,
    )
    server.run("streamable-http")
    return 0


if __name__ == "__main__":
    sys.exit(main())
