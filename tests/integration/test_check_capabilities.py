"""`mrtr-bridge check` against server-everything 2026.8.31 (over stdio and Streamable HTTP), which
lists some tools only to a client that declares elicitation, sampling or roots: the report lists
every tool, says what a client declaring nothing sees and which tools each capability adds; the
ground truth is the `mcp` 1.x client listing the tools directly with the same capabilities
(`tests/peers/legacy_probe_client.py`)."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator

import pytest

from .harness import LEGACY_PYTHON, PEERS_DIR, PeerProcess, Peers, free_port
from .test_check import run_check, run_check_raw
from .test_real_servers import EVERYTHING, NEW, node

pytestmark = pytest.mark.integration
TIMEOUT_S = 60
ENTRY = EVERYTHING[NEW].entry


def direct_tools(upstream: list[str], *flags: str) -> set[str]:
    """The tools the `mcp` 1.x client is shown, declaring the capabilities `flags` name."""
    argv = [str(LEGACY_PYTHON), str(PEERS_DIR / "legacy_probe_client.py"), *upstream, *flags]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.stdout, done.stderr[-3000:]
    return set(json.loads(done.stdout.splitlines()[0])["tools"])


@pytest.fixture(scope="module")
def everything_http(module_peers: Peers) -> Iterator[PeerProcess]:
    port = free_port()
    argv = [node(), str(ENTRY), "streamableHttp"]
    yield module_peers.start("everything-check", argv, port, {"PORT": str(port)})


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_check_shows_which_tools_each_client_capability_reveals(
    transport: str, everything_http: PeerProcess
) -> None:
    if transport == "stdio":
        command = shlex.join([node(), str(ENTRY), "stdio"])
        args, upstream = ["--upstream-command", command], ["--command", command]
    else:
        args, upstream = ["--upstream", everything_http.url], ["--url", everything_http.url]
    status, report = run_check(*args)
    assert status == 0
    none = direct_tools(upstream)
    by_flag = {flag: direct_tools(upstream, flag) - none for flag in ("--roots", "--sampling")}
    elicitation = direct_tools(upstream, "--elicitation") - none  # the mcp 1.x client: form + url
    every = direct_tools(upstream, "--roots", "--elicitation", "--sampling")
    visibility = report["toolVisibility"]
    assert set(visibility["withoutCapabilities"]) == none
    revealed = visibility["revealedBy"]
    assert set(revealed["roots"]) == by_flag["--roots"] == {"get-roots-list"}
    assert set(revealed["sampling"]) == by_flag["--sampling"] == {"trigger-sampling-request"}
    assert revealed["elicitation.form"] == ["trigger-elicitation-request"]
    assert (
        set(revealed["elicitation.url"])
        == elicitation
        == {
            "trigger-elicitation-request",
            "trigger-url-elicitation",
        }
    )
    assert set(revealed) == {"elicitation.form", "elicitation.url", "sampling", "roots"}
    assert {tool["name"] for tool in report["tools"]} == every
    needs = {tool["name"]: tool.get("revealedBy") for tool in report["tools"]}
    assert needs["trigger-elicitation-request"] == ["elicitation.form", "elicitation.url"]
    assert needs["get-roots-list"] == ["roots"] and needs["echo"] is None
    assert report["pushesOutsideCall"] == {"rootsListAtInitialized": True}


def test_the_text_report_names_what_each_capability_adds(everything_http: PeerProcess) -> None:
    status, stdout, _stderr = run_check_raw("--upstream", everything_http.url, json_output=False)
    assert status == 0
    lines = stdout.splitlines()
    start = lines.index("tools a client declaring no capability sees: 13")
    assert lines[start + 1 : start + 5] == [
        "  declaring elicitation.form adds: trigger-elicitation-request",
        "  declaring elicitation.url adds: trigger-elicitation-request, trigger-url-elicitation",
        "  declaring sampling adds: trigger-sampling-request",
        "  declaring roots adds: get-roots-list",
    ]
    assert any(
        line.startswith("  tool trigger-url-elicitation ")
        and line.endswith("(listed to clients declaring elicitation.url)")
        for line in lines
    )
