"""`WWW-Authenticate` challenges (RFC 9110 § 11.6.1, RFC 6750 § 3): parse, rewrite, serialize.

The bridge passes an upstream's `401` (and its `403 insufficient_scope` step-up) to the client
(modern, or legacy through the relay) with the upstream's challenge, but a URL in it that names the
upstream would send the client around the bridge and leak an internal address. So
`resource_metadata` (RFC 9728 § 5.1) always becomes the bridge's own metadata URL, which relays the
upstream's document, whatever origin or spelling the upstream gave (`localhost:<port>` for a
`127.0.0.1` upstream, another internal name); any other auth-param whose value is a URL on the
upstream's server is moved to the bridge's public origin, and one on another internal host is
left out (`PublicUrls.is_hidden`), URLs inside prose (`error_description`) included. A Bearer
challenge that names no metadata gets the bridge's.

The header is untrusted input: values are bounded (`MAX_CHALLENGE_CHARS`, `MAX_PARAMS`), only
visible ASCII, space and tab are accepted, and anything that does not parse is replaced by a
minimal `Bearer resource_metadata="..."` naming the bridge: never echoed half-understood.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from translators.auth.public_urls import PublicUrls

MAX_CHALLENGE_CHARS: Final = 4096
MAX_PARAMS: Final = 32
RESOURCE_METADATA: Final = "resource_metadata"
INSUFFICIENT_SCOPE: Final = "insufficient_scope"

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_QUOTED: Final = re.compile(r'"((?:[\t \x21\x23-\x5b\x5d-\x7e]|\\[\t \x21-\x7e])*)"')
_SAFE: Final = re.compile(r"[\t\x20-\x7e]*")
_OWS: Final = re.compile(r"[ \t]*")
_QUOTED_PAIR: Final = re.compile(r"\\(.)")


class MalformedChallenge(ValueError):
    """The header is not a list of challenges this module can read back faithfully."""


@dataclass
class Challenge:
    scheme: str
    params: list[tuple[str, str]] = field(default_factory=list)
    token68: str | None = None

    def param(self, name: str) -> str | None:
        return next((value for key, value in self.params if key.lower() == name), None)


class _Reader:
    """A cursor over one header value."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self, pattern: re.Pattern[str] = _OWS) -> None:
        match = pattern.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos

    def take(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        match = pattern.match(self.text, self.pos)
        if match is not None:
            self.pos = match.end()
        return match

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def at_param(self) -> bool:
        """Whether `token OWS "="` starts here (an auth-param, not a new challenge or a token68)."""
        match = _TOKEN.match(self.text, self.pos)
        if match is None:
            return False
        rest = _OWS.match(self.text, match.end())
        end = rest.end() if rest else match.end()
        return self.text.startswith("=", end) and not self.text.startswith("==", end)


def parse_challenges(value: str) -> list[Challenge]:
    """Every challenge in one `WWW-Authenticate` value; raises `MalformedChallenge`."""
    if len(value) > MAX_CHALLENGE_CHARS or _SAFE.fullmatch(value) is None:
        raise MalformedChallenge("oversized or not visible ASCII")
    reader, challenges = _Reader(value), []
    while True:
        reader.skip(re.compile(r"[ \t,]*"))
        if not reader.peek():
            break
        challenges.append(_challenge(reader))
    if not challenges:
        raise MalformedChallenge("no challenge")
    return challenges


def _challenge(reader: _Reader) -> Challenge:
    scheme = reader.take(_TOKEN)
    if scheme is None:
        raise MalformedChallenge("expected an auth-scheme")
    challenge = Challenge(scheme.group())
    spaced = reader.take(re.compile(r" +"))
    if spaced is None or reader.peek() in ("", ","):
        return challenge
    if not reader.at_param():
        token68 = reader.take(_TOKEN68)
        if token68 is None:
            raise MalformedChallenge("expected a token68 or auth-params")
        challenge.token68 = token68.group()
        return challenge
    _params(reader, challenge)
    return challenge


def _params(reader: _Reader, challenge: Challenge) -> None:
    while True:
        name = reader.take(_TOKEN)
        reader.skip()
        if name is None or not reader.take(re.compile("=")):
            raise MalformedChallenge("expected name=value")
        reader.skip()
        challenge.params.append((name.group(), _param_value(reader)))
        if len(challenge.params) > MAX_PARAMS:
            raise MalformedChallenge("too many auth-params")
        reader.skip()
        if not reader.peek():
            return
        if reader.peek() != ",":
            raise MalformedChallenge("expected a comma between auth-params")
        mark = reader.pos
        reader.skip(re.compile(r"[ \t,]*"))
        if not reader.at_param():  # the next challenge starts here
            reader.pos = mark
            return


def _param_value(reader: _Reader) -> str:
    quoted = reader.take(_QUOTED)
    if quoted is not None:
        return _QUOTED_PAIR.sub(r"\1", quoted.group(1))
    token = reader.take(_TOKEN)
    if token is None:
        raise MalformedChallenge("expected a token or a quoted-string")
    return token.group()


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def serialize_challenges(challenges: list[Challenge]) -> str:
    parts = []
    for challenge in challenges:
        if challenge.token68 is not None:
            parts.append(f"{challenge.scheme} {challenge.token68}")
        elif challenge.params:
            parts.append(
                challenge.scheme + " " + ", ".join(f"{k}={_quote(v)}" for k, v in challenge.params)
            )
        else:
            parts.append(challenge.scheme)
    return ", ".join(parts)


def _rewrite_value(name: str, value: str, urls: PublicUrls) -> str | None:
    """The value the client sees; None leaves the auth-param out."""
    if name.lower() == RESOURCE_METADATA:
        return urls.metadata_url
    return urls.public_text(value)


def _rewrite(challenge: Challenge, urls: PublicUrls) -> Challenge:
    params = [
        (name, public)
        for name, value in challenge.params
        if (public := _rewrite_value(name, value, urls)) is not None
    ]
    rewritten = Challenge(challenge.scheme, params, challenge.token68)
    is_bearer = challenge.scheme.lower() == "bearer" and challenge.token68 is None
    if is_bearer and rewritten.param(RESOURCE_METADATA) is None:
        rewritten.params.append((RESOURCE_METADATA, urls.metadata_url))
    return rewritten


def bridge_challenge(urls: PublicUrls) -> str:
    """The challenge the bridge sends when the upstream's cannot be used."""
    return f"Bearer {RESOURCE_METADATA}={_quote(urls.metadata_url)}"


def rewrite_challenge(value: str | None, urls: PublicUrls) -> str:
    """The upstream's challenge as the modern client must see it (never raises)."""
    if value is None:
        return bridge_challenge(urls)
    try:
        challenges = parse_challenges(value)
    except MalformedChallenge:
        return bridge_challenge(urls)
    text = serialize_challenges([_rewrite(challenge, urls) for challenge in challenges])
    return text if len(text) <= MAX_CHALLENGE_CHARS else bridge_challenge(urls)


def is_step_up(status: int, value: str | None) -> bool:
    """A `403` whose Bearer challenge says `error="insufficient_scope"` (RFC 6750 § 3.1)."""
    if status != 403 or value is None:
        return False
    try:
        challenges = parse_challenges(value)
    except MalformedChallenge:
        return False
    return any(
        c.scheme.lower() == "bearer" and c.param("error") == INSUFFICIENT_SCOPE for c in challenges
    )


def is_auth_challenge(status: int, value: str | None) -> bool:
    """Whether an upstream refusal is an authorization challenge the client must see."""
    return status == 401 or is_step_up(status, value)


__all__ = [
    "INSUFFICIENT_SCOPE",
    "MAX_CHALLENGE_CHARS",
    "MAX_PARAMS",
    "RESOURCE_METADATA",
    "Challenge",
    "MalformedChallenge",
    "bridge_challenge",
    "is_auth_challenge",
    "is_step_up",
    "parse_challenges",
    "rewrite_challenge",
    "serialize_challenges",
]
