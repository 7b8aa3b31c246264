"""One legacy request through a 2026-07-28 upstream, round after round (docs/directions.md).

The request goes upstream with the session's per-request `_meta`. While the upstream answers
`InputRequiredResult`, its `inputRequests` are pushed to the legacy client on the request's own
stream (all at once, as a legacy server's concurrent pushes), the answers collected and the request
sent again with `inputResponses` and the upstream's `requestState`, until the final result, which
goes back without its modern-only fields. A push the client does not answer within
`reverse.push_timeout_s` is cancelled towards the client (`notifications/cancelled`, as the spec
has a requester do on a timeout) and fails the request; so does an error answer. When the client
goes away, the task running this is cancelled, and with it the upstream request in flight (on HTTP,
closing the stream is the cancellation).

From its first push until it ends, a request waits for its client: it counts in the bridge's one
count of calls waiting for input (`held.max_per_principal`, `held.max_total`, shared with held
calls in the other direction). Past a cap it is answered at once with the held calls' refusal,
its pushes never sent (the upstream keeps nothing of a round: its state travels in
`requestState`, dropped here).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

import structlog

from config.settings import Settings
from proxy.common.faults import Observe, reported_error
from proxy.common.per_principal import PrincipalCounts
from proxy.reverse.sessions import ReverseSession
from proxy.reverse.tool_headers import header_mismatch
from proxy.upstream.modern.caller import ModernCaller
from translators.protocol.eras import CANCELLED, LOG_MESSAGE, PROGRESS, TOOLS_LIST
from translators.reverse.inputs import Push, Refused, input_response, pushes_for
from translators.reverse.session import is_input_required, legacy_result, modern_params
from translators.wire.errors import INTERNAL_ERROR, LimitExceeded
from translators.wire.fast_json import as_object
from translators.wire.jsonrpc import (
    JsonObject,
    error_response,
    notification,
    request,
    result_response,
)

_log = structlog.get_logger("proxy.reverse")
Send = Callable[[JsonObject], None]
_RELAYED = frozenset({PROGRESS, LOG_MESSAGE})


class RoundFailed(Exception):
    def __init__(self, error: JsonObject) -> None:
        super().__init__(error.get("message"))
        self.error = error


class Rounds:
    """Runs legacy requests of one session upstream; `send` writes to the request's stream. The
    bounds are `reverse.push_timeout_s`, `held.max_rounds` and the caps of `held` (`observe`
    hears of their refusals)."""

    def __init__(
        self,
        settings: Settings,
        caller: ModernCaller,
        session: ReverseSession,
        authorization: str | None,
        held: PrincipalCounts,
        observe: Observe | None = None,
    ) -> None:
        self._caller = caller
        self._session = session
        self._held = held
        self._observe = observe
        self._push_timeout_s = settings.reverse.push_timeout_s
        self._max_rounds = settings.held.max_rounds
        self._authorization = authorization
        self._upstream_ids = 0

    async def run(self, message: JsonObject, send: Send) -> JsonObject:
        try:
            return await self._run(message, send)
        finally:
            self._held.release(self)

    async def _run(self, message: JsonObject, send: Send) -> JsonObject:
        client_id = message.get("id")
        extra: JsonObject = {}
        for round_number in range(self._max_rounds + 1):
            reply = await self._call(message, extra, send)
            if header_mismatch(message, reply):  # the tool's x-mcp-header changed, or unknown
                await self._session.tools.relist(self._list_tools)
                reply = await self._call(message, extra, send)
            if message.get("method") == TOOLS_LIST and "result" in reply:
                self._session.tools.learn(as_object(reply["result"]))
            if "error" in reply:
                return error_response(client_id, as_object(reply.get("error")))
            result = as_object(reply.get("result"))
            if not is_input_required(result):
                return result_response(client_id, legacy_result(result))
            if round_number == self._max_rounds:
                break
            try:
                self._wait_for_client()
                responses = await self._ask(result.get("inputRequests"), send)
            except RoundFailed as failed:
                return error_response(client_id, failed.error)
            extra = {"inputResponses": responses}
            if isinstance(result.get("requestState"), str):
                extra["requestState"] = result["requestState"]
        _log.warning("reverse_too_many_rounds", rounds=self._max_rounds)
        return error_response(
            client_id,
            {
                "code": INTERNAL_ERROR,
                "message": f"The server asked for input more than {self._max_rounds} times",
            },
        )

    def _wait_for_client(self) -> None:
        """Count the request as waiting for its client (once), or fail it with the refusal."""
        try:
            self._held.admit(self, self._session.principal)
        except LimitExceeded as refusal:
            if self._observe is not None:
                self._observe(refusal)
            raise RoundFailed(reported_error(refusal)) from None

    async def _call(self, message: JsonObject, extra: JsonObject, send: Send) -> JsonObject:
        self._upstream_ids += 1
        upstream = request(
            f"{message.get('id')!r}-{self._upstream_ids}",
            str(message.get("method")),
            modern_params(self._session.view, message.get("params"), extra),
        )

        def relay(notice: JsonObject) -> None:
            if notice.get("method") in _RELAYED:
                params = {
                    k: v
                    for k, v in as_object(notice.get("params")).items()
                    if k != "_meta" or notice.get("method") == PROGRESS
                }
                send(notification(str(notice["method"]), params))

        headers = self._session.tools.headers_for(upstream)
        return await self._caller.call(upstream, relay, self._authorization, headers)

    async def _list_tools(self, cursor: str | None) -> JsonObject:
        self._upstream_ids += 1
        params = modern_params(self._session.view, {} if cursor is None else {"cursor": cursor})
        listing = request(f"mrtr-bridge-tools-{self._upstream_ids}", TOOLS_LIST, params)
        return await self._caller.call(listing, lambda _: None, self._authorization)

    async def _ask(self, input_requests: Any, send: Send) -> JsonObject:
        pushes = pushes_for(input_requests, self._session.view, _mint_elicitation_id)
        if isinstance(pushes, Refused):
            raise RoundFailed(pushes.error)
        if not pushes:
            return {}
        answers: dict[str, JsonObject] = {}
        try:
            async with asyncio.TaskGroup() as group:
                for push in pushes:
                    group.create_task(self._push(push, send, answers))
        except ExceptionGroup as group_error:
            failed = group_error.subgroup(RoundFailed)
            if failed is None:
                raise
            first = failed.exceptions[0]
            assert isinstance(first, RoundFailed)
            raise first from None
        return answers

    async def _push(self, push: Push, send: Send, answers: dict[str, JsonObject]) -> None:
        push_id = self._session.push_id()
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._session.pending[push_id] = future
        answered = False
        try:
            send(request(push_id, push.method, push.params))
            try:
                async with asyncio.timeout(self._push_timeout_s):
                    answer = await future
            except TimeoutError:
                _log.info("reverse_push_timed_out", push=push.method)
                raise RoundFailed(
                    {
                        "code": INTERNAL_ERROR,
                        "message": f"The client did not answer {push.method} within "
                        f"{self._push_timeout_s:g} s",
                        "data": {"inputKey": push.key[:64]},
                    }
                ) from None
            answered = True
            value = input_response(push, answer)
            if isinstance(value, Refused):
                raise RoundFailed(value.error)
            answers[push.key] = value
        finally:
            self._session.pending.pop(push_id, None)
            if not answered:
                reason = "The request was cancelled or timed out"
                send(notification(CANCELLED, {"requestId": push_id, "reason": reason}))


def _mint_elicitation_id() -> str:
    return f"mrtr-bridge-{secrets.token_urlsafe(12)}"


__all__ = ["Rounds"]
