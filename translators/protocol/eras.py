"""Era registry: protocol versions, `_meta` keys and method sets (docs/revisions.md)."""

from __future__ import annotations

from typing import Final

MODERN_VERSIONS: Final[tuple[str, ...]] = ("2026-07-28",)
MODERN_VERSION: Final = MODERN_VERSIONS[0]
LEGACY_VERSION: Final = (
    "2025-11-25"  # offered upstream; translators.protocol.revisions lists those accepted
)

META_PREFIX: Final = "io.modelcontextprotocol/"
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
META_RELATED_TASK: Final = "io.modelcontextprotocol/related-task"
META_INPUT_KEY_HINT: Final = "dev.mrtr-bridge/inputKey"
META_PROGRESS_TOKEN: Final = "progressToken"
TRACE_META_KEYS: Final[frozenset[str]] = frozenset({"traceparent", "tracestate", "baggage"})

RESULT_COMPLETE: Final = "complete"
RESULT_INPUT_REQUIRED: Final = "input_required"

# Methods a modern client may call and the bridge serves.
DISCOVER: Final = "server/discover"
TOOLS_LIST: Final = "tools/list"
TOOLS_CALL: Final = "tools/call"
PROMPTS_LIST: Final = "prompts/list"
PROMPTS_GET: Final = "prompts/get"
RESOURCES_LIST: Final = "resources/list"
RESOURCES_TEMPLATES_LIST: Final = "resources/templates/list"
RESOURCES_READ: Final = "resources/read"
COMPLETION_COMPLETE: Final = "completion/complete"
SUBSCRIPTIONS_LISTEN: Final = "subscriptions/listen"

MRTR_METHODS: Final[frozenset[str]] = frozenset({TOOLS_CALL, PROMPTS_GET, RESOURCES_READ})
LIST_METHODS: Final[frozenset[str]] = frozenset(
    {TOOLS_LIST, PROMPTS_LIST, RESOURCES_LIST, RESOURCES_TEMPLATES_LIST}
)
CACHEABLE_METHODS: Final[frozenset[str]] = LIST_METHODS | {RESOURCES_READ, DISCOVER}
FORWARDED_METHODS: Final[frozenset[str]] = LIST_METHODS | MRTR_METHODS | {COMPLETION_COMPLETE}
# The Tasks extension's methods (docs/tasks.md); their `Mcp-Name` is the task id.
TASK_EXTENSION_METHODS: Final[frozenset[str]] = frozenset(
    {"tasks/get", "tasks/update", "tasks/cancel"}
)
MODERN_METHODS: Final[frozenset[str]] = (
    FORWARDED_METHODS | {DISCOVER, SUBSCRIPTIONS_LISTEN} | TASK_EXTENSION_METHODS
)
# Methods that carry a name or uri mirrored in the `Mcp-Name` header.
NAMED_METHODS: Final[dict[str, str]] = {
    TOOLS_CALL: "name",
    PROMPTS_GET: "name",
    RESOURCES_READ: "uri",
    **dict.fromkeys(TASK_EXTENSION_METHODS, "taskId"),
}
# Legacy-only methods a modern server must answer with -32601.
LEGACY_ONLY_METHODS: Final[frozenset[str]] = frozenset(
    {
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
    }
)
# Upstream server capability that gates each forwarded method (2025-11-25/basic/lifecycle.mdx §
# Capability Negotiation).
METHOD_CAPABILITY: Final[dict[str, str]] = {
    TOOLS_LIST: "tools",
    TOOLS_CALL: "tools",
    PROMPTS_LIST: "prompts",
    PROMPTS_GET: "prompts",
    RESOURCES_LIST: "resources",
    RESOURCES_TEMPLATES_LIST: "resources",
    RESOURCES_READ: "resources",
    COMPLETION_COMPLETE: "completions",
}

# Legacy server -> client requests (pushes) and their input-key kinds.
ELICIT: Final = "elicitation/create"
SAMPLE: Final = "sampling/createMessage"
ROOTS: Final = "roots/list"
PUSH_KINDS: Final[dict[str, str]] = {ELICIT: "elicit", SAMPLE: "sample", ROOTS: "roots"}
LEGACY_PING: Final = "ping"

# Legacy lifecycle, utilities and notifications (either direction).
INITIALIZE: Final = "initialize"
INITIALIZED: Final = "notifications/initialized"
CANCELLED: Final = "notifications/cancelled"
PROGRESS: Final = "notifications/progress"
LOG_MESSAGE: Final = "notifications/message"
LOGGING_SET_LEVEL: Final = "logging/setLevel"
RESOURCES_SUBSCRIBE: Final = "resources/subscribe"
RESOURCES_UNSUBSCRIBE: Final = "resources/unsubscribe"
RESOURCE_UPDATED: Final = "notifications/resources/updated"
TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
PROMPTS_LIST_CHANGED: Final = "notifications/prompts/list_changed"
RESOURCES_LIST_CHANGED: Final = "notifications/resources/list_changed"
SUBSCRIPTIONS_ACKNOWLEDGED: Final = (
    "notifications/subscriptions/acknowledged"  # modern, on a listen stream
)

LOG_LEVELS: Final[tuple[str, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)

__all__ = [name for name in dir() if name.isupper()]
