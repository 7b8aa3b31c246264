#!/usr/bin/env python3
"""Fuzz the bridge's modern HTTP front with mutated and random messages (issue 6).

Starts the journaling legacy server (`tests/peers/journal_server.py`, mcp 1.x, `.venv-legacy`) and
`mrtr-bridge serve` in front of it, opens `--held` interactive calls under their own principal,
then sends `--messages` requests from several fuzzing principals: valid seeds, byte mutations,
structural JSON mutations, header mutations, forged and replayed `requestState`s, odd HTTP
methods, and random bytes. Bounded by `--max-seconds` overall and a per-request timeout.

Afterwards the bridge must still run, `/healthz` and `/readyz` answer 200, `/metrics` parse, every
held call complete with its own answer, and a fresh call and MRTR round work. A *crash* is any
5xx, dropped connection or timeout, a JSON reply that is not one JSON-RPC response, the bridge
process exiting, or a crash event in its log (`front_request_crashed`, `bridge_bug`, ...).

    .venv/bin/python bench/fuzz_front.py                    # 10,000 messages (about a minute)
    .venv/bin/python bench/fuzz_front.py --messages 300 --json

Exit status 0 when there were no crashes and no held call was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Final

import aiohttp

REPO: Final = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.harness import ModernPoster, PeerProcess, Peers, bridge_env  # noqa: E402

JsonObject = dict[str, Any]
CAPS: Final[JsonObject] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
TOOLS: Final = ("echo", "ask", "sample", "whoami", "ask_rounds", "nope", "")
METHODS: Final = (
    "tools/call",
    "tools/list",
    "prompts/get",
    "prompts/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "completion/complete",
    "server/discover",
    "initialize",
    "ping",
    "x/y",
)
CRASH_EVENTS: Final = (
    "front_request_crashed",
    "bridge_bug",
    "background_task_failed",
    "held_call_bug",
    "front_engine_crashed",
    "upstream_call_crashed",
    "Task exception was never retrieved",
)
ODD_VALUES: Final[list[Any]] = [
    None,
    True,
    -1,
    0,
    2**70,
    1e308,
    -0.0,
    "",
    "\u0000",
    "\ud800",
    "é東",
    [],
    {},
    "x" * 5000,
    "=?base64?!!?=",
    {"_meta": None},
    [[[[[[]]]]]],
]
FUZZ_AUTH: Final = ("Bearer fuzz-a", "Bearer fuzz-b", "Bearer fuzz-c", None)
ANSWERS: Final[list[Any]] = [
    {"action": "accept", "content": {"answer": "a"}},
    {"action": "decline"},
    {"action": "cancel"},
    {"role": "assistant", "content": {"type": "text", "text": "s"}, "model": "m"},
    {"roots": []},
    {"action": "accept", "content": {"answer": ["not", "a", "string"]}},
    {"action": 7},
    None,
    "x" * 3000,
]
# the params that got an InputRequiredResult, its state, its keys
Held = tuple[JsonObject, str, list[str]]
REQUEST_TIMEOUT_S: Final = 30.0


class Fuzzer:
    """Builds one fuzzed request at a time from a seeded RNG and a pool of real requestStates."""

    def __init__(self, rng: random.Random, poster: ModernPoster, states: list[Held]) -> None:
        self.rng = rng
        self.poster = poster
        self.states = states  # shared by every fuzzing principal: replays cross principals too

    def seed(self) -> JsonObject:
        rng = self.rng
        if self.states and rng.random() < 0.25:
            return self.poster.body("tools/call", self.retry(rng.choice(self.states)))
        method = "tools/call" if rng.random() < 0.5 else rng.choice(METHODS[:9])
        params: JsonObject = {}
        if method == "tools/call":
            params = {
                "name": rng.choice(TOOLS[:5]),
                "arguments": {"text": "t", "tag": f"f{rng.randrange(99)}"},
            }
        elif method in ("prompts/get", "resources/read"):
            params = {"name": "p"} if method == "prompts/get" else {"uri": "demo://x"}
        return self.poster.body(method, params)

    def retry(self, held: Held) -> JsonObject:
        """A retry of a real InputRequiredResult: right, wrong, missing or extra answers."""
        params, state, keys = held
        answers = {key: self.rng.choice(ANSWERS) for key in keys if self.rng.random() < 0.9}
        if self.rng.random() < 0.2:
            answers["extra"] = self.rng.choice(ODD_VALUES)
        return {**params, "requestState": state, "inputResponses": answers}

    def mutate_json(self, node: Any, depth: int = 0) -> Any:
        rng = self.rng
        if isinstance(node, dict) and node and rng.random() < 0.7:
            key = rng.choice(list(node))
            choice = rng.random()
            if choice < 0.2:
                return {k: v for k, v in node.items() if k != key}
            if choice < 0.35:
                return {
                    **node,
                    rng.choice(["id", "method", "params", "jsonrpc", "_meta", "zz"]): rng.choice(
                        ODD_VALUES
                    ),
                }
            return {**node, key: self.mutate_json(node[key], depth + 1)}
        if isinstance(node, list) and node and rng.random() < 0.5:
            index = rng.randrange(len(node))
            return [*node[:index], self.mutate_json(node[index], depth + 1), *node[index + 1 :]]
        if isinstance(node, str) and rng.random() < 0.5:
            return rng.choice(
                [
                    node[::-1],
                    node * 3,
                    node + "\u202e",
                    rng.choice(METHODS),
                    base64.b64encode(node.encode()).decode(),
                ]
            )
        return self.rng.choice([*ODD_VALUES, self.deep(rng.randrange(2, 200))])

    def deep(self, levels: int) -> Any:
        value: Any = "bottom"
        for _ in range(levels):
            value = {"d": value} if self.rng.random() < 0.5 else [value]
        return value

    def mutate_bytes(self, raw: bytes) -> bytes:
        data = bytearray(raw)
        for _ in range(self.rng.randrange(1, 6)):
            op = self.rng.random()
            at = self.rng.randrange(len(data) + 1)
            if op < 0.4 and data:
                data[min(at, len(data) - 1)] = self.rng.randrange(256)
            elif op < 0.6:
                data[at:at] = bytes(
                    self.rng.randrange(256) for _ in range(self.rng.randrange(1, 8))
                )
            elif op < 0.8:
                del data[at : at + self.rng.randrange(1, 16)]
            else:
                data = data[:at]
        return bytes(data)

    def mutate_headers(self, headers: dict[str, str]) -> dict[str, str]:
        rng = self.rng
        headers = dict(headers)
        name = rng.choice(
            [
                "Mcp-Method",
                "Mcp-Name",
                "MCP-Protocol-Version",
                "Content-Type",
                "Accept",
                "Origin",
                "Mcp-Param-Text",
                "Last-Event-ID",
                "Authorization",
            ]
        )
        headers[name] = rng.choice(
            [
                "",
                "tools/list",
                "2025-11-25",
                "text/plain",
                "=?base64?AAAA?=",
                "=?base64?%?=",
                "http://evil.example",
                "x" * rng.choice([10, 9000]),
                "Bearer fuzz-a",
            ]
        )
        if rng.random() < 0.2:
            headers.pop(rng.choice(list(headers)), None)
        return headers

    def headers_for(self, message: Any, fallback: dict[str, str]) -> dict[str, str]:
        """Matching routing headers for a mutated message when it still has a shape to match."""
        try:
            headers = self.poster.request_headers(message)
        except (AttributeError, KeyError, TypeError, ValueError):  # no shape left, or not encodable
            return fallback
        return {
            name: value
            for name, value in headers.items()  # only what HTTP can carry
            if isinstance(value, str) and value.isprintable() and value.isascii()
        }

    def next(self) -> tuple[str, bytes, dict[str, str]]:
        """(HTTP method, body, headers) of the next fuzzed request."""
        rng = self.rng
        message = self.seed()
        headers = self.poster.request_headers(message)
        kind = rng.random()
        if kind < 0.15:
            return "POST", json.dumps(message).encode(), headers
        if kind < 0.45:
            mutated = self.mutate_json(message)
            return "POST", json.dumps(mutated).encode(), self.headers_for(mutated, headers)
        if kind < 0.65:
            return "POST", self.mutate_bytes(json.dumps(message).encode()), headers
        if kind < 0.85:
            return "POST", json.dumps(message).encode(), self.mutate_headers(headers)
        if kind < 0.92:
            return "POST", bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))), headers
        if kind < 0.96:
            return rng.choice(["GET", "DELETE", "PUT", "PATCH", "OPTIONS"]), b"", headers
        forged = self.seed()
        forged["params"]["requestState"] = "v1." + base64.urlsafe_b64encode(
            rng.randbytes(120)
        ).decode().rstrip("=")
        return "POST", json.dumps(forged).encode(), self.poster.request_headers(forged)


class Tally:
    def __init__(self) -> None:
        self.statuses: collections.Counter[int] = collections.Counter()
        self.codes: collections.Counter[int] = collections.Counter()
        self.crashes: list[str] = []
        self.latencies: list[float] = []

    def check(self, status: int, content_type: str, body: bytes, elapsed: float) -> None:
        self.statuses[status] += 1
        self.latencies.append(elapsed)
        if status >= 500:
            self.crashes.append(f"HTTP {status}: {body[:200]!r}")
        if content_type.startswith("application/json") and status != 202:
            try:
                reply = json.loads(body)
                # never a null id
                assert reply["jsonrpc"] == "2.0" and reply.get("id", 0) is not None
                assert ("result" in reply) != ("error" in reply)
            except (ValueError, KeyError, TypeError, AssertionError):
                self.crashes.append(f"not one JSON-RPC response (HTTP {status}): {body[:200]!r}")
                return
            if "error" in reply:
                self.codes[reply["error"].get("code")] += 1


def remember(fuzzer: Fuzzer, body: bytes, reply: JsonObject) -> None:
    """Keep a real InputRequiredResult for later retries (by any fuzzing principal)."""
    result = reply.get("result")
    if not isinstance(result, dict) or result.get("resultType") != "input_required":
        return
    params = json.loads(body).get("params", {})
    clean = {
        key: value
        for key, value in params.items()
        if key not in ("requestState", "inputResponses", "_meta")
    }
    fuzzer.states.append((clean, result["requestState"], list(result["inputRequests"])))


async def send(http: aiohttp.ClientSession, url: str, fuzzer: Fuzzer, tally: Tally) -> None:
    method, body, headers = fuzzer.next()
    started = time.monotonic()
    try:
        async with http.request(
            method,
            url,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
        ) as response:
            raw = await response.read()
            tally.check(
                response.status,
                response.headers.get("Content-Type", ""),
                raw,
                time.monotonic() - started,
            )
            if b'"input_required"' in raw and response.content_type == "application/json":
                remember(fuzzer, body, json.loads(raw))
    except (
        aiohttp.ClientResponseError
    ) as exc:  # e.g. aiohttp refusing an oversized head: still an answer
        tally.check(exc.status, "", b"", time.monotonic() - started)
    except (aiohttp.ClientError, TimeoutError) as exc:
        tally.crashes.append(f"{type(exc).__name__} on {method}: {exc}")


async def open_held(
    http: aiohttp.ClientSession, url: str, count: int
) -> list[tuple[ModernPoster, JsonObject]]:
    poster = ModernPoster(http, url, capabilities=CAPS, headers={"Authorization": "Bearer keeper"})
    held = []
    for n in range(count):
        reply = await poster.post("tools/call", {"name": "ask", "arguments": {"tag": f"keep-{n}"}})
        result = reply.response["result"]
        assert result["resultType"] == "input_required", result
        held.append(
            (
                poster,
                {
                    "name": "ask",
                    "arguments": {"tag": f"keep-{n}"},
                    "requestState": result["requestState"],
                    "inputResponses": {
                        key: {"action": "accept", "content": {"answer": f"kept-{n}"}}
                        for key in result["inputRequests"]
                    },
                },
            )
        )
    return held


async def finish_held(held: list[tuple[ModernPoster, JsonObject]]) -> int:
    """Complete every held call; how many came back with their own answer."""
    done = 0
    for n, (poster, params) in enumerate(held):
        reply = await poster.post("tools/call", params)
        result = reply.response.get("result", {})
        done += result.get("content", [{}])[0].get("text") == f"keep-{n}: kept-{n}"
    return done


async def health(http: aiohttp.ClientSession, bridge: PeerProcess) -> dict[str, Any]:
    base = bridge.url.rsplit("/", 1)[0]
    checks: dict[str, Any] = {"alive": bridge.popen.poll() is None}
    for path in ("/healthz", "/readyz", "/metrics"):
        async with http.get(base + path) as response:
            checks[path] = response.status
            if path == "/metrics":
                text = await response.text()
                checks["metrics_lines"] = len(
                    [line for line in text.splitlines() if not line.startswith("#")]
                )
    fresh = ModernPoster(
        http, bridge.url, capabilities=CAPS, headers={"Authorization": "Bearer after"}
    )
    echo = await fresh.post("tools/call", {"name": "echo", "arguments": {"text": "after"}})
    checks["echo_after"] = (
        echo.response.get("result", {}).get("content", [{}])[0].get("text") == "after"
    )
    return checks


async def run(args: argparse.Namespace, peers: Peers) -> JsonObject:
    legacy = peers.legacy("journal_server.py", "--journal", str(peers.log_dir / "journal.jsonl"))
    env = bridge_env({"held": {"max_per_principal": 16}, "front": {"request_timeout_s": 20}})
    bridge = peers.bridge(legacy.url, env=env)
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.max_seconds
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(
        connector=connector, skip_auto_headers=("Content-Type",)
    ) as http:
        held = await open_held(http, bridge.url, args.held)
        states: list[Held] = []
        fuzzers = [
            Fuzzer(
                rng,
                ModernPoster(
                    http,
                    bridge.url,
                    capabilities=rng.choice([CAPS, {}]),
                    headers={"Authorization": auth} if auth else {},
                ),
                states,
            )
            for auth in FUZZ_AUTH
        ]
        tally, sent, started = Tally(), 0, time.monotonic()
        queue = iter(range(args.messages))

        async def worker() -> None:
            nonlocal sent
            for _ in queue:
                if time.monotonic() > deadline:
                    return
                await send(http, bridge.url, rng.choice(fuzzers), tally)
                sent += 1

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        fuzz_s = time.monotonic() - started
        checks = await health(http, bridge)
        completed = await finish_held(held)
    log = bridge.log_text(50_000_000)
    crash_lines = [
        line[:300] for line in log.splitlines() if any(event in line for event in CRASH_EVENTS)
    ]
    latencies = sorted(tally.latencies) or [0.0]
    return {
        "messages_sent": sent,
        "seconds": round(fuzz_s, 1),
        "rate_per_s": round(sent / fuzz_s, 1) if fuzz_s else 0,
        "crashes": len(tally.crashes) + len(crash_lines) + (not checks["alive"]),
        "crash_samples": (tally.crashes + crash_lines)[:10],
        "held_opened": args.held,
        "held_completed": completed,
        "statuses": dict(sorted(tally.statuses.items())),
        "error_codes": dict(sorted(tally.codes.items(), key=lambda kv: str(kv[0]))),
        "request_states_collected": len(states),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1),
        "health": checks,
        "seed": args.seed,
        "bridge_log": str(bridge.log_path),
    }


def verdict(summary: JsonObject) -> bool:
    checks = summary["health"]
    healthy = (
        checks["alive"] and checks["/healthz"] == checks["/readyz"] == checks["/metrics"] == 200
    )
    return (
        summary["crashes"] == 0
        and summary["held_completed"] == summary["held_opened"]
        and healthy
        and bool(checks["echo_after"])
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--messages", type=int, default=10_000, help="fuzzed requests to send (default 10000)"
    )
    parser.add_argument(
        "--held", type=int, default=8, help="held calls kept open during the run (default 8)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=16, help="requests in flight (default 16)"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=600.0, help="stop sending after this (default 600)"
    )
    parser.add_argument("--seed", type=int, default=20260728, help="RNG seed (default 20260728)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    args = parser.parse_args(argv)
    peers = Peers()
    try:
        summary = asyncio.run(run(args, peers))
    finally:
        peers.close()
    ok = verdict(summary)
    if args.json:
        print(json.dumps({**summary, "ok": ok}))
    else:
        for key, value in summary.items():
            print(f"{key:>22}: {value}")
        print(f"{'verdict':>22}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
