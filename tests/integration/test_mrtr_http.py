"""MRTR through the bridge over Streamable HTTP: the mcp 2.x client pinned to 2026-07-28 (its
automatic MRTR loop and manual retries) against the interactive mcp 1.x server
(`tests/peers/interactive_server.py`).

Every test checks the client's view and, through the server's journal, what the legacy server saw.
One server and one bridge serve the whole module; each test uses its own tags.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import mcp_types as types
import pytest

from translators.protocol.eras import ELICIT, RESULT_COMPLETE, ROOTS, SAMPLE
from translators.wire.errors import (
    BRIDGE_MARKER,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LEGACY_SAMPLING_REJECTED,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
)

from .harness import Peers, bridge_env, modern_client
from .mrtr_helpers import (
    ANSWER_SCHEMA,
    ELICIT_COMPLETE,
    EVERYTHING_AT_ONCE,
    SAMPLING_MESSAGES,
    TOOL_USE_ANSWER,
    Answerer,
    Interactive,
    ManualRounds,
    accept,
    call_tool,
    complete_text,
    echo_answer,
    elicited,
    input_required,
    json_of,
    poster,
    start_interactive,
    text_of,
)

T = 30  # bound on every test body, seconds
MAX_STATE_CHARS = 300  # issue 3: a requestState is at most 300 characters


@pytest.fixture(scope="module")
def server(module_peers: Peers, tmp_path_factory: pytest.TempPathFactory) -> Interactive:
    """The interactive server behind the bridge, shared by this module."""
    env = bridge_env({"held": {"batch_sizes": EVERYTHING_AT_ONCE}})
    return start_interactive(module_peers, tmp_path_factory.mktemp("interactive"), env=env)


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
async def test_elicitation_actions_automatic_loop(server: Interactive, action: str) -> None:
    """The client's automatic loop answers a form elicitation; the server receives exactly that
    action."""
    tag = f"auto-{action}"
    answers = Answerer(action=action)
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        result = await client.call_tool("ask", {"tag": tag, "question": "Pick one?"})
    content = {"answer": echo_answer("Pick one?")} if action == "accept" else None
    assert json_of(result) == {"action": action, "content": content}
    ((method, params),) = answers.asked
    assert method == ELICIT and isinstance(params, types.ElicitRequestFormParams)
    assert (params.message, params.requested_schema) == ("Pick one?", ANSWER_SCHEMA)
    expected = {"action": action, "content": content} if content else {"action": action}
    assert server.journal.answers(tag) == [expected]


async def test_elicitation_manual_retry(server: Interactive) -> None:
    """A manual round: the InputRequiredResult holds the push (nothing answered upstream yet), the
    retry completes."""
    async with (
        asyncio.timeout(T),
        modern_client(server.url, **Answerer().client_kwargs()) as client,
    ):
        manual = ManualRounds(client)
        requests, state = await manual.held("ask", {"tag": "manual"})
        ((key, request),) = requests.items()
        assert key.startswith("elicit-") and isinstance(request, types.ElicitRequest)
        assert len(state) <= MAX_STATE_CHARS
        assert server.journal.events("manual") == ["call"]
        final = await manual.done(
            "ask", {"tag": "manual"}, state=state, responses={key: elicited(answer="by hand")}
        )
    assert json_of(final) == {"action": "accept", "content": {"answer": "by hand"}}
    assert server.journal.answers("manual") == [accept(answer="by hand")]


async def test_two_sequential_elicitations_take_two_rounds(server: Interactive) -> None:
    """Two sequential pushes are two rounds with different keys and different requestStates."""
    rounds = {"tag": "rounds"}
    async with (
        asyncio.timeout(T),
        modern_client(server.url, **Answerer().client_kwargs()) as client,
    ):
        manual = ManualRounds(client)
        (key1,), state1 = await manual.held("ask_twice", rounds)
        requests2, state2 = await manual.held(
            "ask_twice", rounds, state=state1, responses={key1: elicited(name="Ann")}
        )
        ((key2, request2),) = requests2.items()
        assert key2 != key1 and state2 != state1
        assert isinstance(request2.params, types.ElicitRequestFormParams)
        assert request2.params.message == "Step 2: what is your favorite color?"
        final = await manual.done(
            "ask_twice", rounds, state=state2, responses={key2: elicited(color="teal")}
        )
        automatic = await client.call_tool("ask_twice", {"tag": "rounds-auto"})
    assert text_of(final) == "Ann likes teal."
    step1, step2 = (
        echo_answer("Step 1: what is your name?"),
        echo_answer("Step 2: what is your favorite color?"),
    )
    assert text_of(automatic) == f"{step1} likes {step2}."
    assert server.journal.answers("rounds") == [accept(name="Ann"), accept(color="teal")]


async def test_url_mode_elicitation(server: Interactive) -> None:
    """URL mode reaches the client without elicitationId, and notifications/elicitation/complete
    never does."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        reply = await call_tool(post, "ask_url", {"tag": "url"})
        requests, state = input_required(reply)
        ((key, request),) = requests.items()
        assert request == {
            "method": ELICIT,
            "params": {
                "mode": "url",
                "message": "Sign in to continue",
                "url": "https://auth.example/sign-in/url",
            },
        }
        final = await call_tool(
            post, "ask_url", {"tag": "url"}, responses={key: {"action": "accept"}}, state=state
        )
    assert complete_text(final) == "url elicitation: accept"
    assert "elicitationId" not in reply.text
    assert [m for m in final.messages if m.get("method") == ELICIT_COMPLETE] == []
    assert server.journal.events("url") == ["call", "answer", "elicit_complete_sent"]

    answers = Answerer(journal=server.journal)
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    async with (
        asyncio.timeout(T),
        modern_client(server.url, message_handler=on_message, **answers.client_kwargs()) as client,
    ):
        result = await client.call_tool("ask_url", {"tag": "url-auto"})
    assert text_of(result) == "url elicitation: accept"
    ((_, params),) = answers.asked
    assert isinstance(params, types.ElicitRequestURLParams) and params.elicitation_id is None
    assert not [
        m for m in seen if ELICIT_COMPLETE in repr(m) or "ElicitComplete" in type(m).__name__
    ]
    assert server.journal.events("url-auto") == ["call", "answer", "elicit_complete_sent"]


async def test_url_elicitation_required_error_reissues_the_call(server: Interactive) -> None:
    """A legacy -32042 becomes URL-mode input requests; an accepted retry re-issues the call, which
    may ask again."""
    auth = {"tag": "auth"}
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        requests, state = input_required(await call_tool(post, "authorize", auth))
        ((key, request),) = requests.items()
        url = {
            "mode": "url",
            "message": "Authorize access to your files",
            "url": "https://auth.example/authorize/auth",
        }
        assert request == {"method": ELICIT, "params": url}
        early = await call_tool(
            post, "authorize", auth, responses={key: {"action": "accept"}}, state=state
        )
        # accepted but not yet visited: the re-issued call asks again
        again, state2 = input_required(early)
        assert list(again.values()) == [request] and state2 != state
        server.journal.visit("auth-auth")
        yes = {k: {"action": "accept"} for k in again}
        assert (
            complete_text(await call_tool(post, "authorize", auth, responses=yes, state=state2))
            == "authorized auth"
        )
    assert server.journal.events("auth") == ["call", "call", "call"]

    answers = Answerer(journal=server.journal)
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        result = await client.call_tool("authorize", {"tag": "auth-auto"})
    assert text_of(result) == "authorized auth-auto"
    ((_, params),) = answers.asked
    assert isinstance(params, types.ElicitRequestURLParams) and params.elicitation_id is None
    assert server.journal.events("auth-auto") == ["call", "call"]


async def test_url_elicitation_required_declined(server: Interactive) -> None:
    """A declined -32042 elicitation does not re-issue the call; the client gets a bridge-marked
    -32603."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        requests, state = input_required(await call_tool(post, "authorize", {"tag": "auth-no"}))
        no = {key: {"action": "decline"} for key in requests}
        declined = await call_tool(post, "authorize", {"tag": "auth-no"}, responses=no, state=state)
    assert server.journal.events("auth-no") == ["call"]
    # a bridge-local error, marked as such (docs/decisions.md § 3)
    error = declined.response["error"]
    assert (error["code"], error.get("data", {}).get("source")) == (INTERNAL_ERROR, BRIDGE_MARKER)


@pytest.mark.parametrize(
    "capabilities", [{"elicitation": {"form": {}}}, {}], ids=["form-only", "none"]
)
async def test_url_elicitation_required_without_url_capability(
    server: Interactive, capabilities: dict[str, Any]
) -> None:
    """A -32042 for a request that did not declare elicitation.url becomes -32021 (HTTP 400) naming
    the capability."""
    tag = f"auth-nocap-{len(capabilities)}"
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await call_tool(
            poster(http, server.url, capabilities=capabilities), "authorize", {"tag": tag}
        )
    assert reply.status == 400
    error = reply.response["error"]
    assert (error["code"], error["data"]) == (
        MISSING_CLIENT_CAPABILITY,
        {"requiredCapabilities": {"elicitation": {"url": {}}}},
    )
    assert server.journal.events(tag) == ["call"]


async def test_sampling_with_tools_passes_through_unchanged(server: Interactive) -> None:
    """A sampling push with tools, tool-use/tool-result and image content reaches the client
    unchanged, and the client's tool_use answer reaches the server unchanged (the session declared
    sampling.tools)."""
    seen: list[types.CreateMessageRequestParams] = []

    async def sampling(
        ctx: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResultWithTools:
        seen.append(params)
        return types.CreateMessageResultWithTools.model_validate(TOOL_USE_ANSWER)

    tools = types.SamplingCapability(tools=types.SamplingToolsCapability())
    async with (
        asyncio.timeout(T),
        modern_client(
            server.url, sampling_callback=sampling, sampling_capabilities=tools
        ) as client,
    ):
        result = await client.call_tool("sample", {"tag": "tools"})
    assert json_of(result) == TOOL_USE_ANSWER
    ((params,),) = [seen]
    dumped = params.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["messages"] == SAMPLING_MESSAGES
    assert [tool["name"] for tool in dumped["tools"]] == ["get_weather"]
    assert dumped["tools"][0]["inputSchema"]["required"] == ["city"]
    assert (dumped["toolChoice"], dumped["maxTokens"]) == ({"mode": "auto"}, 64)
    entries = server.journal.entries("tools")
    assert next(e for e in entries if e["event"] == "caps")["sampling_tools"] is True
    assert server.journal.answers("tools") == [TOOL_USE_ANSWER]


async def test_sampling_with_tools_refused_without_the_capability(server: Interactive) -> None:
    """Without sampling.tools the push is refused upstream (-1) and never forwarded to the
    client."""
    answers = Answerer()
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        result = await client.session.call_tool(
            "sample", {"tag": "no-tools"}, allow_input_required=True
        )
    assert isinstance(result, types.CallToolResult)
    assert json_of(result)["error"]["code"] == -1
    assert answers.asked == []
    caps, error = [
        e for e in server.journal.entries("no-tools") if e["event"] in ("caps", "push_error")
    ]
    assert (caps["sampling"], caps["sampling_tools"]) == (True, False)
    assert (error["kind"], error["code"]) == ("sample", -1)


async def test_roots(server: Interactive) -> None:
    """A roots/list push (sent on the session's GET stream) is answered with the client's roots."""
    answers = Answerer(roots=["file:///ws", "file:///other"])
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        result = await client.call_tool("roots", {"tag": "roots"})
    assert json_of(result) == ["file:///ws", "file:///other"]
    assert answers.methods() == [ROOTS]
    assert server.journal.answers("roots") == [
        {"roots": [{"uri": "file:///ws"}, {"uri": "file:///other"}]}
    ]


async def test_elicitation_sampling_and_roots_in_one_round(server: Interactive) -> None:
    """Three concurrent pushes (call stream and GET stream) come back as one InputRequiredResult
    with 3 requests."""
    answers = Answerer()
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        first = await client.session.call_tool(
            "everything", {"tag": "batch"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult) and first.input_requests
        methods = {key: request.method for key, request in first.input_requests.items()}
        assert sorted(methods.values()) == sorted([ELICIT, SAMPLE, ROOTS])
        assert {key.split("-")[0] for key in methods} == {"elicit", "sample", "roots"}
        automatic = await client.call_tool("everything", {"tag": "batch-auto"})
    assert text_of(automatic) == f"{echo_answer('What is your name?')} | Paris | file:///ws"
    assert sorted(answers.methods()) == sorted([ELICIT, SAMPLE, ROOTS])


async def test_push_arriving_while_held_is_asked_next_round(server: Interactive) -> None:
    """A push sent while the call is held (waiting for the client) is asked for in the next
    round."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        requests, state = input_required(await call_tool(post, "staggered", {"tag": "late"}))
        ((key, request),) = requests.items()
        assert request["method"] == ELICIT
        await server.journal.wait_for("late", "late_push")
        reply = await call_tool(
            post, "staggered", {"tag": "late"}, responses={key: accept(name="Kim")}, state=state
        )
        requests2, state2 = input_required(reply)
        ((key2, request2),) = requests2.items()
        assert request2 == {"method": ROOTS, "params": {}}
        final = await call_tool(
            post,
            "staggered",
            {"tag": "late"},
            responses={key2: {"roots": [{"uri": "file:///k"}]}},
            state=state2,
        )
    assert complete_text(final) == "Kim | file:///k"


async def test_pushes_inside_prompts_get_and_resources_read(server: Interactive) -> None:
    """prompts/get and resources/read are held calls too: manual rounds and the automatic loop both
    complete."""
    answers = Answerer()
    async with asyncio.timeout(T), modern_client(server.url, **answers.client_kwargs()) as client:
        first = await client.session.get_prompt(
            "ask_prompt", {"tag": "prompt"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult) and first.input_requests
        (key,) = first.input_requests
        prompt = await client.session.get_prompt(
            "ask_prompt",
            {"tag": "prompt"},
            allow_input_required=True,
            request_state=first.request_state,
            input_responses={
                key: types.ElicitResult(action="accept", content={"topic": "bridges"})
            },
        )
        read_first = await client.session.read_resource(
            "interactive://ask/res", allow_input_required=True
        )
        assert isinstance(read_first, types.InputRequiredResult) and read_first.input_requests
        auto_prompt = await client.get_prompt("ask_prompt", {"tag": "prompt-auto"})
        auto_read = await client.read_resource("interactive://ask/res-auto")
    assert isinstance(prompt, types.GetPromptResult)
    assert prompt.messages[0].content == types.TextContent(type="text", text="Write about bridges.")
    topic = echo_answer("Which topic should the prompt use?")
    assert auto_prompt.messages[0].content == types.TextContent(
        type="text", text=f"Write about {topic}."
    )
    (contents,) = auto_read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert (
        contents.text
        == f"secret for res-auto: {echo_answer('Which secret should the resource show?')}"
    )
    assert server.journal.answers("prompt") == [accept(topic="bridges")]


async def test_pre_answered_input_completes_without_a_round(server: Interactive) -> None:
    """A fresh call carrying inputResponses for its pushes' keys completes with no
    InputRequiredResult (one push, or two sequential ones)."""
    same = {"question": "Same?"}
    async with (
        asyncio.timeout(T),
        modern_client(server.url, **Answerer().client_kwargs()) as client,
    ):
        manual = ManualRounds(client)
        (key,), state = await manual.held("ask", {"tag": "pre-a", **same})
        declined = types.ElicitResult(action="decline")
        await manual.done("ask", {"tag": "pre-a", **same}, state=state, responses={key: declined})
        fresh = await manual.done(
            "ask", {"tag": "pre-b", **same}, responses={key: elicited(answer="ahead")}
        )
        (key1,), state1 = await manual.held("ask_twice", {"tag": "pre-c"})
        (key2,), _ = await manual.held(
            "ask_twice", {"tag": "pre-c"}, state=state1, responses={key1: elicited(name="Bo")}
        )
        both = {key1: elicited(name="Bo"), key2: elicited(color="red")}
        twice = await manual.done("ask_twice", {"tag": "pre-d"}, responses=both)
    assert json_of(fresh) == {"action": "accept", "content": {"answer": "ahead"}}
    assert server.journal.answers("pre-b") == [accept(answer="ahead")]
    assert text_of(twice) == "Bo likes red."
    assert server.journal.answers("pre-d") == [accept(name="Bo"), accept(color="red")]


@pytest.mark.parametrize(
    ("capabilities", "tool", "kind", "code"),
    [
        ({"elicitation": {"form": {}}}, "ask_url", "elicit", INVALID_PARAMS),
        ({"sampling": {}}, "roots", "roots", METHOD_NOT_FOUND),
        ({"roots": {}}, "sample", "sample", LEGACY_SAMPLING_REJECTED),
    ],
    ids=["url-mode-undeclared", "roots-undeclared", "sampling-undeclared"],
)
async def test_undeclared_pushes_are_refused_upstream(
    server: Interactive, capabilities: dict[str, Any], tool: str, kind: str, code: int
) -> None:
    """A push the request's capabilities do not cover is refused upstream and never reaches the
    client."""
    tag = f"undeclared-{tool}"
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        reply = await call_tool(
            poster(http, server.url, capabilities=capabilities), tool, {"tag": tag}
        )
    assert reply.response["result"]["resultType"] == RESULT_COMPLETE
    assert [m for m in reply.messages if "method" in m] == []
    errors = [
        (e["kind"], e["code"]) for e in server.journal.entries(tag) if e["event"] == "push_error"
    ]
    assert errors == [(kind, code)]


async def test_push_timed_out_upstream_while_held(server: Interactive) -> None:
    """When the legacy server times its push out while the call is held, the retry gets the
    call's outcome and the late answer is not sent upstream."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        arguments = {"tag": "timeout", "push_timeout_s": 0.3}
        requests, state = input_required(await call_tool(post, "ask", arguments))
        (key,) = requests
        await server.journal.wait_for("timeout", "push_error")
        late = await call_tool(
            post, "ask", arguments, responses={key: accept(answer="late")}, state=state
        )
    assert complete_text(late) == '{"error": {"code": 408}}'
    assert server.journal.events("timeout") == ["call", "push_error"]


async def test_missing_answers_are_asked_again_alone(server: Interactive) -> None:
    """A retry answering one of three requests gets a new InputRequiredResult asking only for the
    other two."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        requests, state = input_required(await call_tool(post, "everything", {"tag": "missing"}))
        keys = {request["method"]: key for key, request in requests.items()}
        reply = await call_tool(
            post,
            "everything",
            {"tag": "missing"},
            state=state,
            responses={keys[ELICIT]: accept(name="Zoe"), "unrelated-key": {"x": 1}},
        )
        again, state2 = input_required(reply)
        assert set(again) == {keys[SAMPLE], keys[ROOTS]} and state2 != state
        assert {k: r for k, r in again.items()} == {k: requests[k] for k in again}
        sampled = {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"}
        final = await call_tool(
            post,
            "everything",
            {"tag": "missing"},
            state=state2,
            responses={keys[SAMPLE]: sampled, keys[ROOTS]: {"roots": [{"uri": "file:///z"}]}},
        )
    assert complete_text(final) == "Zoe | Hi | file:///z"
    assert server.journal.answers("missing")[0] == accept(name="Zoe")


async def test_invalid_answer_is_an_error_and_the_state_stays_usable(server: Interactive) -> None:
    """An invalid inputResponses value is a -32602 error that consumes nothing; the same
    requestState then completes."""
    async with asyncio.timeout(T), aiohttp.ClientSession() as http:
        post = poster(http, server.url)
        requests, state = input_required(await call_tool(post, "ask", {"tag": "invalid"}))
        (key,) = requests
        bad = await call_tool(
            post, "ask", {"tag": "invalid"}, responses={key: {"action": "maybe"}}, state=state
        )
        error = bad.response["error"]
        assert error["code"] == INVALID_PARAMS and key in error["message"]
        assert server.journal.events("invalid") == ["call"]
        good = await call_tool(
            post, "ask", {"tag": "invalid"}, responses={key: accept(answer="ok")}, state=state
        )
    assert complete_text(good) == '{"action": "accept", "content": {"answer": "ok"}}'
    assert server.journal.answers("invalid") == [accept(answer="ok")]
