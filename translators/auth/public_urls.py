"""The URLs the bridge names in OAuth discovery, built only from configured values.

A modern client checks that the Protected Resource Metadata's `resource` matches the URL it
connected to, and it follows `resource_metadata` from a challenge, so both must name the bridge
as clients reach it: `front.public_url`, or for local use the listen address. A request's `Host`
header never enters here (it is the client's to choose, and may name any site).

Pure string work (no `urllib`: translators stay free of I/O-capable modules): only absolute
`http`/`https` URLs are understood; anything else is "not a URL on that origin".
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Final

PRM_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
AS_WELL_KNOWN: Final = "/.well-known/oauth-authorization-server"
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}
# A URL inside a value (a whole value, or prose such as an error description).
_EMBEDDED_URL: Final = re.compile(r"https?://[^\s\"'<>`]+", re.IGNORECASE)
# Names that only resolve inside a site (RFC 6761, RFC 6762, RFC 8375, common cluster suffixes).
_INTERNAL_SUFFIXES: Final = (
    ".localhost",
    ".local",
    ".localdomain",
    ".internal",
    ".intranet",
    ".lan",
    ".home.arpa",
    ".svc",
    ".cluster.local",
)
_URL: Final = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<authority>[^/?#\s]*)(?P<path>[^?#\s]*)(?P<tail>\?[^#\s]*)?(?:#\S*)?"
)


@dataclass(frozen=True)
class SplitUrl:
    scheme: str
    host: str  # lower case; IPv6 literals keep their brackets
    port: str  # empty for the scheme's default port
    path: str
    query: str  # with its leading "?", or empty

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.host}" + (f":{self.port}" if self.port else "")


def _host_port(authority: str) -> tuple[str, str] | None:
    authority = authority.rpartition("@")[2].lower()  # userinfo never names the origin
    if authority.startswith("["):
        host, bracket, rest = authority.partition("]")
        host, port = host + bracket, rest.removeprefix(":")
        if not bracket or (rest and not rest.startswith(":")):
            return None
    else:
        host, _, port = authority.partition(":")
    if not host or (port and not port.isdigit()):
        return None
    return host, port


def split_url(url: str) -> SplitUrl | None:
    """An absolute http(s) URL in parts, or None."""
    match = _URL.fullmatch(url.strip())
    if match is None or match["scheme"].lower() not in _DEFAULT_PORTS:
        return None
    scheme = match["scheme"].lower()
    parts = _host_port(match["authority"])
    if parts is None:
        return None
    host, port = parts
    port = "" if port == _DEFAULT_PORTS[scheme] else port
    return SplitUrl(scheme, host, port, match["path"], match["tail"] or "")


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of an absolute http(s) URL, normalized; None for anything else."""
    parts = split_url(url)
    return parts.origin if parts is not None else None


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


def is_loopback_host(host: str) -> bool:
    """`localhost`, a `.localhost` name, a loopback or unspecified address (any spelling)."""
    address = _ip(host)
    if address is not None:
        return address.is_loopback or address.is_unspecified
    name = host.rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def is_internal_host(host: str) -> bool:
    """A host name or address that only means something inside a site: loopback, private,
    link-local or reserved addresses, single-label names, and internal suffixes (`.local`,
    `.internal`, `.svc`, ...). Clients on the internet cannot reach it; naming it only leaks."""
    address = _ip(host)
    if address is not None:
        return not address.is_global or address.is_reserved
    name = host.rstrip(".")
    return "." not in name or name.endswith(_INTERNAL_SUFFIXES)


def canonical_resource(url: str) -> str | None:
    """A resource identifier for comparison: normalized origin, path without trailing slash."""
    parts = split_url(url)
    return parts.origin + parts.path.rstrip("/") + parts.query if parts is not None else None


def public_endpoint(public_url: str | None, listen_host: str, listen_port: int, path: str) -> str:
    """The bridge's MCP endpoint as clients reach it: `front.public_url` (with `front.path`
    appended when it has no path), else `http://<listen address><front.path>` for local use."""
    if public_url:
        parts = split_url(public_url)
        if parts is not None:
            return parts.origin + (parts.path.rstrip("/") or path)
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(listen_host, listen_host)
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{host}:{listen_port}{path}"


def _metadata_url(origin: str, path: str) -> str:
    return origin + PRM_WELL_KNOWN + (path.rstrip("/") if path.strip("/") else "")


@dataclass(frozen=True)
class PublicUrls:
    """The bridge's public endpoint and the upstream's endpoint, and what follows from them."""

    endpoint: str
    upstream: str

    @cached_property
    def _public(self) -> SplitUrl:
        parts = split_url(self.endpoint)
        if parts is None:
            raise ValueError("the public endpoint must be an absolute http(s) URL")
        return parts

    @cached_property
    def _upstream(self) -> SplitUrl | None:
        return split_url(self.upstream)

    @property
    def origin(self) -> str:
        return self._public.origin

    @property
    def upstream_origin(self) -> str | None:
        return self._upstream.origin if self._upstream is not None else None

    @property
    def metadata_url(self) -> str:
        """Where the bridge serves its Protected Resource Metadata (the endpoint-path variant)."""
        return _metadata_url(self.origin, self._public.path)

    def metadata_paths(self, front_path: str) -> tuple[str, ...]:
        """The local paths of that document: root, public path and listen path variants."""
        variants = (self._public.path.rstrip("/"), front_path.rstrip("/"))
        return tuple(dict.fromkeys((PRM_WELL_KNOWN, *(PRM_WELL_KNOWN + path for path in variants))))

    def names_upstream(self, url: str) -> bool:
        """Whether `url` is on the upstream's server: its origin, or (for a loopback upstream) the
        same scheme and port under another loopback spelling (`localhost`, `[::1]`, `127.0.0.2`)."""
        parts, upstream = split_url(url), self._upstream
        if parts is None or upstream is None:
            return False
        if parts.origin == upstream.origin:
            return True
        return (
            (parts.scheme, parts.port) == (upstream.scheme, upstream.port)
            and is_loopback_host(parts.host)
            and is_loopback_host(upstream.host)
        )

    def is_hidden(self, url: str) -> bool:
        """Whether clients must not be shown `url`: it is on the upstream's server, or on an
        internal host while the bridge itself is public (when the bridge's own public URL is on an
        internal host, its clients are on that network and such names are theirs too)."""
        parts = split_url(url)
        if parts is None or parts.origin == self.origin:
            return False
        if self.names_upstream(url):
            return True
        return is_internal_host(parts.host) and not is_internal_host(self._public.host)

    def public_text(self, text: str, *, move: bool = True) -> str | None:
        """`text` (a URL, or prose holding URLs) as clients may see it: each URL in it on the
        upstream's server moved to the bridge's public origin (with `move`; else it hides the text),
        None when one is hidden and not moved (`is_hidden`): the caller leaves the text out."""
        hidden = False

        def public(match: re.Match[str]) -> str:
            nonlocal hidden
            url = match.group()
            if not self.is_hidden(url):
                return url
            if move and self.names_upstream(url):
                return self.on_public_origin(url)
            hidden = True
            return url

        rewritten = _EMBEDDED_URL.sub(public, text)
        return None if hidden else rewritten

    def on_public_origin(self, url: str) -> str:
        """`url` with its origin replaced by the bridge's public origin."""
        parts = split_url(url)
        return self.origin + parts.path + parts.query if parts is not None else url

    @cached_property
    def own_resources(self) -> frozenset[str]:
        """Resource identifiers that name this bridge or its upstream (endpoint or origin)."""
        names = [self.endpoint, self.origin, self.upstream, self.upstream_origin or ""]
        return frozenset(filter(None, (canonical_resource(name) for name in names)))

    def is_own_resource(self, url: str) -> bool:
        """Whether a metadata `resource` names this bridge or its upstream (any loopback spelling
        of a loopback upstream included)."""
        if canonical_resource(url) in self.own_resources:
            return True
        parts, upstream = split_url(url), self._upstream
        if parts is None or upstream is None or parts.query or not self.names_upstream(url):
            return False
        return parts.path.rstrip("/") in ("", upstream.path.rstrip("/"))

    @property
    def upstream_metadata_urls(self) -> tuple[str, ...]:
        """Where the upstream's own document may be, in RFC 9728 / MCP discovery order."""
        if self._upstream is None:
            return ()
        origin = self._upstream.origin
        return tuple(
            dict.fromkeys((_metadata_url(origin, self._upstream.path), origin + PRM_WELL_KNOWN))
        )

    @property
    def upstream_issuer_metadata_url(self) -> str | None:
        """RFC 8414 metadata at the upstream's origin: the 2025-03-26 server as its own
        authorization server."""
        return self._upstream.origin + AS_WELL_KNOWN if self._upstream is not None else None


__all__ = [
    "AS_WELL_KNOWN",
    "PRM_WELL_KNOWN",
    "PublicUrls",
    "SplitUrl",
    "canonical_resource",
    "is_internal_host",
    "is_loopback_host",
    "origin_of",
    "public_endpoint",
    "split_url",
]
