"""A stalled owner replica is not a gone one: two bridges sharing their requestState key in front of
one mcp 1.x server (`tests/peers/recovery_server.py`, with its run counter). A call waits on r1 (its
owner) for the second of its three rounds; r1 is paused (SIGSTOP); the retry lands on r2, which
forwards it, gets no answer in time and answers the retryable error: nothing runs on r2, although
the tool is annotated idempotent and r2 refreshes its peer set meanwhile. r1 resumes (SIGCONT):
the forward it finds waiting is older than `cluster.proof_max_age_s` and refused, so the same retry
sent again completes on r1. The tool ran once, and completed once."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from mcp import MCPError

from translators.wire.errors import INTERNAL_ERROR

from .cluster_helpers import metric, scrape
from .harness import Peers, modern_client
from .mrtr_helpers import Answerer, ManualRounds, elicited
from .test_cluster_recovery import replicas_of_one_server, runs
from .test_recovery import ALICE, finish, second_round

pytestmark = pytest.mark.integration
T = 90  # bound on the test body, seconds
FAST = {
    # the forward's read timeout is request_timeout_s + sse_keepalive_s + 10 s = 13 s
    "front": {"request_timeout_s": 2, "sse_keepalive_s": 1},
    # r2 asks r1 for its id every second, and waits at most 1 s for the answer
    "cluster": {"refresh_s": 1, "connect_timeout_s": 0.5, "proof_max_age_s": 3},
}
STALLED = "The replica holding this call did not answer in time; send the same request again"


async def test_a_stalled_owner_gets_a_retryable_error_and_keeps_its_call(
    peers: Peers, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    owner, other = replicas_of_one_server(peers, state_dir, 2, FAST)
    async with asyncio.timeout(T):
        key, state = await second_round(owner.url, "survey", "idem")
        os.kill(owner.popen.pid, signal.SIGSTOP)
        try:
            async with modern_client(
                other.url, headers=ALICE, **Answerer().client_kwargs()
            ) as client:
                with pytest.raises(MCPError) as stalled:
                    await ManualRounds(client).call(
                        "survey",
                        {"tag": "idem"},
                        state=state,
                        responses={key: elicited(color="blue")},
                    )
            # nothing ran again on r2, though the tool is idempotent
            assert runs(state_dir, "idem") == 1
        finally:
            os.kill(owner.popen.pid, signal.SIGCONT)
        assert (stalled.value.code, stalled.value.error.message) == (INTERNAL_ERROR, STALLED)
        assert stalled.value.error.data == {"source": "mrtr-bridge", "retryable": True}
        assert await finish(other.url, "survey", "idem", key, state) == "Ada likes blue"
        assert runs(state_dir, "idem") == 1
        on_other, on_owner = await scrape(other.port), await scrape(owner.port)
    assert metric(on_other, "mrtr_bridge_forward_failures_total", reason="owner_stalled") == 1
    assert metric(on_other, "mrtr_bridge_forwarded_retries_total") == 1
    assert metric(on_other, "mrtr_bridge_recovered_calls_total", cause="owner_unreachable") == 0
    # the forward r1 found waiting when it resumed was too old to serve
    assert metric(on_owner, "mrtr_bridge_forward_proof_rejections_total", reason="stale") == 1
