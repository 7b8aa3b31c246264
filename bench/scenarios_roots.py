"""Issue 10 figures: what roots-affine sessions and `upstream.session_per_call` cost, over HTTP,
c=1.

Every figure compares two kinds of modern client through the same bridge, interleaved call by call:
a client that declares roots against one that declares none (the baseline: no roots, no affinity).
- ordinary server (the bench server, `echo`; it never asks for roots): the roots client must pay
  zero extra rounds, and its latency ratio is reported;
- roots-keeping server (`tests/peers/roots_keeping_server.py`, `kept_roots`; it asks on
  `initialized` and keeps the answer): a client that pre-answers the bridge's roots key (warm
  roots-affine session, no extra round), one that does not (one extra round per call), and one
  with new roots on every call (a fresh session each time: open, the server's ask, the settle wait);
- `upstream.session_per_call` on the ordinary server: `echo` with a fresh upstream session per call
  against the default bridge.
Extra rounds are counted, not inferred: front requests per completed call, minus one.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import aiohttp
from drivers import CallFailed, JsonObject, ModernHttp
from figures import Figure, compare, errors_of, first_errors, latency_summary, verdict
from load import Call, Sample, alternating, median
from peers import ROOTS_KEEPING_SERVER, Processes

from translators.protocol.roots import ROOTS_INPUT_KEY

# MRTR_BENCH_ROOTS_ROUNDS: fewer calls for a quick look (the committed figures use the defaults)
ROUNDS: Final = int(os.environ.get("MRTR_BENCH_ROOTS_ROUNDS", "150"))
NEW_ROOTS_ROUNDS: Final = max(ROUNDS // 5, 5)
WARMUP: Final = 10
ROOTS_CAPS: Final[JsonObject] = {"roots": {}}


@dataclass
class Client:
    """A modern client that calls one tool and answers the bridge's roots question if asked."""

    modern: ModernHttp
    tool: str
    arguments: JsonObject
    roots: Sequence[str] = ()
    pre_answer: bool = False
    new_roots_each_call: bool = False
    requests: int = 0
    completed: int = 0
    _fresh: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _answer(self) -> JsonObject:
        roots = (
            [f"file:///bench/fresh-{next(self._fresh)}"] if self.new_roots_each_call else self.roots
        )
        return {ROOTS_INPUT_KEY: {"roots": [{"uri": uri} for uri in roots]}}

    async def call(self, index: int) -> None:
        extra = {"inputResponses": self._answer()} if self.pre_answer else None
        result = await self._send(extra)
        if result.get("resultType") == "input_required":
            if "requestState" in result or list(result.get("inputRequests", {})) != [
                ROOTS_INPUT_KEY
            ]:
                raise CallFailed(f"expected the bridge's roots question, got {result}")
            result = await self._send({"inputResponses": self._answer()})
        if result.get("resultType", "complete") != "complete":
            raise CallFailed(f"not complete: {result}")
        self.completed += 1

    async def _send(self, extra: JsonObject | None) -> JsonObject:
        self.requests += 1
        return await self.modern.call(self.tool, self.arguments, extra)

    def reset(self) -> None:
        self.requests = self.completed = 0

    @property
    def extra_rounds(self) -> float:
        return (self.requests - self.completed) / self.completed if self.completed else float("nan")


def _client(
    http: aiohttp.ClientSession,
    url: str,
    tool: str,
    *,
    roots: bool,
    pre_answer: bool = False,
    new_roots_each_call: bool = False,
) -> Client:
    arguments: JsonObject = {"text": "hi"} if tool == "echo" else {}
    caps = ROOTS_CAPS if roots else {}
    return Client(
        ModernHttp(http, url, capabilities=caps),
        tool,
        arguments,
        roots=["file:///bench/a"] if roots else (),
        pre_answer=pre_answer,
        new_roots_each_call=new_roots_each_call,
    )


async def _measure(clients: Sequence[Client], rounds: int) -> list[Sample]:
    calls: list[Call] = [client.call for client in clients]
    await alternating(calls, WARMUP)
    for client in clients:
        client.reset()
    return await alternating(calls, rounds)


def _ratio(
    key: str,
    label: str,
    client: Client,
    sample: Sample,
    base: Client,
    baseline: Sample,
    *,
    target_rounds: float,
) -> Figure:
    """p50 ratio against the baseline, reported; the verdict is on the extra rounds per call."""
    figure = compare(
        key,
        label,
        "ms",
        median(sample.latencies_ms),
        median(baseline.latencies_ms),
        comparison="ratio",
        errors=errors_of(sample, baseline),
        note=first_errors(sample, baseline),
        extra={
            "roots_client": latency_summary(sample),
            "baseline": latency_summary(baseline),
            "extra_rounds_per_call": client.extra_rounds,
            "baseline_extra_rounds_per_call": base.extra_rounds,
        },
        detail=f"{client.extra_rounds:g} extra rounds per call (baseline {base.extra_rounds:g}); "
        f"{sample.calls} calls",
    )
    figure.target = f"{target_rounds:g} extra rounds per call"
    figure.verdict = verdict(
        client.extra_rounds, lambda rounds: rounds == target_rounds, sample.errors + baseline.errors
    )
    return figure


async def roots_figures(procs: Processes, http: aiohttp.ClientSession) -> list[Figure]:
    ordinary = procs.legacy_http("legacy-roots-ordinary")
    keeping = procs.legacy_http("legacy-roots-keeping", ROOTS_KEEPING_SERVER)
    plain_bridge = procs.bridge("bridge-roots-ordinary", ["--upstream", ordinary.url])
    keeping_bridge = procs.bridge("bridge-roots-keeping", ["--upstream", keeping.url])
    per_call = procs.bridge(
        "bridge-session-per-call",
        ["--upstream", ordinary.url],
        {"MRTR_BRIDGE_UPSTREAM_SESSION_PER_CALL": "true"},
    )
    figures = await _ordinary(http, plain_bridge.url)
    figures += await _keeping(http, keeping_bridge.url)
    figures.append(await _session_per_call(http, plain_bridge.url, per_call.url))
    return figures


async def _ordinary(http: aiohttp.ClientSession, url: str) -> list[Figure]:
    base, roots = _client(http, url, "echo", roots=False), _client(http, url, "echo", roots=True)
    b, r = await _measure([base, roots], ROUNDS)
    return [
        _ratio(
            "roots_ordinary",
            "ordinary server, echo: client with roots / without",
            roots,
            r,
            base,
            b,
            target_rounds=0,
        )
    ]


async def _keeping(http: aiohttp.ClientSession, url: str) -> list[Figure]:
    base = _client(http, url, "kept_roots", roots=False)
    pre = _client(http, url, "kept_roots", roots=True, pre_answer=True)
    asked = _client(http, url, "kept_roots", roots=True)
    b, p, a = await _measure([base, pre, asked], ROUNDS)
    figures = [
        _ratio(
            "roots_keeping_pre_answered",
            "roots-keeping server: roots pre-answered (warm session) / no roots",
            pre,
            p,
            base,
            b,
            target_rounds=0,
        ),
        _ratio(
            "roots_keeping_asked",
            "roots-keeping server: roots asked by the bridge / no roots",
            asked,
            a,
            base,
            b,
            target_rounds=1,
        ),
    ]
    fresh = _client(http, url, "kept_roots", roots=True, pre_answer=True, new_roots_each_call=True)
    b2, f = await _measure([base, fresh], NEW_ROOTS_ROUNDS)
    figures.append(
        compare(
            "roots_keeping_new_roots",
            "roots-keeping server: new roots on every call (fresh session) - no roots",
            "ms",
            median(f.latencies_ms),
            median(b2.latencies_ms),
            comparison="delta",
            errors=errors_of(f, b2),
            note=first_errors(f, b2),
            extra={"roots_client": latency_summary(f), "baseline": latency_summary(b2)},
            detail=f"{f.calls} calls; includes upstream.roots_settle_ms (50 ms)",
        )
    )
    return figures


async def _session_per_call(http: aiohttp.ClientSession, shared_url: str, fresh_url: str) -> Figure:
    shared = _client(http, shared_url, "echo", roots=False)
    fresh = _client(http, fresh_url, "echo", roots=False)
    s, f = await _measure([shared, fresh], ROUNDS)
    return compare(
        "session_per_call",
        "upstream.session_per_call, echo: fresh session per call / shared",
        "ms",
        median(f.latencies_ms),
        median(s.latencies_ms),
        comparison="ratio",
        errors=errors_of(f, s),
        note=first_errors(f, s),
        extra={"fresh": latency_summary(f), "shared": latency_summary(s)},
        detail=f"{f.calls} calls; +{median(f.latencies_ms) - median(s.latencies_ms):.1f} ms per "
        "call",
    )
