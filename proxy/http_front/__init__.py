"""The modern Streamable HTTP endpoint, strictly 2026-07-28 (2026-07-28/basic/transports/streamable-
http.mdx), split by route as the engine is (proxy/engine/routes/):

- `endpoint`: `HttpFront`, the order of the checks and which route a request takes;
- `checks`: Host and Origin (403), method (405), media type (415), body size (413);
- `legacy`: legacy clients, relayed as legacy sessions (`proxy.passthrough.legacy_clients`);
- `hop`: the replica hop, to the replica that owns a held call (`proxy.cluster`);
- `modern_relay`: the hook that relays modern requests untranslated to a modern upstream;
- `modern`: the modern path, a `FrontRequest` for the engine answered as JSON or SSE;
- `sse` and `replies`: streamed and JSON replies.

One POST carries one JSON-RPC message. No `Mcp-Session-Id` is ever sent; `Last-Event-ID` is
ignored. Closing a streamed reply cancels the handler task, and with it `engine.handle` (the
engine turns that into an upstream cancel).
"""

from proxy.common.sse_replies import SSE_KEEPALIVE_S, SseSink, accepts_sse
from proxy.http_front.endpoint import HttpFront
from proxy.http_front.hop import HOP_KEY, ClusterHop
from proxy.http_front.modern import ENGINE_KEY, FrontEngine

__all__ = [
    "ENGINE_KEY",
    "HOP_KEY",
    "SSE_KEEPALIVE_S",
    "ClusterHop",
    "FrontEngine",
    "HttpFront",
    "SseSink",
    "accepts_sse",
]
