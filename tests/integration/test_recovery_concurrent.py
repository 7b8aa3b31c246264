"""Concurrent retries of one lost `requestState` (issue 24): after a restart with the same key, 20
identical retries of an idempotent tool's round-2 state reach the bridge at once. The state is
claimed before anything awaits, so exactly one runs the tool again (the mcp 1.x
`tests/peers/recovery_server.py` counts two runs in all) and the 19 others are told the state was
already used (docs/operations.md § Recovery)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from translators.wire.errors import USED_REQUEST_STATE_MESSAGE

from .harness import Peers
from .mrtr_helpers import accept, assert_state_rejected, call_tool, complete_text, poster
from .test_recovery import Setup, T, key_env, second_round

pytestmark = pytest.mark.integration
RETRIES = 20


@pytest.fixture
def restartable(peers: Peers, tmp_path: Path) -> Setup:
    return Setup(peers, tmp_path / "state", key_env())


async def test_concurrent_retries_of_a_lost_state_run_the_tool_once_more(
    restartable: Setup,
) -> None:
    setup = restartable
    async with asyncio.timeout(T):
        key, state = await second_round(setup.bridge.url, "survey", "many")
        setup.restart()
        async with aiohttp.ClientSession() as http:
            post = poster(http, setup.bridge.url)
            replies = await asyncio.gather(
                *(
                    call_tool(
                        post,
                        "survey",
                        {"tag": "many"},
                        responses={key: accept(color="blue")},
                        state=state,
                    )
                    for _ in range(RETRIES)
                )
            )
        completed = [reply for reply in replies if "result" in reply.response]
        refused = [reply for reply in replies if "error" in reply.response]
        assert [complete_text(reply) for reply in completed] == ["Ada likes blue"]
        assert len(refused) == RETRIES - 1
        for reply in refused:
            assert_state_rejected(reply, USED_REQUEST_STATE_MESSAGE)
        assert setup.runs("many") == 2  # the first run and one re-execution
        assert await setup.metric("mrtr_bridge_recovered_calls_total", cause="lost") == 1
        assert (
            await setup.metric("mrtr_bridge_request_state_rejections_total", reason="already_used")
            == RETRIES - 1
        )
