"""`subscriptions/listen` on the front, fed by legacy session-wide notifications (docs/decisions.md
§ 14)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from translators.protocol.eras import (
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    PROMPTS_LIST_CHANGED,
    RESOURCE_UPDATED,
    RESOURCES_LIST_CHANGED,
    RESULT_COMPLETE,
    SUBSCRIPTIONS_ACKNOWLEDGED,
    TOOLS_LIST_CHANGED,
)
from translators.wire.errors import InvalidParams
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import JsonObject, notification

# list_changed notification -> (filter field, upstream server capability that announces it)
LIST_CHANGED: dict[str, tuple[str, str]] = {
    TOOLS_LIST_CHANGED: ("toolsListChanged", "tools"),
    PROMPTS_LIST_CHANGED: ("promptsListChanged", "prompts"),
    RESOURCES_LIST_CHANGED: ("resourcesListChanged", "resources"),
}
SESSION_WIDE = frozenset(LIST_CHANGED) | {RESOURCE_UPDATED}
TASKS_NOTIFICATION = "notifications/tasks"  # the Tasks extension's status push (docs/tasks.md)


@dataclass(frozen=True)
class ListenFilter:
    list_changed: frozenset[str]  # filter field names, e.g. "toolsListChanged"
    resource_uris: frozenset[str]
    task_ids: frozenset[str] = frozenset()  # the Tasks extension's `taskIds` (docs/tasks.md)

    def to_wire(self) -> JsonObject:
        wire: JsonObject = {name: True for name in sorted(self.list_changed)}
        if self.resource_uris:
            wire["resourceSubscriptions"] = sorted(self.resource_uris)
        if self.task_ids:
            wire["taskIds"] = sorted(self.task_ids)
        return wire


def parse_listen_filter(params: JsonObject) -> ListenFilter:
    """The client's requested filter; a malformed one is -32602."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise InvalidParams("subscriptions/listen needs a 'notifications' filter object")
    fields = {field for field, _ in LIST_CHANGED.values()}
    flags = set()
    for name in fields:
        value = wanted.get(name, False)
        if not isinstance(value, bool):
            raise InvalidParams(f"notifications.{name} must be a boolean")
        if value:
            flags.add(name)
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(u, str) and u for u in uris):
        raise InvalidParams("notifications.resourceSubscriptions must be an array of resource URIs")
    task_ids = wanted.get("taskIds", [])
    if not isinstance(task_ids, list) or not all(isinstance(t, str) and t for t in task_ids):
        raise InvalidParams("notifications.taskIds must be an array of task ids")
    return ListenFilter(frozenset(flags), frozenset(uris), frozenset(task_ids))


def honoured_filter(
    wanted: ListenFilter, server_capabilities: JsonObject, *, session_stream: bool
) -> ListenFilter:
    """The subset the bridge can deliver: what the upstream announces, over a channel it has."""
    if not session_stream:
        return ListenFilter(frozenset(), frozenset())
    flags = frozenset(
        field
        for method, (field, capability) in LIST_CHANGED.items()
        if field in wanted.list_changed
        and as_object(server_capabilities.get(capability)).get("listChanged") is True
    )
    subscribe = as_object(server_capabilities.get("resources")).get("subscribe") is True
    return ListenFilter(flags, wanted.resource_uris if subscribe else frozenset())


_WEB_SCHEMES = ("http", "https", "ws", "wss")


def uri_key(uri: str) -> str:
    """A URI as compared for subscriptions: scheme (and a web authority) case-insensitive, an empty
    web path is "/" (RFC 3986 § 6.2.2-6.2.3) -- legacy SDKs normalize URIs that way."""
    if "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    authority, slash, path = rest.partition("/")
    scheme = scheme.lower()
    if scheme in _WEB_SCHEMES:
        return f"{scheme}://{authority.lower()}/{path}"
    return f"{scheme}://{authority}{slash}{path}"


def _watched(uri: Any, honoured: ListenFilter) -> bool:
    return isinstance(uri, str) and uri_key(uri) in {uri_key(u) for u in honoured.resource_uris}


def _tag(params: JsonObject, listen_id: int | str) -> JsonObject:
    return {**params, "_meta": {**as_object(params.get("_meta")), META_SUBSCRIPTION_ID: listen_id}}


def acknowledgement(listen_id: int | str, honoured: ListenFilter) -> JsonObject:
    return notification(
        SUBSCRIPTIONS_ACKNOWLEDGED, _tag({"notifications": honoured.to_wire()}, listen_id)
    )


def listen_notification(
    message: JsonObject, honoured: ListenFilter, listen_id: int | str
) -> JsonObject | None:
    """The upstream notification as this listener should see it, or None if it did not opt in."""
    method = message.get("method")
    params = as_object(message.get("params"))
    if not isinstance(method, str):
        return None
    if method in LIST_CHANGED:
        if LIST_CHANGED[method][0] not in honoured.list_changed:
            return None
    elif method == TASKS_NOTIFICATION:
        if params.get("taskId") not in honoured.task_ids:
            return None
    elif method != RESOURCE_UPDATED or not _watched(params.get("uri"), honoured):
        return None
    return notification(method, _tag(params, listen_id))


def closing_result(listen_id: int | str, server_info: JsonObject | None) -> JsonObject:
    """The graceful end of a listen stream (server-initiated teardown)."""
    meta: JsonObject = {META_SUBSCRIPTION_ID: listen_id}
    if server_info is not None:
        meta[META_SERVER_INFO] = server_info
    return {"resultType": RESULT_COMPLETE, "_meta": meta}


__all__ = [
    "LIST_CHANGED",
    "SESSION_WIDE",
    "ListenFilter",
    "acknowledgement",
    "closing_result",
    "honoured_filter",
    "listen_notification",
    "parse_listen_filter",
    "uri_key",
]
