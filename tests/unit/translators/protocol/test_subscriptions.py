"""`subscriptions/listen` translation (translators.protocol.subscriptions; docs/decisions.md §
14)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from schema_check import assert_valid

from translators.protocol.eras import (
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    RESOURCE_UPDATED,
    RESULT_COMPLETE,
)
from translators.protocol.eras import SUBSCRIPTIONS_ACKNOWLEDGED as ACKNOWLEDGED
from translators.protocol.subscriptions import (
    LIST_CHANGED,
    SESSION_WIDE,
    ListenFilter,
    acknowledgement,
    closing_result,
    honoured_filter,
    listen_notification,
    parse_listen_filter,
)
from translators.wire.errors import InvalidParams
from translators.wire.jsonrpc import JsonObject

FLAGS = ("promptsListChanged", "resourcesListChanged", "toolsListChanged")
EVERYTHING: JsonObject = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
}


def _filter(*flags: str, uris: tuple[str, ...] = ()) -> ListenFilter:
    return ListenFilter(frozenset(flags), frozenset(uris))


def _notification(method: str, **params: Any) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params:
        message["params"] = params
    return message


# ---- the client's filter ------------------------------------------------------------------------


def test_a_full_filter_is_parsed() -> None:
    """Every flag and the resource URIs of a listen request are read (URIs de-duplicated)."""
    params = {
        "notifications": {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
            "resourceSubscriptions": ["file:///a", "file:///b", "file:///a"],
        }
    }
    assert_valid(params["notifications"], "SubscriptionFilter", "modern")
    assert parse_listen_filter(params) == _filter(*FLAGS, uris=("file:///a", "file:///b"))


def test_false_missing_and_unknown_flags_ask_for_nothing() -> None:
    """Only flags that are true count; kinds the bridge does not know are ignored, not refused."""
    params = {
        "notifications": {"toolsListChanged": False, "tasksStatus": True, "x-vendor": {"on": True}}
    }
    assert parse_listen_filter(params) == _filter()


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"notifications": None},
        {"notifications": ["toolsListChanged"]},
        {"notifications": {"toolsListChanged": "true"}},
        {"notifications": {"promptsListChanged": 1}},
        {"notifications": {"resourcesListChanged": None}},
        {"notifications": {"resourceSubscriptions": "file:///a"}},
        {"notifications": {"resourceSubscriptions": None}},
        {"notifications": {"resourceSubscriptions": [""]}},
        {"notifications": {"resourceSubscriptions": ["file:///a", 7]}},
    ],
)
def test_a_malformed_filter_is_invalid_params(params: JsonObject) -> None:
    """A missing filter, a non-boolean flag or a URI list that is not non-empty strings is
    -32602."""
    with pytest.raises(InvalidParams):
        parse_listen_filter(params)


@pytest.mark.parametrize(
    ("listen_filter", "wire"),
    [
        (_filter(), {}),
        (_filter("toolsListChanged"), {"toolsListChanged": True}),
        (
            _filter(*FLAGS, uris=("b://2", "a://1")),
            {
                "promptsListChanged": True,
                "resourcesListChanged": True,
                "toolsListChanged": True,
                "resourceSubscriptions": ["a://1", "b://2"],
            },
        ),
        (_filter(uris=("a://1",)), {"resourceSubscriptions": ["a://1"]}),
    ],
)
def test_a_filter_on_the_wire_lists_only_what_is_on(
    listen_filter: ListenFilter, wire: JsonObject
) -> None:
    """`to_wire` gives true flags and sorted URIs, omitting an empty URI list; it parses back to
    itself."""
    assert listen_filter.to_wire() == wire
    assert list(listen_filter.to_wire()) == list(wire)
    assert_valid(wire, "SubscriptionFilter", "modern")
    assert parse_listen_filter({"notifications": wire}) == listen_filter


# ---- what the bridge can honour -----------------------------------------------------------------


def test_everything_asked_is_honoured_when_the_upstream_announces_it() -> None:
    """With every capability announced and a session stream, the honoured filter is the
    wanted one."""
    wanted = _filter(*FLAGS, uris=("file:///a",))
    assert honoured_filter(wanted, EVERYTHING, session_stream=True) == wanted


def test_nothing_is_honoured_without_a_session_stream() -> None:
    """No channel for session-wide messages (e.g. an upstream that refuses GET): an empty filter."""
    assert (
        honoured_filter(_filter(*FLAGS, uris=("file:///a",)), EVERYTHING, session_stream=False)
        == _filter()
    )


@pytest.mark.parametrize(
    ("capability", "flag"),
    [
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ],
)
@pytest.mark.parametrize(
    "announced", [None, {}, {"listChanged": False}, {"listChanged": "true"}, True]
)
def test_a_list_change_is_honoured_only_if_announced(
    capability: str, flag: str, announced: Any
) -> None:
    """A list-changed kind is dropped unless the upstream's capability says `listChanged: true`."""
    capabilities = {**EVERYTHING, capability: announced}
    if announced is None:
        del capabilities[capability]
    honoured = honoured_filter(_filter(*FLAGS), capabilities, session_stream=True)
    assert honoured == _filter(*(f for f in FLAGS if f != flag))


@pytest.mark.parametrize(
    "resources", [None, {"listChanged": True}, {"subscribe": False}, {"subscribe": 1}]
)
def test_resource_subscriptions_need_the_subscribe_capability(resources: Any) -> None:
    """`resourceSubscriptions` is honoured only when the upstream announces `resources.subscribe:
    true`."""
    capabilities = {**EVERYTHING, "resources": resources}
    honoured = honoured_filter(
        _filter("toolsListChanged", uris=("file:///a",)), capabilities, session_stream=True
    )
    assert honoured == _filter("toolsListChanged")


def test_kinds_not_asked_for_are_never_added() -> None:
    """The honoured filter is a subset of the wanted one, however much the upstream announces."""
    assert honoured_filter(
        _filter("promptsListChanged"), EVERYTHING, session_stream=True
    ) == _filter("promptsListChanged")


# ---- acknowledgement, notifications, closing ----------------------------------------------------


@pytest.mark.parametrize("listen_id", [7, "listen-1", 0, ""])
def test_the_acknowledgement_carries_the_honoured_filter_and_the_listen_id(
    listen_id: int | str,
) -> None:
    """The first message names the honoured filter and the subscription id (the listen request's
    id)."""
    honoured = _filter("toolsListChanged", uris=("file:///a",))
    ack = acknowledgement(listen_id, honoured)
    assert ack == {
        "jsonrpc": "2.0",
        "method": ACKNOWLEDGED,
        "params": {
            "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]},
            "_meta": {META_SUBSCRIPTION_ID: listen_id},
        },
    }
    assert_valid(ack, "SubscriptionsAcknowledgedNotification", "modern")


def test_an_empty_acknowledgement_is_still_valid() -> None:
    """Nothing honoured: the acknowledgement says so with an empty filter."""
    ack = acknowledgement(1, _filter())
    assert ack["params"]["notifications"] == {}
    assert_valid(ack, "SubscriptionsAcknowledgedNotification", "modern")


@pytest.mark.parametrize(
    ("method", "flag"), [(method, flag) for method, (flag, _) in LIST_CHANGED.items()]
)
def test_a_list_change_reaches_a_listener_that_opted_in_tagged(method: str, flag: str) -> None:
    """An opted-in list change is forwarded with the subscription id; others' kinds are dropped."""
    upstream = _notification(method)
    assert listen_notification(upstream, _filter(flag), 9) == {
        "jsonrpc": "2.0",
        "method": method,
        "params": {"_meta": {META_SUBSCRIPTION_ID: 9}},
    }
    assert (
        listen_notification(upstream, _filter(*(f for f in FLAGS if f != flag), uris=("a://1",)), 9)
        is None
    )


def test_list_change_notifications_are_schema_valid_when_tagged() -> None:
    """Each tagged list change is a valid modern notification of its kind."""
    kinds = {
        "notifications/tools/list_changed": "ToolListChangedNotification",
        "notifications/prompts/list_changed": "PromptListChangedNotification",
        "notifications/resources/list_changed": "ResourceListChangedNotification",
    }
    assert set(kinds) == set(LIST_CHANGED)
    for method, definition in kinds.items():
        assert_valid(_notification(method), definition, "legacy")
        tagged = listen_notification(_notification(method), _filter(*FLAGS), "s")
        assert tagged is not None
        assert_valid(tagged, definition, "modern")


def test_a_resource_update_reaches_only_listeners_of_that_uri() -> None:
    """`resources/updated` goes to a listener whose filter names the URI, tagged, other
    params kept."""
    upstream = _notification(RESOURCE_UPDATED, uri="file:///a", title="A")
    assert_valid(upstream, "ResourceUpdatedNotification", "legacy")
    tagged = listen_notification(upstream, _filter(uris=("file:///a",)), "L")
    assert tagged == {
        "jsonrpc": "2.0",
        "method": RESOURCE_UPDATED,
        "params": {"uri": "file:///a", "title": "A", "_meta": {META_SUBSCRIPTION_ID: "L"}},
    }
    assert_valid(tagged, "ResourceUpdatedNotification", "modern")
    assert listen_notification(upstream, _filter(*FLAGS, uris=("file:///b",)), "L") is None
    assert (
        listen_notification(_notification(RESOURCE_UPDATED), _filter(uris=("file:///a",)), "L")
        is None
    )


def test_tagging_keeps_other_meta_and_replaces_a_foreign_subscription_id() -> None:
    """The upstream's own `_meta` entries survive; a subscription id it sent is overwritten by the
    listener's."""
    upstream = _notification(
        RESOURCE_UPDATED, uri="a://1", _meta={"vendor/x": 1, META_SUBSCRIPTION_ID: "upstream's"}
    )
    before = copy.deepcopy(upstream)
    tagged = listen_notification(upstream, _filter(uris=("a://1",)), 3)
    assert tagged is not None
    assert tagged["params"]["_meta"] == {"vendor/x": 1, META_SUBSCRIPTION_ID: 3}
    assert upstream == before  # the upstream message is not modified


@pytest.mark.parametrize(
    "message",
    [
        _notification("notifications/progress", progressToken="t", progress=1),
        _notification("notifications/message", level="emergency", data="x"),
        _notification("notifications/cancelled", requestId=1),
        _notification("notifications/elicitation/complete", elicitationId="e"),
        _notification("notifications/roots/list_changed"),
        {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}},
        {"jsonrpc": "2.0"},
    ],
)
def test_request_scoped_and_unknown_messages_never_go_on_a_listen_stream(
    message: JsonObject,
) -> None:
    """Progress, logs, cancellations, pushes and the like are not listen notifications, whatever the
    filter."""
    assert listen_notification(message, _filter(*FLAGS, uris=("a://1",)), 1) is None


def test_session_wide_methods_are_the_list_changes_and_resource_updates() -> None:
    """What the engine publishes to listeners is exactly what a listener can opt in to."""
    assert SESSION_WIDE == {*LIST_CHANGED, RESOURCE_UPDATED}


@pytest.mark.parametrize("server_info", [None, {"name": "legacy", "version": "1.0"}])
def test_the_closing_result_names_the_subscription(server_info: JsonObject | None) -> None:
    """A bridge-initiated end of a listen stream: `resultType: complete` with the
    subscription id."""
    result = closing_result("listen-9", server_info)
    meta: JsonObject = {META_SUBSCRIPTION_ID: "listen-9"}
    if server_info is not None:
        meta[META_SERVER_INFO] = server_info
    assert result == {"resultType": RESULT_COMPLETE, "_meta": meta}
    assert_valid(
        {"jsonrpc": "2.0", "id": "listen-9", "result": result},
        "SubscriptionsListenResultResponse",
        "modern",
    )


@pytest.mark.parametrize("method", [None, 7, ["notifications/tools/list_changed"], {"m": 1}])
def test_a_notification_whose_method_is_not_a_string_reaches_no_listener(method: object) -> None:
    """Malformed upstream notifications are dropped, never raised."""
    honoured = ListenFilter(frozenset({"toolsListChanged"}), frozenset({"test://a"}))
    assert listen_notification({"jsonrpc": "2.0", "method": method}, honoured, 1) is None
