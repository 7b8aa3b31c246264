"""Several legacy servers behind one bridge (docs/several-servers.md): each named upstream at
`/servers/NAME/mcp`, as each behaves used directly.

One bridge fronts `alpha` (the interactive mcp 1.x server over HTTP), `beta` (the same server over
stdio, its own journal), `gamma` (the conformance fixture over HTTP) and `delta` (the interactive
contract written for mcp 2.x, a modern-only 2026-07-28 server: another era), given as repeated
`--upstream NAME=URL` / `--upstream-command NAME=CMD` flags. The modern client (mcp 2.x) runs the
interactive scenarios at `alpha`, `beta` and `delta` and gets the same at each; the mcp 1.x
scenario client gets at `alpha`'s and `delta`'s paths what it gets from `alpha`'s server used
directly, and the mcp 1.x client at `gamma`'s what it gets from the fixture directly; a
requestState sealed for one upstream is refused at another (nothing reaches either server), an
unknown name is 404, the status page and the metrics name every upstream, and one upstream going
down leaves the others serving. A desktop client's `mcpServers` file
(`--servers-json`) configures the same; `check` checks every upstream; `stdio --server NAME`
serves one of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from translators.protocol.eras import MODERN_VERSION

from .harness import (
    BRIDGE_EXE,
    REPO_ROOT,
    InputAnswers,
    PeerProcess,
    Peers,
    RawReply,
    bridge_env,
    modern_client,
    run_legacy_script,
)
from .mrtr_helpers import (
    INTERACTIVE,
    Answerer,
    Journal,
    accept,
    assert_state_rejected,
    call_tool,
    complete_text,
    input_required,
    interactive_stdio_command,
    poster,
    rejection_reasons,
    text_of,
)
from .test_check import run_check_raw
from .test_reverse_http import COMMON, comparable, modern_interactive, run_scenarios

T = 60.0
ANSWER = accept(answer="yes-7c1d")
ANSWER_TEXT = '{"action": "accept", "content": {"answer": "yes-7c1d"}}'
FIXTURE_TOOLS = 27
NAMES = ("alpha", "beta", "delta", "gamma")
INTERACTIVE_NAMES = ("alpha", "beta", "delta")


@dataclass
class Fleet:
    """The bridge in front of alpha, beta and gamma, with the journals of alpha and beta."""

    bridge: PeerProcess
    alpha: PeerProcess
    gamma: PeerProcess
    delta: PeerProcess
    journals: dict[str, Journal]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.bridge.port}/servers/{name}/mcp"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.bridge.port}"


@pytest.fixture(scope="module")
def fleet(module_peers: Peers, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    alpha_dir, beta_dir = tmp_path_factory.mktemp("alpha"), tmp_path_factory.mktemp("beta")
    alpha = module_peers.legacy(INTERACTIVE, "--state-dir", str(alpha_dir))
    gamma = module_peers.legacy()
    delta = modern_interactive(module_peers, "--modern-only")
    more = ("--upstream", f"gamma={gamma.url}", "--upstream", f"delta={delta.url}")
    bridge = module_peers.bridge(None, args=named_args(alpha.url, beta_dir, *more))
    journals = {"alpha": Journal(alpha_dir), "beta": Journal(beta_dir)}
    return Fleet(bridge, alpha, gamma, delta, journals)


async def answered(
    http: aiohttp.ClientSession, url: str, tag: str, key: str, state: str
) -> RawReply:
    """The retry of `ask` for `tag` at `url`: `ANSWER` to input `key`, with `state`."""
    return await call_tool(
        poster(http, url), "ask", {"tag": tag}, responses={key: ANSWER}, state=state
    )


def named_args(alpha_url: str, beta_dir: Path, *more: str) -> list[str]:
    """`--upstream alpha=URL --upstream-command beta=<the interactive server over stdio>`."""
    beta = interactive_stdio_command(beta_dir)
    return ["--upstream", f"alpha={alpha_url}", "--upstream-command", f"beta={beta}", *more]


async def held_call(http: aiohttp.ClientSession, url: str, tag: str) -> tuple[str, str]:
    """Start the interactive server's `ask` for `tag` at `url`: (input key, requestState)."""
    requests, state = input_required(await call_tool(poster(http, url), "ask", {"tag": tag}))
    (key,) = requests
    return key, state


async def test_the_start_line_names_every_upstream_and_its_path(fleet: Fleet) -> None:
    started = next(
        json.loads(line)
        for line in fleet.bridge.log_text(10**6).splitlines()
        if '"bridge_started"' in line
    )
    assert started["listen"] == ", ".join(fleet.url(name) for name in NAMES)
    assert started["upstream"] == (
        f"alpha={fleet.alpha.url}, beta=stdio:{interactive_stdio_command(Path('.')).split()[0]}, "
        f"delta={fleet.delta.url}, gamma={fleet.gamma.url}"
    )


# the modern client declares sampling without tools: `sample` asks without them
MODERN_SCENARIOS = {"ask": {}, "ask_twice": {}, "sample": {"use_tools": False}, "roots": {}}


async def modern_scenarios(url: str, tag: str = "fleet") -> dict[str, str]:
    """The mcp 2.x client's result text of each interactive scenario at `url` (tags `fleet-*`)."""
    answers = Answerer(roots=["file:///work/a"])
    found = {}
    async with modern_client(url, **answers.client_kwargs()) as client:
        for tool, arguments in {**MODERN_SCENARIOS, "everything": {}}.items():
            result = await client.call_tool(tool, {"tag": f"{tag}-{tool}", **arguments})
            found[tool] = text_of(result)
        prompt = await client.get_prompt("ask_prompt", {"tag": f"{tag}-prompt"})
        found["prompt"] = prompt.messages[0].content.model_dump_json()
        read = await client.read_resource(f"interactive://ask/{tag}-resource")
        found["resource"] = read.contents[0].model_dump_json()
    return found


async def test_the_modern_clients_scenarios_give_the_same_at_every_interactive_path(
    fleet: Fleet,
) -> None:
    """alpha (HTTP), beta (stdio) and delta (a modern server, relayed) answer the same; alpha's
    and beta's journals show one call each."""
    async with asyncio.timeout(T):
        seen = {name: await modern_scenarios(fleet.url(name)) for name in INTERACTIVE_NAMES}
    assert seen["beta"] == seen["alpha"] and seen["delta"] == seen["alpha"]
    assert seen["alpha"]["ask"] == json.dumps(
        {"action": "accept", "content": {"answer": "re: What is your answer?"}}
    )
    assert seen["alpha"]["everything"].endswith("| file:///work/a")
    for journal in fleet.journals.values():  # each server was asked once: nothing crossed
        assert journal.events("fleet-ask") == ["call", "answer"]


async def test_the_mcp1_scenario_client_gets_at_alpha_and_delta_what_alpha_gives_directly(
    fleet: Fleet,
) -> None:
    """Legacy clients at a named path: relayed to alpha's own sessions, and served by the
    reverse direction in front of delta (a modern server)."""
    async with asyncio.timeout(T):
        direct = await run_scenarios(fleet.alpha.url, *COMMON)
        at_alpha = await run_scenarios(fleet.url("alpha"), *COMMON)
        at_delta = await run_scenarios(fleet.url("delta"), *COMMON)
    assert comparable(at_alpha) == comparable(direct)
    assert comparable(at_delta) == comparable(direct)
    assert direct["outcomes"]["everything"]["text"] == (
        "Ada | It is sunny | file:///work/a,file:///b"
    )


@pytest.mark.parametrize("name", ["alpha", "beta"])
async def test_a_held_call_completes_at_each_upstreams_path(fleet: Fleet, name: str) -> None:
    """The same tool at two upstreams: each call reaches its own server only."""
    tag = f"each-{name}"
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        key, state = await held_call(http, fleet.url(name), tag)
        reply = await answered(http, fleet.url(name), tag, key, state)
    assert complete_text(reply) == ANSWER_TEXT
    other = "beta" if name == "alpha" else "alpha"
    assert fleet.journals[name].answers(tag) == [ANSWER]
    assert fleet.journals[other].events(tag) == []


async def test_a_request_state_of_one_upstream_is_refused_at_another(fleet: Fleet) -> None:
    """alpha's requestState retried at beta: the fixed public rejection, nothing reaches either
    server, and the retry at alpha then completes."""
    tag = "crossed"
    before = len(rejection_reasons(fleet.bridge))
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        key, state = await held_call(http, fleet.url("alpha"), tag)
        crossed = await answered(http, fleet.url("beta"), tag, key, state)
        assert_state_rejected(crossed)
        assert (fleet.journals["alpha"].events(tag), fleet.journals["beta"].events(tag)) == (
            ["call"],
            [],
        )
        rightful = await answered(http, fleet.url("alpha"), tag, key, state)
    assert complete_text(rightful) == ANSWER_TEXT
    assert fleet.journals["alpha"].answers(tag) == [ANSWER]
    assert fleet.journals["beta"].events(tag) == []
    assert rejection_reasons(fleet.bridge)[before:] == ["authentication_failed"]


async def test_an_mcp1_client_gets_at_gammas_path_what_it_gets_directly(fleet: Fleet) -> None:
    async with asyncio.timeout(T):
        direct, bridged = await asyncio.gather(
            run_legacy_script("legacy_client.py", "--url", fleet.gamma.url, "--answer", "same"),
            run_legacy_script("legacy_client.py", "--url", fleet.url("gamma"), "--answer", "same"),
        )
    assert bridged == direct
    assert direct["tools"] == FIXTURE_TOOLS


async def test_a_modern_client_sees_each_servers_own_tools(fleet: Fleet) -> None:
    answers = InputAnswers(elicit_content={"response": "fine"})
    async with asyncio.timeout(T):
        async with modern_client(fleet.url("gamma"), **answers.client_kwargs()) as client:
            gamma_tools = (await client.list_tools()).tools
            result = await client.call_tool("test_elicitation", {"message": "hi"})
        async with modern_client(fleet.url("alpha")) as client:
            alpha_tools = {tool.name for tool in (await client.list_tools()).tools}
    assert len(gamma_tools) == FIXTURE_TOOLS
    assert "ask" in alpha_tools and "test_elicitation" not in alpha_tools
    assert result.content == [
        types.TextContent(
            type="text", text='User response: action=accept, content={"response": "fine"}'
        )
    ]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "/servers/zeta/mcp",
            "Not Found: no upstream named 'zeta' here (this bridge serves: alpha, beta, delta, "
            "gamma)",
        ),
        ("/servers/alpha/sse", "Not Found: upstream 'alpha' is served at /servers/alpha/mcp"),
        (
            "/mcp",
            "Not Found: this bridge serves several upstreams, each at /servers/NAME/mcp: alpha, "
            "beta, delta, gamma",
        ),
    ],
)
async def test_a_path_no_upstream_serves_says_where_they_are(
    fleet: Fleet, path: str, message: str
) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        async with http.post(fleet.base + path, json={}) as reply:
            assert reply.status == 404
            body = await reply.json()
    assert body == {"jsonrpc": "2.0", "error": {"code": -32600, "message": message}}


async def test_status_and_metrics_name_every_upstream(fleet: Fleet) -> None:
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        async with http.get(fleet.base + "/readyz") as reply:  # checks each upstream now
            ready = await reply.json()
        async with http.get(fleet.base + "/status.json") as reply:
            status = await reply.json()
        async with http.get(fleet.base + "/metrics") as reply:
            metrics = await reply.text()
    assert [(u["name"], u["path"]) for u in status["upstreams"]] == [
        (name, f"/servers/{name}/mcp") for name in NAMES
    ]
    assert ready["status"] == "ready"
    named = set(re.findall(r'mrtr_bridge_upstream_up\{upstream="(\w+)"\} 1', metrics))
    assert named == set(NAMES)


async def test_one_upstream_down_leaves_the_others_serving(peers: Peers, tmp_path: Path) -> None:
    """alpha's server stops: a call at alpha fails with a JSON-RPC error that says why (its
    URL kept from the client), within the connect bound; beta still completes held calls."""
    alpha = peers.legacy(INTERACTIVE, "--state-dir", str(tmp_path / "a"))
    beta_dir = tmp_path / "b"
    bridge = peers.bridge(
        None,
        args=named_args(alpha.url, beta_dir),
        env=bridge_env({"upstream": {"connect_timeout_s": 2}}),
    )
    base = f"http://127.0.0.1:{bridge.port}/servers"
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        assert (
            complete_text(
                await call_tool(poster(http, f"{base}/alpha/mcp"), "echo", {"text": "hi"})
            )
            == "hi"
        )
        alpha.stop()
        down = await call_tool(
            poster(http, f"{base}/alpha/mcp"), "echo", {"text": "hi"}, timeout=20
        )
        key, state = await held_call(http, f"{base}/beta/mcp", "still")
        done = await answered(http, f"{base}/beta/mcp", "still", key, state)
    error = down.response["error"]
    assert (error["code"], error["message"]) == (-32603, "The upstream server is unavailable")
    assert alpha.url not in json.dumps(down.response)
    assert complete_text(done) == ANSWER_TEXT
    assert Journal(beta_dir).answers("still") == [ANSWER]


def servers_file(tmp_path: Path, alpha_url: str, beta_dir: Path) -> Path:
    """A Claude Desktop-style `mcpServers` file: alpha over HTTP, beta launched over stdio, and a
    disabled entry (skipped, with a warning)."""
    command, *args = interactive_stdio_command(beta_dir).split()
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "alpha": {"type": "http", "url": alpha_url},
                    "beta": {"command": command, "args": args, "env": {"BETA_MODE": "on"}},
                    "off": {"command": "nowhere", "disabled": True},
                }
            }
        ),
        encoding="utf-8",
    )
    return path


async def test_a_desktop_clients_servers_file_configures_the_same(
    peers: Peers, tmp_path: Path
) -> None:
    alpha = peers.legacy(INTERACTIVE, "--state-dir", str(tmp_path / "a"))
    beta_dir = tmp_path / "b"
    path = servers_file(tmp_path, alpha.url, beta_dir)
    bridge = peers.bridge(None, args=["--servers-json", str(path)])
    base = f"http://127.0.0.1:{bridge.port}/servers"
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        for name in ("alpha", "beta"):
            key, state = await held_call(http, f"{base}/{name}/mcp", f"file-{name}")
            done = await answered(http, f"{base}/{name}/mcp", f"file-{name}", key, state)
            assert complete_text(done) == ANSWER_TEXT
        async with http.post(f"{base}/off/mcp", json={}) as off:
            assert off.status == 404
    assert Journal(beta_dir).answers("file-beta") == [ANSWER]
    assert "mrtr-bridge: warning: disabled entries skipped (off)" in bridge.log_text(10**6)


async def test_check_checks_every_upstream(peers: Peers, tmp_path: Path) -> None:
    alpha = peers.legacy(INTERACTIVE, "--state-dir", str(tmp_path / "a"))
    path = servers_file(tmp_path, alpha.url, tmp_path / "b")
    status, stdout, stderr = await asyncio.to_thread(run_check_raw, "--servers-json", str(path))
    assert status == 0, stderr
    assert stderr == "mrtr-bridge: warning: disabled entries skipped (off)\n"
    reports: dict[str, Any] = json.loads(stdout)["upstreams"]
    assert sorted(reports) == ["alpha", "beta"]
    assert [reports[name]["transport"] for name in ("alpha", "beta")] == [
        "streamable-http",
        "stdio",
    ]
    assert all(report["bridgeable"] for report in reports.values())
    status, text, _ = await asyncio.to_thread(
        run_check_raw, "--servers-json", str(path), json_output=False
    )
    assert status == 0
    assert text.startswith("== alpha (/servers/alpha/mcp) ==\n")
    assert text.endswith("\nbridgeable: alpha yes, beta yes\n")


async def test_stdio_serves_the_named_upstream_it_is_told(tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(
        "[upstreams.beta]\n"
        f"command = {json.dumps(interactive_stdio_command(tmp_path / 'b'))}\n"
        '[upstreams.other]\nurl = "http://127.0.0.1:9/mcp"\n',
        encoding="utf-8",
    )
    server = StdioServerParameters(
        command=str(BRIDGE_EXE),
        args=["stdio", "--config", str(config), "--server", "beta", "--log-level", "warning"],
        env={"PATH": os.environ.get("PATH", "")},
        cwd=str(REPO_ROOT),
    )
    answers = InputAnswers(elicit_content={"answer": "over-stdio"})
    async with (
        asyncio.timeout(T),
        Client(server, mode=MODERN_VERSION, cache=None, **answers.client_kwargs()) as client,
    ):
        result = await client.call_tool("ask", {"tag": "stdio-beta"})
    assert result.content == [
        types.TextContent(
            type="text", text='{"action": "accept", "content": {"answer": "over-stdio"}}'
        )
    ]
    assert Journal(tmp_path / "b").answers("stdio-beta") == [accept(answer="over-stdio")]
