"""A legacy task behind OAuth pass-through whose token the authorization server revokes (issue 26
part 3; docs/tasks.md § Failure paths): the real authorization server (`oauth_as.mjs`, with
revocation and introspection), an mcp 1.x resource server running legacy task tools that checks
each token at `/introspect`, and the bridge in front of it.

The bridge keeps the task's state, so without asking the upstream it would go on showing the task
(and its result) to a token that no longer works there. Expected: every `tasks/*` with the revoked
token gets the upstream's 401, rewritten to the bridge, whether the task still runs or has ended;
a new token is a new principal (the principal is the token's digest) and finds no task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import pytest

from translators.wire.errors import INVALID_PARAMS

from .harness import Peers
from .oauth_flow import OAuthStack, client_credentials_token, start_stack
from .raw_http import ModernPoster
from .tasks_helpers import TASKS_CAPS, error_of, result_of

T = 60
SCOPE = "mcp:tools"
NOT_FOUND = {"code": INVALID_PARAMS, "message": "Task not found"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthStack]:
    peers = Peers(log_dir=tmp_path_factory.mktemp("oauth-task-peers"))
    try:
        yield start_stack(peers, "--introspect", "--task-tools")
    finally:
        peers.close()


def as_caller(http: aiohttp.ClientSession, stack: OAuthStack, token: str) -> ModernPoster:
    headers = {"Authorization": f"Bearer {token}"}
    return ModernPoster(http, stack.url, capabilities=dict(TASKS_CAPS), headers=headers)


async def revoke(stack: OAuthStack, token: str) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{stack.issuer}revoke", json={"token": token}) as response,
    ):
        assert response.status == 200, await response.text()


TASK_COMPLETED = '"status": "completed", "event": "legacy_task_ended"'


def completions(stack: OAuthStack) -> int:
    """How many legacy tasks the bridge has logged as completed so far."""
    return stack.bridge.log_text(limit=10_000_000).count(TASK_COMPLETED)


async def until_completions(stack: OAuthStack, count: int) -> None:
    """Wait (generously bounded) until the bridge has logged `count` completed tasks."""
    async with asyncio.timeout(T / 2):
        while completions(stack) < count:
            await asyncio.sleep(0.2)


def assert_challenged(status: int, challenge: str | None, stack: OAuthStack) -> None:
    assert status == 401
    assert challenge is not None and challenge.startswith("Bearer ")
    assert f'resource_metadata="{stack.metadata_url}"' in challenge, challenge


async def test_a_revoked_token_no_longer_reads_or_changes_its_task(stack: OAuthStack) -> None:
    token = await client_credentials_token(stack.issuer, audience=stack.url, scope=SCOPE)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = as_caller(http, stack, token)
        completed_before = completions(stack)
        call = {"name": "slow_compute", "arguments": {"seconds": 2, "label": "tide"}}
        created = result_of(await alice.post("tools/call", call))
        assert created["resultType"] == "task", created
        task_id = created["taskId"]
        running = result_of(await alice.post("tasks/get", {"taskId": task_id}))
        assert running["status"] == "working", running
        await revoke(stack, token)
        for method, extra in [
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ]:
            reply = await alice.post(method, {"taskId": task_id, **extra})
            assert_challenged(reply.status, reply.headers.get("www-authenticate"), stack)
        # the task was not cancelled (that request was refused): it ends upstream, and its result
        # is still not shown to the revoked token
        await until_completions(stack, completed_before + 1)
        reply = await alice.post("tasks/get", {"taskId": task_id})
        assert_challenged(reply.status, reply.headers.get("www-authenticate"), stack)
        assert "Computed tide" not in reply.text
        # a fresh token of the same client is another principal: the id is not its task
        fresh = await client_credentials_token(stack.issuer, audience=stack.url, scope=SCOPE)
        again = as_caller(http, stack, fresh)
        assert error_of(await again.post("tasks/get", {"taskId": task_id})) == NOT_FOUND


async def test_a_valid_token_reads_its_task_to_completion(stack: OAuthStack) -> None:
    """The ground truth for the test above: the same flow without revocation completes."""
    token = await client_credentials_token(stack.issuer, audience=stack.url, scope=SCOPE)
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        alice = as_caller(http, stack, token)
        call = {"name": "slow_compute", "arguments": {"seconds": 1, "label": "moon"}}
        task_id = result_of(await alice.post("tools/call", call))["taskId"]
        async with asyncio.timeout(T / 2):
            while (task := result_of(await alice.post("tasks/get", {"taskId": task_id})))[
                "status"
            ] not in ("completed", "failed", "cancelled"):
                await asyncio.sleep(0.2)
        assert task["status"] == "completed", task
        assert task["result"]["content"] == [{"type": "text", "text": "Computed moon after 1s"}]
