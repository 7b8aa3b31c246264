"""The MRTR round trip (issue 14): one elicitation at concurrency 1, through the bridge against
direct, and the floor that explains it.

- bridge: tools/call -> InputRequiredResult -> retry with the answer -> complete, on the default
  bridge (pushes batched by learned size; `held.batch_quiet_ms` is only a ceiling) and on one
  with a 1 ms ceiling (the same figure when the ceiling no longer matters);
- direct: the legacy push round trip (tools/call -> push on the SSE stream -> POST the answer ->
  result on the same stream);
- floor: the same legacy round trip through a bare streaming aiohttp relay
  (bench/servers/stream_relay.py), one extra hop with no bridge logic; and the CPU each process
  spends per round trip (user + system, from /proc), the bridge's against the relay's.
"""

from __future__ import annotations

from typing import Final

import aiohttp
from drivers import ELICIT_FORM, LegacyHttp, ModernHttp
from figures import Figure, compare, errors_of, first_errors, latency_summary
from load import Call, alternating, median, percentile
from peers import Processes
from scenarios_cpu import cpu_seconds

MRTR_ROUNDS: Final = 150
CPU_ROUNDS: Final = 200  # round trips per path for the CPU figure
MRTR_TARGET_MS: Final = 3.0
DEFAULT_QUIET_MS: Final = 50.0  # held.batch_quiet_ms's default (config/bridge.example.toml)


async def _cpu_per_call_ms(call: Call, pid: int) -> float:
    before = cpu_seconds(pid)
    for index in range(CPU_ROUNDS):
        await call(index)
    return (cpu_seconds(pid) - before) * 1000 / CPU_ROUNDS


async def mrtr_figures(
    http: aiohttp.ClientSession, procs: Processes, legacy: str, bridges: dict[str, int]
) -> list[Figure]:
    """`bridges`: URL -> pid of the default bridge, then the 1 ms-ceiling one."""
    relay_proc = procs.stream_relay(legacy)
    direct = LegacyHttp(http, legacy, capabilities=ELICIT_FORM)
    relay = LegacyHttp(http, relay_proc.url, capabilities=ELICIT_FORM)
    await direct.initialize()
    await relay.initialize()
    (default_url, default_pid), (quiet_url, _) = bridges.items()
    default = ModernHttp(http, default_url, capabilities=ELICIT_FORM)
    quiet = ModernHttp(http, quiet_url, capabilities=ELICIT_FORM)
    calls: list[Call] = [
        lambda i: direct.push_round_trip(f"t{i}"),
        lambda i: default.mrtr_round_trip(f"t{i}"),
        lambda i: quiet.mrtr_round_trip(f"t{i}"),
        lambda i: relay.push_round_trip(f"t{i}"),
    ]
    await alternating(calls, 10)  # warm-up: the bridges learn that `ask` sends one push
    d, b, q, r = await alternating(calls, MRTR_ROUNDS)
    bridge_cpu = await _cpu_per_call_ms(calls[1], default_pid)
    relay_cpu = await _cpu_per_call_ms(calls[3], relay_proc.pid)
    floor = median(r.latencies_ms) - median(d.latencies_ms)
    figures = [
        compare(
            key,
            f"1 elicitation, c=1: MRTR round trip ({how})",
            "ms",
            median(sample.latencies_ms),
            median(d.latencies_ms),
            comparison="delta",
            target=f"<= +{MRTR_TARGET_MS:g} ms",
            check=lambda v: v <= MRTR_TARGET_MS,
            errors=errors_of(sample, d),
            note=first_errors(sample, d),
            extra={
                "bridge": latency_summary(sample),
                "direct": latency_summary(d),
                "batch_quiet_ms": quiet_ms,
            },
            detail=f"{sample.calls} round trips; p99 {percentile(sample.latencies_ms, 99):.1f} vs "
            f"{percentile(d.latencies_ms, 99):.1f} ms; floor (bare streaming relay) "
            f"{floor:+.2f} ms",
        )
        for key, how, quiet_ms, sample in (
            ("mrtr_learned", "batching by learned size", DEFAULT_QUIET_MS, b),
            ("mrtr_ceiling_1ms", "the same, batch_quiet_ms=1", 1.0, q),
        )
    ]
    figures.append(
        compare(
            "mrtr_relay_floor",
            "1 elicitation, c=1: legacy round trip through a bare streaming relay",
            "ms",
            median(r.latencies_ms),
            median(d.latencies_ms),
            comparison="delta",
            errors=errors_of(r, d),
            note=first_errors(r, d),
            extra={"relay": latency_summary(r), "direct": latency_summary(d)},
            detail="bench/servers/stream_relay.py: one extra hop, no parsing; the floor for the "
            "MRTR row",
        )
    )
    figures.append(
        compare(
            "mrtr_cpu_per_round_trip",
            "1 elicitation: CPU per round trip, bridge vs bare streaming relay",
            "ms",
            bridge_cpu,
            relay_cpu,
            comparison="ratio",
            detail=f"user + system of each process over {CPU_ROUNDS} round trips; what the bridge "
            "spends beyond the relay is on the round's critical path",
        )
    )
    return figures
