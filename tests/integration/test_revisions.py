"""Older legacy servers through the bridge: `mcp` 1.12 (2025-06-18), 1.9 (2025-03-26) and 1.8
(2024-11-05), each over Streamable HTTP, stdio and the HTTP+SSE transport (`upstream.transport =
"sse"`), driven by the real modern `mcp` 2.x client.

One stack per (revision, transport), shared by the tests of that parameter (`revision_stack.py`):
the server from `.venv-<revision>`, the bridge, a recording relay on each side of it (a tee for
stdio). After every test, everything the bridge sent upstream in it must be valid in the negotiated
revision (closed: nothing the revision does not define) and everything it answered the client valid
at 2026-07-28 (`wire_records.py`).

Per stack: discover, the four lists, a plain call; every push the revision has (elicitation only at
2025-06-18; sampling and roots everywhere); progress and logging; cancellation; a call of two input
rounds; and what the bridge declared in `initialize`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from schema_check import assert_valid

from translators.protocol.eras import META_SERVER_INFO, MODERN_VERSION, RESULT_COMPLETE

from .harness import InputAnswers, Peers, modern_client
from .revision_stack import REVISIONS, TRANSPORTS, RevisionStack, start_stack
from .wire_records import front_problems, is_era_probe, messages, upstream_problems

T = 30.0
STACKS = [(revision, transport) for transport in TRANSPORTS for revision in REVISIONS]
BASE_TOOLS = {"echo", "revision", "sample", "roots", "two_rounds", "progress_and_log", "slow"}
ELICITING_TOOLS = {"ask_name", "ask_size"}


@pytest.fixture(scope="module", params=STACKS, ids=[f"{r}-{t}" for r, t in STACKS])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RevisionStack]:
    revision, transport = request.param
    directory = tmp_path_factory.mktemp(f"rev-{revision}-{transport}")
    peers = Peers(log_dir=directory)
    try:
        yield start_stack(peers, revision, transport, directory)
    finally:
        peers.close()


@pytest.fixture(autouse=True)
def wire_checked(stack: RevisionStack) -> Iterator[None]:
    """Whatever a test made the bridge send, upstream and to the client, must be schema-valid."""
    upstream_mark, front_mark = stack.upstream_log.mark(), stack.front_log.mark()
    yield
    problems = upstream_problems(stack.upstream_log.records(), stack.revision, since=upstream_mark)
    problems += front_problems(stack.front_log.records(), since=front_mark)
    assert not problems, "invalid messages on the wire:\n" + "\n".join(problems[:30])


@pytest.fixture
async def answers() -> InputAnswers:
    return InputAnswers(
        elicit_content={"name": "Alice"}, sample_text="Paris", roots=["file:///test/root"]
    )


def connect(stack: RevisionStack, answers: InputAnswers) -> Any:
    """The modern client through the front relay, answering pushes from `answers`."""
    return modern_client(stack.url, **answers.client_kwargs())


def has_elicitation(revision: str) -> bool:
    return revision >= "2025-06-18"


def enum_titles(schema: dict[str, Any]) -> dict[str, str]:
    """`{value: title}` of a single-select enum, titled (`oneOf` of `const`/`title`) or legacy
    (`enumNames`)."""
    if "oneOf" in schema:
        return {option["const"]: option["title"] for option in schema["oneOf"]}
    return dict(zip(schema["enum"], schema["enumNames"], strict=True))


def text_of(result: types.CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, types.TextContent), content
    return content.text


async def test_discover_reflects_the_older_server(
    stack: RevisionStack, answers: InputAnswers
) -> None:
    async with asyncio.timeout(T), connect(stack, answers) as client:
        raw = await client.session.send_discover(MODERN_VERSION)
    assert_valid(raw, "DiscoverResult", "modern")
    assert raw["resultType"] == RESULT_COMPLETE
    assert raw["_meta"][META_SERVER_INFO]["name"] == f"mrtr-revision-server-{stack.revision}"
    assert {"tools", "prompts", "resources"} <= raw["capabilities"].keys()


async def test_lists(stack: RevisionStack, answers: InputAnswers) -> None:
    async with asyncio.timeout(T), connect(stack, answers) as client:
        tools = await client.list_tools()
        prompts = await client.list_prompts()
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
    expected_tools = BASE_TOOLS | (ELICITING_TOOLS if has_elicitation(stack.revision) else set())
    assert {tool.name for tool in tools.tools} == expected_tools
    assert [prompt.name for prompt in prompts.prompts] == ["greeting"]
    assert [str(resource.uri) for resource in resources.resources] == ["revision://info"]
    assert [template.uri_template for template in templates.resource_templates] == [
        "revision://item/{item_id}"
    ]


async def test_plain_call_prompt_and_read(stack: RevisionStack, answers: InputAnswers) -> None:
    async with asyncio.timeout(T), connect(stack, answers) as client:
        echoed = await client.call_tool("echo", {"text": "hello"})
        spoken = await client.call_tool("revision", {})
        prompt = await client.get_prompt("greeting", {"name": "Ann"})
        read = await client.read_resource("revision://item/7")
    assert text_of(echoed) == "hello" and not echoed.is_error
    assert text_of(spoken) == stack.revision
    assert [message.content.text for message in prompt.messages] == ["Please greet Ann."]
    assert [content.text for content in read.contents] == ["item 7"]


async def test_upstream_initialize_speaks_the_revision(
    stack: RevisionStack, answers: InputAnswers
) -> None:
    """The bridge offers 2025-11-25, accepts the older answer, and every session it uses
    declared only what the revision has (a first session shaped for another revision is closed
    unused)."""
    async with asyncio.timeout(T), connect(stack, answers) as client:
        await client.call_tool("sample", {"prompt": "warm up"})
    assert all(
        m["params"]["protocolVersion"] == "2025-11-25" for m in stack.sent_upstream("initialize")
    )
    declared = [message["params"]["capabilities"] for message in stack.used_initializes()]
    elicitation = {"elicitation": {}} if has_elicitation(stack.revision) else {}
    assert {"sampling": {}, "roots": {}, **elicitation} in declared, declared
    for capabilities in declared:
        assert "tasks" not in capabilities and "tools" not in capabilities.get("sampling", {})
        assert capabilities.get("elicitation", {}) == {}
        assert has_elicitation(stack.revision) or "elicitation" not in capabilities


async def test_elicitation_only_where_the_revision_has_it(
    stack: RevisionStack, answers: InputAnswers
) -> None:
    if not has_elicitation(stack.revision):
        async with asyncio.timeout(T), connect(stack, answers) as client:
            tools = await client.list_tools()
        assert ELICITING_TOOLS.isdisjoint(tool.name for tool in tools.tools)
        assert all(
            "elicitation" not in m["params"]["capabilities"] for m in stack.used_initializes()
        )
        return
    async with asyncio.timeout(T), connect(stack, answers) as client:
        greeted = await client.call_tool("ask_name", {})
    assert text_of(greeted) == "Hello, Alice!"
    ((method, params),) = answers.asked
    assert method == "elicitation/create" and params.message == "What is your name?"


async def test_legacy_enum_names_reach_the_client_as_titles(
    stack: RevisionStack, answers: InputAnswers
) -> None:
    if not has_elicitation(stack.revision):
        assert stack.sent_upstream("elicitation/create") == []
        return
    answers.elicit_content = {"size": "m"}
    async with asyncio.timeout(T), connect(stack, answers) as client:
        sized = await client.call_tool("ask_size", {})
    assert text_of(sized) == "size m"
    ((_, params),) = answers.asked
    assert enum_titles(params.requested_schema["properties"]["size"]) == {
        "s": "Small",
        "m": "Medium",
        "l": "Large",
    }


async def test_sampling(stack: RevisionStack, answers: InputAnswers) -> None:
    async with asyncio.timeout(T), connect(stack, answers) as client:
        result = await client.call_tool("sample", {"prompt": "Capital of France?"})
    assert text_of(result) == "model said: Paris"
    ((method, params),) = answers.asked
    assert method == "sampling/createMessage" and params.max_tokens == 50


async def test_roots(stack: RevisionStack, answers: InputAnswers) -> None:
    async with asyncio.timeout(T), connect(stack, answers) as client:
        result = await client.call_tool("roots", {})
    assert text_of(result) == "file:///test/root"
    assert [method for method, _ in answers.asked] == ["roots/list"]


async def test_two_input_rounds(stack: RevisionStack, answers: InputAnswers) -> None:
    async with asyncio.timeout(T), connect(stack, answers) as client:
        result = await client.call_tool("two_rounds", {})
    assert text_of(result) == "Paris @ file:///test/root"
    assert [method for method, _ in answers.asked] == ["sampling/createMessage", "roots/list"]


async def test_progress_and_logging(stack: RevisionStack) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[tuple[str, Any]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.data))

    async with (
        asyncio.timeout(T),
        modern_client(stack.url, log_level="info", logging_callback=on_log) as client,
    ):
        result = await client.call_tool(
            "progress_and_log", {"steps": 3}, progress_callback=on_progress
        )
    assert text_of(result) == "3 steps"
    with_message = stack.revision >= "2025-03-26"
    assert progress == [(step, 3, f"step {step}" if with_message else None) for step in (1, 2, 3)]
    assert logs == [("info", "progress_and_log started"), ("warning", "progress_and_log finished")]


async def test_cancellation_reaches_the_older_server(
    stack: RevisionStack, answers: InputAnswers
) -> None:
    tag = f"cancel-{stack.revision}-{stack.transport}"
    async with asyncio.timeout(T), connect(stack, answers) as client:
        slow = asyncio.create_task(client.call_tool("slow", {"seconds": 60, "tag": tag}))
        await stack.wait_journal(tag, "slow_started")
        slow.cancel()
        await stack.wait_journal(tag, "slow_cancelled")
        after = await client.call_tool("echo", {"text": "still here"})
    assert slow.cancelled() and text_of(after) == "still here"
    assert stack.journal_events(tag) == ["slow_started", "slow_cancelled"]


async def test_a_redirected_endpoint_costs_one_redirect_per_bridge(
    stack: RevisionStack, answers: InputAnswers
) -> None:
    """FastMCP on mcp 1.8/1.9 answers `POST /mcp` with 307 to `/mcp/`: the bridge follows it, and
    once a session has opened there, later sessions start at `/mcp/` (only sessions opened at the
    same moment as the first can meet the redirect too). Newer servers, stdio and HTTP+SSE see no
    redirect at all."""
    async with (
        asyncio.timeout(T),
        modern_client(stack.url) as plain,
        connect(stack, answers) as interactive,
    ):
        # declares no capabilities: a session of its own
        await plain.call_tool("echo", {"text": "one"})
        # declares all three: another session
        await interactive.call_tool("sample", {"prompt": "two"})
    # the era probe's `server/discover` (its own client, once a minute) is not a session's
    redirects = [
        r
        for r in stack.upstream_log.records()
        if r["dir"] == "sent"
        and r.get("status") == 307
        and not any(is_era_probe(r, message) for message in messages(r))
    ]
    redirecting = stack.transport == "streamable-http" and stack.revision < "2025-06-18"
    opened = stack.used_initializes()
    assert len(opened) >= 2
    if not redirecting:
        assert redirects == []
        return
    assert redirects and {(r["http"], r["path"]) for r in redirects} == {("POST", "/mcp")}
    assert len(redirects) < len(opened), f"{len(redirects)} redirects for {len(opened)} sessions"
