"""The reverse direction over HTTP: the real legacy `mcp` 1.x client, in front of real `mcp` 2.x
servers that ask with `InputRequiredResult` (modern-only and dual-era) through the bridge, gets
what the legacy interactive server gives it directly: the same results, asked the same inputs."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import aiohttp
import pytest

from .harness import (
    BRIDGE_EXE,
    LEGACY_PYTHON,
    PEERS_DIR,
    PeerProcess,
    Peers,
    bridge_env,
    free_port,
)

T = 90.0
SCENARIOS_CLIENT = PEERS_DIR / "legacy_scenarios_client.py"
MODERN_INTERACTIVE = PEERS_DIR / "modern_interactive_server.py"
COMMON = (
    "echo",
    "ask",
    "ask_twice",
    "ask_url",
    "sample",
    "roots",
    "everything",
    "prompt",
    "resource",
    "ping",
)


async def run_json(*argv: str, env: dict[str, str] | None = None) -> Any:
    """Run a client program to the end; the JSON object on its last line."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode(errors="replace")[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def run_scenarios(url: str, *scenarios: str, options: tuple[str, ...] = ()) -> Any:
    """Run tests/peers/legacy_scenarios_client.py (mcp 1.x) against `url` (or, with `options`
    `--command CMD`, over stdio); its JSON report."""
    where = ("--url", url) if url else ()
    return await run_json(str(LEGACY_PYTHON), str(SCENARIOS_CLIENT), *where, *options, *scenarios)


def modern_interactive(peers: Peers, *args: str) -> PeerProcess:
    port = free_port()
    argv = [sys.executable, str(MODERN_INTERACTIVE), "--port", str(port), *args]
    return peers.start("modern-interactive", argv, port)


def comparable(report: Any) -> Any:
    """The outcomes, with concurrent pushes in a stable order (a server may send them in any)."""
    outcomes = report["outcomes"]
    for outcome in outcomes.values():
        outcome["asked"] = sorted(outcome["asked"], key=lambda asked: json.dumps(asked))
    return {"protocolVersion": report["protocolVersion"], "outcomes": outcomes}


async def readyz_era(bridge: PeerProcess) -> Any:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{bridge.port}/readyz") as response,
    ):
        return (await response.json())["checks"]["era"]


@pytest.mark.parametrize("era", ["modern", "dual"])
async def test_legacy_client_gets_what_the_legacy_server_gives(peers: Peers, era: str) -> None:
    legacy = peers.legacy("interactive_server.py")
    server = modern_interactive(peers, *(["--modern-only"] if era == "modern" else []))
    bridge = peers.bridge(server.url)
    async with asyncio.timeout(T):
        direct = await run_scenarios(legacy.url, *COMMON)
        bridged = await run_scenarios(bridge.url, *COMMON)
        detected = await readyz_era(bridge)
    assert detected == era  # a -32022 inside an HTTP 200 to initialize is a refusal: modern-only
    assert comparable(bridged) == comparable(direct)
    assert (
        bridged["outcomes"]["everything"]["text"] == "Ada | It is sunny | file:///work/a,file:///b"
    )
    assert bridged["outcomes"]["ask_url"]["asked"][0]["elicitationId"] is True  # minted
    assert '"mode": "reverse' in bridge.log_text(200_000)


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_declines_and_cancels_reach_the_server(peers: Peers, action: str) -> None:
    legacy = peers.legacy("interactive_server.py")
    bridge = peers.bridge(modern_interactive(peers, "--modern-only").url)
    options = ("--elicit", action)
    async with asyncio.timeout(T):
        direct = await run_scenarios(legacy.url, "ask", "ask_url", options=options)
        bridged = await run_scenarios(bridge.url, "ask", "ask_url", options=options)
    assert comparable(bridged) == comparable(direct)
    assert json.loads(bridged["outcomes"]["ask"]["text"]) == {"action": action, "content": None}
    assert bridged["outcomes"]["ask_url"]["text"] == f"url elicitation: {action}"


async def test_an_error_answer_and_undeclared_inputs_fail_the_request(peers: Peers) -> None:
    bridge = peers.bridge(modern_interactive(peers, "--modern-only").url)
    async with asyncio.timeout(T):
        failed = await run_scenarios(bridge.url, "ask", options=("--elicit", "error"))
        undeclared = await run_scenarios(
            bridge.url, "sample", "roots", "echo", options=("--no-sampling", "--no-roots")
        )
    assert failed["outcomes"]["ask"]["error"] == {
        "code": -32603,
        "message": "the user interface failed",
    }
    outcomes = undeclared["outcomes"]
    assert outcomes["sample"] == {
        "error": {"code": -32602, "message": "Client does not support sampling"},
        "asked": [],
        "notes": [],
    }
    assert outcomes["roots"]["error"] == {
        "code": -32602,
        "message": "Client does not support roots",
    }
    assert outcomes["echo"]["text"] == "unchanged"  # the session goes on


async def test_large_answers_reach_the_legacy_client_whole(peers: Peers) -> None:
    """Issue 40, defect 3: a 1 MiB text answered as `application/json` (the same as the legacy
    server's used directly), 10,000 inputs asked in one round (refused with the round's limit,
    which needs the whole answer read) and an 8 MiB `requestState` (back to the server unchanged).
    Only the first chunk of a JSON answer was read: each got "-32603 The upstream server answered
    HTTP 200 without a reply"."""
    legacy = peers.legacy("interactive_server.py")
    bridge = peers.bridge(modern_interactive(peers, "--modern-only").url)
    async with asyncio.timeout(T):
        direct = await run_scenarios(legacy.url, "big")
        bridged = await run_scenarios(bridge.url, "big", "many_inputs", "big_state")
    outcomes = bridged["outcomes"]
    assert outcomes["big"] == direct["outcomes"]["big"]
    assert outcomes["big"]["text"] == "x" * 1_048_576
    assert outcomes["many_inputs"] == {
        "error": {"code": -32603, "message": "The server asked for more than 32 inputs at once"},
        "asked": [],
        "notes": [],
    }
    assert outcomes["big_state"]["text"] == "Ada: requestState of 8388608 characters intact"
    assert [asked["method"] for asked in outcomes["big_state"]["asked"]] == ["elicitation/create"]


async def test_an_answer_past_the_cap_is_a_precise_error(peers: Peers) -> None:
    """Past `upstream.max_line_bytes` (here 1 MiB, against a 2 MiB answer) the read stops and the
    legacy client gets -32603 naming the limit; the session goes on."""
    server = modern_interactive(peers, "--modern-only")
    bridge = peers.bridge(server.url, env=bridge_env({"upstream": {"max_line_bytes": 1_048_576}}))
    async with asyncio.timeout(T):
        bridged = await run_scenarios(bridge.url, "big", "echo")
    assert bridged["outcomes"]["big"] == {
        "error": {
            "code": -32603,
            "message": "The upstream server's answer is larger than the limit of 1048576 bytes",
        },
        "asked": [],
        "notes": [],
    }
    assert bridged["outcomes"]["echo"]["text"] == "unchanged"


async def test_progress_and_the_session_log_level_reach_the_legacy_client(peers: Peers) -> None:
    bridge = peers.bridge(modern_interactive(peers, "--modern-only").url)
    async with asyncio.timeout(T):
        report = await run_scenarios(bridge.url, "chatty")
    assert report["outcomes"]["chatty"] == {
        "text": "chatted",
        "isError": False,
        "asked": [],
        "notes": [
            {"progress": 1.0, "total": 2.0, "message": "half"},
            {"log": "info", "data": "chatty t1"},
            {"progress": 2.0, "total": 2.0, "message": "done"},
        ],
    }


CHATTED = {
    "text": "chatted",
    "isError": False,
    "asked": [],
    "notes": [
        {"progress": 1.0, "total": 2.0, "message": "half"},
        {"log": "info", "data": "chatty t1"},
        {"progress": 2.0, "total": 2.0, "message": "done"},
    ],
}


@pytest.mark.parametrize("front", ["http", "stdio"])
async def test_a_legacy_client_that_sets_no_level_gets_the_logs_as_from_a_legacy_server(
    peers: Peers, front: str
) -> None:
    """A legacy server sends its log messages to a client that never sent `logging/setLevel`; a
    modern server sends them only to requests that ask (`logLevel`): the bridge asks on the
    client's behalf, and follows the level the client sets."""
    legacy = peers.legacy("interactive_server.py")
    server = modern_interactive(peers, "--modern-only")
    if front == "http":
        where, options = peers.bridge(server.url).url, ()
    else:
        where, options = "", ("--command", f"{BRIDGE_EXE} stdio --upstream {server.url}")
    async with asyncio.timeout(T):
        direct = await run_scenarios(legacy.url, "chatty_quiet")
        bridged = await run_scenarios(where, "chatty_quiet", "chatty_warning", options=options)
    assert direct["outcomes"]["chatty_quiet"] == CHATTED
    assert bridged["outcomes"]["chatty_quiet"] == CHATTED
    quiet = {**CHATTED, "notes": [note for note in CHATTED["notes"] if "log" not in note]}
    assert bridged["outcomes"]["chatty_warning"] == quiet  # the level it set: no info message


async def test_a_dual_server_used_directly_fails_what_the_bridge_serves(peers: Peers) -> None:
    """The reason for the modern side: the SDK's own legacy side cannot push an input request."""
    server = modern_interactive(peers)
    bridge = peers.bridge(server.url)
    async with asyncio.timeout(T):
        direct = await run_scenarios(server.url, "ask")
        bridged = await run_scenarios(bridge.url, "ask")
    assert direct["outcomes"]["ask"]["error"] == {
        "code": -32603,
        "message": "Handler returned an invalid result",
    }
    assert json.loads(bridged["outcomes"]["ask"]["text"])["action"] == "accept"


@pytest.mark.parametrize("era", ["modern", "dual"])
async def test_the_stdio_front_serves_legacy_clients_in_front_of_a_modern_server(
    peers: Peers, era: str
) -> None:
    legacy = peers.legacy("interactive_server.py")
    server = modern_interactive(peers, *(["--modern-only"] if era == "modern" else []))
    command = f"{BRIDGE_EXE} stdio --upstream {server.url}"
    async with asyncio.timeout(T):
        direct = await run_scenarios(legacy.url, *COMMON)
        bridged = await run_scenarios("", *COMMON, "chatty", options=("--command", command))
    chatty = bridged["outcomes"].pop("chatty")
    assert comparable(bridged) == comparable(direct)
    assert [note.get("log") or note.get("message") for note in chatty["notes"]] == [
        "half",
        "info",
        "done",
    ]
