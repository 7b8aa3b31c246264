"""The modern Streamable HTTP endpoint, strictly 2026-07-28 (2026-07-28/basic/transports/streamable-
http.mdx), and the legacy clients it serves beside:

- `endpoint`: `HttpFront`: the checks before any JSON is read (Host and Origin 403, method 405,
  media type 415, body size 413), the one path choice (translators/protocol/paths.py), the
  access line;
- `legacy`: legacy clients, relayed as legacy sessions (`proxy.passthrough.legacy_clients`), served
  by the bridge in front of a modern upstream (`proxy.reverse`), or refused;
- `hop`: the replica hop, to the replica that owns a held call (`proxy.cluster`);
- `modern`: the modern path, a `FrontRequest` for the engine answered as JSON or SSE
  (proxy/common/http_replies.py, http_replies.py).

One POST carries one JSON-RPC message. No `Mcp-Session-Id` is ever sent; `Last-Event-ID` is
ignored. Closing a streamed reply cancels the handler task, and with it `engine.handle` (the
engine turns that into an upstream cancel).
"""

from proxy.common.http_replies import SSE_KEEPALIVE_S, SseSink, accepts_sse
from proxy.http_front.endpoint import HttpFront
from proxy.http_front.hop import HOP_KEY, ClusterHop
from proxy.http_front.modern import EngineSource, FrontEngine

__all__ = [
    "HOP_KEY",
    "SSE_KEEPALIVE_S",
    "ClusterHop",
    "EngineSource",
    "FrontEngine",
    "HttpFront",
    "SseSink",
    "accepts_sse",
]
