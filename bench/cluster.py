#!/usr/bin/env python3
"""Replicas (docs/operations.md § Replicas): what forwarding a retry to its owner costs, and what
three replicas give over one, in the same run. Writes results/cluster.md and results/cluster.json.

    .venv/bin/python bench/cluster.py [--rounds 200] [--total 600] [--concurrency 16]

- forwarded-retry latency: one `ask` call held on replica r1, its retry sent to r1 itself (local)
  or to r2 (which forwards it to r1); alternating, c=1; p50 and p90 of the retry POST alone.
- throughput: full MRTR round trips (`ask` -> InputRequiredResult -> retry) at concurrency
  `--concurrency`, every POST to the next replica in turn (round robin, as a load balancer does,
  so two thirds of the retries are forwarded), against the same load on r1 alone. All replicas
  and the legacy server share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from drivers import ELICIT_FORM, ModernHttp
from load import Sample, closed_loop, median, percentile, timed
from peers import Processes, free_port

RESULTS = Path(__file__).resolve().parent / "results"


def _env(replica: str, port: int, ports: list[int], key: str) -> dict[str, str]:
    return {
        "MRTR_BRIDGE_HELD_KEYS": f"k1={key}",
        "MRTR_BRIDGE_HELD_REPLICA_ID": replica,
        "MRTR_BRIDGE_CLUSTER_ADVERTISE_URL": f"http://127.0.0.1:{port}",
        "MRTR_BRIDGE_CLUSTER_PEERS": ",".join(f"http://127.0.0.1:{peer}" for peer in ports),
        "MRTR_BRIDGE_LOG_LEVEL": "warning",
    }


async def _finish(on: ModernHttp, held: dict[str, object], index: int) -> str:
    return await on.finish_held(f"t{index}", held)


async def _retry_latency(r1: ModernHttp, r2: ModernHttp, rounds: int) -> tuple[Sample, Sample]:
    local, forwarded = Sample(), Sample()
    for index in range(rounds):
        order = [(r1, local), (r2, forwarded)] if index % 2 == 0 else [(r2, forwarded), (r1, local)]
        for retry_on, sample in order:
            held = await r1.open_held(f"t{index}")
            started = time.perf_counter()
            await timed(functools.partial(_finish, retry_on, held), index, sample)
            sample.elapsed_s += time.perf_counter() - started
    return local, forwarded


async def _throughput(replicas: list[ModernHttp], total: int, concurrency: int) -> Sample:
    turn = itertools.count()

    def next_replica() -> ModernHttp:
        return replicas[next(turn) % len(replicas)]

    async def round_trip(index: int) -> str:
        held = await next_replica().open_held(f"c{index}")
        return await next_replica().finish_held(f"c{index}", held)

    return await closed_loop([round_trip] * concurrency, total)


def _summary(sample: Sample) -> dict[str, Any]:
    return {
        "calls": sample.calls,
        "errors": sample.errors,
        "first_error": sample.first_error,
        "p50_ms": round(median(sample.latencies_ms), 3),
        "p90_ms": round(percentile(sample.latencies_ms, 90), 3),
        "throughput_per_s": round(sample.throughput, 1),
    }


async def measure(ports: list[int], args: argparse.Namespace) -> dict[str, Any]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        bridges = [
            ModernHttp(http, f"http://127.0.0.1:{port}/mcp", capabilities=ELICIT_FORM)
            for port in ports
        ]
        for bridge in bridges:  # warm: sessions, the peer map
            await _throughput([bridge, *bridges], 30, 3)
        local, forwarded = await _retry_latency(bridges[0], bridges[1], args.rounds)
        one = await _throughput(bridges[:1], args.total, args.concurrency)
        three = await _throughput(bridges, args.total, args.concurrency)
    return {
        "retry_local": _summary(local),
        "retry_forwarded": _summary(forwarded),
        "forwarding_adds_p50_ms": round(
            median(forwarded.latencies_ms) - median(local.latencies_ms), 3
        ),
        "one_replica": _summary(one),
        "three_replicas": _summary(three),
        "throughput_ratio_three_vs_one": round(three.throughput / one.throughput, 3)
        if one.throughput
        else None,
    }


def markdown(result: dict[str, Any], facts: dict[str, Any]) -> str:
    def row(name: str, figure: dict[str, Any]) -> str:
        return (
            f"| {name} | {figure['p50_ms']} | {figure['p90_ms']} | {figure['throughput_per_s']} | "
            f"{figure['calls']} | {figure['errors']} |"
        )

    return "\n".join(
        [
            "# Replicas: forwarding cost and three replicas against one",
            "",
            "`bench/cluster.py` (method: [bench/README.md](../README.md#replicas)).",
            "",
            "| path | p50 ms | p90 ms | per s | calls | errors |",
            "| --- | --- | --- | --- | --- | --- |",
            row("retry on its owner (local), c=1", result["retry_local"]),
            row("retry on another replica (forwarded), c=1", result["retry_forwarded"]),
            row(f"round trips, one replica, c={facts['concurrency']}", result["one_replica"]),
            row(
                f"round trips, three replicas round robin, c={facts['concurrency']}",
                result["three_replicas"],
            ),
            "",
            f"- A forwarded retry adds **{result['forwarding_adds_p50_ms']} ms** at p50 over a "
            "local one.",
            f"- Three replicas give **{result['throughput_ratio_three_vs_one']}x** the round "
            "trips per second of one, "
            f"on {facts['cpus']} CPU(s) shared by every replica, the legacy server and the load "
            "generator: "
            "this measures the forwarding overhead under load, not the scaling a replica per "
            "machine gives.",
            "",
            f"Machine: {facts['machine']}; Python {facts['python']}; load before "
            f"{facts['load_before']}; "
            f"{facts['date']}.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--total", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    key = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    facts = {
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "load_before": " ".join(f"{value:.2f}" for value in os.getloadavg()),
        "concurrency": args.concurrency,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    procs = Processes()
    try:
        legacy = procs.legacy_http()
        ports = [free_port() for _ in range(3)]
        for index, port in enumerate(ports):
            procs.replica(
                f"r{index + 1}", legacy.url, port, _env(f"r{index + 1}", port, ports, key)
            )
        result = asyncio.run(measure(ports, args))
    finally:
        procs.close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cluster.json").write_text(json.dumps({"facts": facts, **result}, indent=2) + "\n")
    (RESULTS / "cluster.md").write_text(markdown(result, facts))
    print(markdown(result, facts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
