"""Recovery of lost held calls with real peers: the `mcp` 2.x client, the bridge as a process
(restarted with a persistent key, or with a short held-call TTL), and the mcp 1.x server
`tests/peers/recovery_server.py`, whose run counter (`<state dir>/runs-<tag>`) shows how often a
tool ran.

Each call asks two questions in turn, so it takes three client rounds; the bridge is restarted (or
the held call expires) while the call waits for its second answer.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Mapping
from pathlib import Path

import httpx2
import pytest

from .cluster_helpers import metric
from .harness import PeerProcess, Peers, bridge_env, modern_client
from .mrtr_helpers import (
    Answerer,
    ManualRounds,
    client_rejection,
    elicited,
    rejection_reasons,
    tampered,
    text_of,
)

pytestmark = pytest.mark.integration
T = 60  # bound on every test body, seconds
SERVER = "recovery_server.py"
ALICE = {"Authorization": "Bearer alice"}


def key_env(**sections: Mapping[str, object]) -> dict[str, str]:
    """A persistent requestState key (a restarted bridge opens what the first one sealed), plus
    `sections`."""
    key = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    held = {"keys": {"k1": key}, **sections.pop("held", {})}
    return bridge_env({"held": held, **sections})


class Setup:
    """The legacy server (kept across restarts) and the current bridge in front of it."""

    def __init__(self, peers: Peers, state_dir: Path, env: dict[str, str]) -> None:
        self.peers, self.state_dir, self.env = peers, state_dir, env
        self.legacy = peers.legacy(SERVER, "--state-dir", str(state_dir))
        self.bridge = peers.bridge(self.legacy.url, env=env)

    def restart(self, *, crash: bool = False) -> PeerProcess:
        """Stop the bridge (SIGTERM, or SIGKILL for a crash) and start it again with the
        same key."""
        if crash:
            self.bridge.popen.kill()
            self.bridge.popen.wait(timeout=10)
        else:
            self.bridge.stop()
        self.bridge = self.peers.bridge(self.legacy.url, env=self.env)
        return self.bridge

    def runs(self, tag: str) -> int:
        path = self.state_dir / f"runs-{tag}"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def log(self) -> str:
        return self.bridge.log_path.read_text(encoding="utf-8", errors="replace")

    async def metric(self, name: str, **labels: str) -> float:
        async with httpx2.AsyncClient() as http:
            text = (await http.get(self.bridge.url.replace("/mcp", "/metrics"))).text
        return metric(text, name, **labels)


@pytest.fixture
def setup(peers: Peers, tmp_path: Path) -> Setup:
    return Setup(peers, tmp_path / "state", key_env())


async def second_round(
    url: str, tool: str, tag: str, headers: Mapping[str, str] = ALICE
) -> tuple[str, str]:
    """Start `tool`, answer its first question: (the second question's key, the requestState to
    retry with)."""
    async with modern_client(url, headers=headers, **Answerer().client_kwargs()) as client:
        manual = ManualRounds(client)
        (key1,), state1 = await manual.held(tool, {"tag": tag})
        (key2,), state2 = await manual.held(
            tool, {"tag": tag}, state=state1, responses={key1: elicited(name="Ada")}
        )
        assert key2 != key1
        return key2, state2


async def finish(
    url: str, tool: str, tag: str, key: str, state: str, headers: Mapping[str, str] = ALICE
) -> str:
    async with modern_client(url, headers=headers, **Answerer().client_kwargs()) as client:
        done = await ManualRounds(client).done(
            tool, {"tag": tag}, state=state, responses={key: elicited(color="blue")}
        )
        return text_of(done)


async def refused(
    url: str, tool: str, tag: str, key: str, state: str, headers: Mapping[str, str] = ALICE
) -> None:
    async with modern_client(url, headers=headers, **Answerer().client_kwargs()) as client:
        await client_rejection(
            ManualRounds(client).call(
                tool, {"tag": tag}, state=state, responses={key: elicited(color="blue")}
            )
        )


async def test_restart_recovers_an_idempotent_tool_and_refuses_an_unannotated_one(
    setup: Setup,
) -> None:
    async with asyncio.timeout(T):
        key_a, state_a = await second_round(setup.bridge.url, "survey", "idem")
        key_p, state_p = await second_round(setup.bridge.url, "survey_plain", "plain")
        setup.restart()
        assert await finish(setup.bridge.url, "survey", "idem", key_a, state_a) == "Ada likes blue"
        await refused(setup.bridge.url, "survey_plain", "plain", key_p, state_p)
        # the unannotated tool ran exactly once
        assert (setup.runs("idem"), setup.runs("plain")) == (
            2,
            1,
        )
        assert await setup.metric("mrtr_bridge_recovered_calls_total", cause="lost") == 1
        assert (
            await setup.metric(
                "mrtr_bridge_recovery_refusals_total", reason="not_annotated_idempotent"
            )
            == 1
        )
        assert (
            '"reason": "not annotated idempotent (neither readOnlyHint nor idempotentHint is true)"'
            in setup.log()
        )
        assert rejection_reasons(setup.bridge) == ["unknown_held_call"]


async def test_a_crash_is_recovered_like_a_restart(setup: Setup) -> None:
    async with asyncio.timeout(T):
        key, state = await second_round(setup.bridge.url, "survey_readonly", "crash")
        setup.restart(crash=True)
        assert (
            await finish(setup.bridge.url, "survey_readonly", "crash", key, state)
            == "Ada likes blue"
        )
        assert setup.runs("crash") == 2


async def test_recovery_after_expiry(peers: Peers, tmp_path: Path) -> None:
    setup = Setup(peers, tmp_path / "state", key_env(held={"ttl_s": 1}))
    async with asyncio.timeout(T):
        key, state = await second_round(setup.bridge.url, "survey", "expiry")
        deadline = time.monotonic() + 30
        while "held call expired" not in setup.log():  # the bridge abandoned the call upstream
            assert time.monotonic() < deadline, setup.log()
            await asyncio.sleep(0.05)
        # ... and has let go of it (its session is closed a moment after the cancel): until then a
        # retry is a replay of a call still here, not a lost one
        while await setup.metric("mrtr_bridge_interactive_calls") != 0:
            assert time.monotonic() < deadline, setup.log()
            await asyncio.sleep(0.05)
        assert await finish(setup.bridge.url, "survey", "expiry", key, state) == "Ada likes blue"
        assert setup.runs("expiry") == 2
        assert await setup.metric("mrtr_bridge_recovered_calls_total", cause="expired") == 1


async def test_a_question_changed_between_the_runs_is_asked_again(setup: Setup) -> None:
    async with asyncio.timeout(T):
        key2, state2 = await second_round(setup.bridge.url, "survey", "changed")
        setup.restart()
        (setup.state_dir / "question-changed").write_text("Your full name?", encoding="utf-8")
        async with modern_client(
            setup.bridge.url, headers=ALICE, **Answerer().client_kwargs()
        ) as client:
            manual = ManualRounds(client)
            requests, state3 = await manual.held(
                "survey", {"tag": "changed"}, state=state2, responses={key2: elicited(color="blue")}
            )
            ((key3, asked),) = requests.items()
            assert key3 != key2 and asked.params.message == "Your full name?"
            done = await manual.done(
                "survey",
                {"tag": "changed"},
                state=state3,
                responses={key3: elicited(name="Ada Lovelace")},
            )
        assert text_of(done) == "Ada Lovelace likes blue"
        assert setup.runs("changed") == 2


async def test_allowlist_recovers_what_it_lists_only(peers: Peers, tmp_path: Path) -> None:
    setup = Setup(
        peers,
        tmp_path / "state",
        key_env(recovery={"reexecute": "allowlist", "tools": ["survey_p*"]}),
    )
    async with asyncio.timeout(T):
        key_p, state_p = await second_round(setup.bridge.url, "survey_plain", "listed")
        key_a, state_a = await second_round(setup.bridge.url, "survey", "unlisted")
        setup.restart()
        assert (
            await finish(setup.bridge.url, "survey_plain", "listed", key_p, state_p)
            == "Ada likes blue"
        )
        await refused(setup.bridge.url, "survey", "unlisted", key_a, state_a)
        assert (setup.runs("listed"), setup.runs("unlisted")) == (2, 1)
        assert (
            await setup.metric("mrtr_bridge_recovery_refusals_total", reason="not_allowlisted") == 1
        )


async def test_tampered_and_foreign_principal_states_are_refused_as_before(setup: Setup) -> None:
    async with asyncio.timeout(T):
        key, state = await second_round(setup.bridge.url, "survey", "hostile")
        setup.restart()
        await refused(setup.bridge.url, "survey", "hostile", key, tampered(state))
        await refused(
            setup.bridge.url,
            "survey",
            "hostile",
            key,
            state,
            headers={"Authorization": "Bearer mallory"},
        )
        assert setup.runs("hostile") == 1
        assert rejection_reasons(setup.bridge) == ["authentication_failed", "other_principal"]
        assert await finish(setup.bridge.url, "survey", "hostile", key, state) == "Ada likes blue"
        assert setup.runs("hostile") == 2
