"""What the front hands the engine for one modern request (docs/architecture.md, "One request", step
1)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload

from translators.protocol.capabilities import modern_client_capabilities_to_legacy
from translators.protocol.eras import META_CLIENT_CAPABILITIES
from translators.wire.jsonrpc import JsonObject

Derived = TypeVar("Derived")


class derived(Generic[Derived]):
    """`functools.cached_property` without its lock: computed on the first read, then an ordinary
    attribute. Python 3.11's takes an `RLock` on every first read, which cost more than the
    values below; a request is read in the one task that serves it."""

    __slots__ = ("_compute", "_name")

    def __init__(self, compute: Callable[[Any], Derived]) -> None:
        self._compute = compute
        self._name = compute.__name__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> derived[Derived]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Derived: ...
    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self._name] = self._compute(instance)
        return value


class NotificationSink(Protocol):
    """Where request-scoped notifications go: the request's SSE stream, or stdout on stdio.

    `send` never blocks and never raises; after the request finishes it is a no-op."""

    def send(self, notification: JsonObject) -> None: ...


class NullSink:
    """A sink for requests answered as plain JSON: notifications are dropped."""

    def send(self, notification: JsonObject) -> None:
        return None


@dataclass
class FrontRequest:
    """One validated modern JSON-RPC request, plus who sent it and how. Nothing changes it once
    built; it is not a frozen dataclass because every request builds one, and a frozen dataclass
    sets each field through `object.__setattr__` (about 2.4 times the construction cost)."""

    front_request_id: int | str
    method: str
    params: JsonObject
    principal: str  # digest, never the credential
    authorization: str | None = (
        None  # the client's Authorization header value, forwarded upstream by policy
    )
    # traceparent / tracestate / baggage
    trace_headers: Mapping[str, str] = field(default_factory=dict)
    transport: str = "http"
    # `Mcp-Param-*` headers by lower-cased name without the prefix, values as received (trimmed,
    # Base64 sentinel not yet decoded):
    # `translators.protocol.request_validation.check_param_headers` decodes them.
    param_headers: Mapping[str, str] = field(default_factory=dict)
    # Set by the replica forwarding when this retry's owner replica cannot be reached: a valid state
    # of another replica may then start a recovery here (proxy/engine/routes/recover.py).
    owner_unreachable: bool = False

    # Derived once per request (a request passes through several routes and checks that each ask):
    # `params` is never replaced, and what they return is only read.
    @derived
    def meta(self) -> JsonObject:
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}

    @derived
    def client_capabilities(self) -> JsonObject:
        """The client capabilities its `_meta` declares (`{}` when none)."""
        caps = self.meta.get(META_CLIENT_CAPABILITIES)
        return caps if isinstance(caps, dict) else {}

    @derived
    def extensions(self) -> frozenset[str]:
        """The extensions its client capabilities declare (each an object under `extensions`)."""
        declared = self.client_capabilities.get("extensions")
        if not isinstance(declared, dict):
            return frozenset()
        return frozenset(name for name, value in declared.items() if isinstance(value, dict))

    @derived
    def legacy_capabilities(self) -> JsonObject:
        """The legacy `initialize` capabilities that declare exactly what it declares."""
        return modern_client_capabilities_to_legacy(self.client_capabilities)
