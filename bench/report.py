"""Writes a run's figures to `bench/results/latest.json` and `bench/results/latest.md` (or
`<name>.*`)."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from figures import Figure
from peers import LEGACY_PYTHON, REPO

RESULTS = REPO / "bench" / "results"


def _version(python: Path, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    return done.stdout.strip() or "?"


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )
    return done.stdout.strip()


def machine_facts(load_before: str, busy_before: float) -> dict[str, Any]:
    """What the numbers were measured on (read-only look-ups)."""
    bridge_python = REPO / ".venv" / "bin" / "python"
    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "bridge": _version(bridge_python, "mrtr-bridge"),
        "aiohttp": _version(bridge_python, "aiohttp"),
        "legacy_mcp": _version(LEGACY_PYTHON, "mcp"),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "worktree_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "loadavg_before": load_before,
        "cpu_busy_before": round(busy_before, 3),
        "loadavg_after": Path("/proc/loadavg").read_text().split(" ", 3)[:3],
    }


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def _number(value: float | None, unit: str) -> str:
    if value is None or math.isnan(value):
        return "-"
    if unit == "share":
        return f"{value:.1%}"
    if unit == "calls":
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"


def _comparison(figure: Figure) -> str:
    if figure.value is None or figure.comparison == "":
        return ""
    if figure.comparison == "ratio":
        return f"{figure.value:.3f}x"
    return f"{figure.value:+.2f} {figure.unit}"


def _row(figure: Figure) -> str:
    errors = sum(figure.errors.values())
    cells = [
        figure.label,
        figure.unit,
        _number(figure.bridge, figure.unit),
        _number(figure.direct, figure.unit),
        _comparison(figure),
        figure.target or "-",
        figure.verdict,
        str(errors),
        figure.detail,
    ]
    return "| " + " | ".join(cells) + " |"


BUSY_WARNING: Final = (
    0.25  # CPU share used by other work before the run that makes the numbers suspect
)


def cpu_busy(seconds: float = 1.0) -> float:
    """The share of all CPUs not idle over `seconds` (from /proc/stat), before anything starts."""

    def sample() -> tuple[int, int]:
        fields = [
            int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        ]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1 - (idle1 - idle0) / (total1 - total0) if total1 > total0 else 0.0


def _busy_warning(facts: dict[str, Any]) -> list[str]:
    """A caution when other work was running: ratios hold up better than absolute numbers then."""
    busy = float(facts["cpu_busy_before"])
    if busy <= BUSY_WARNING:
        return []
    return [
        f"**Caution:** other work used {busy:.0%} of the CPUs just before the run: absolute "
        "numbers are low "
        "and noisy; compare the ratios, and re-run on a quiet machine before drawing conclusions.",
        "",
    ]


# The figures the performance issues (#30, then #45) are done by, in the order #45 lists them:
# each is measured in the same run as its baseline (relay, direct server, quiet rounds) and shown
# again at the top of the report beside its target. A row added for them adds its key here.
TARGETED: Final = (
    "echo_cpu_per_call",
    "held_call_memory_paced",
    "held_5000_errors",
    "status_page_bystander_p50",
    "echo_c1_p50",
    "mrtr_learned",
    "echo_c16_throughput",
    "echo_c64_throughput",
    "stdio_first_answer",
    "stdio_first_answer_modern",
    "conformance_under_load",
)


def _measured(figure: Figure) -> str:
    """The figure as its target reads it: an absolute target (KB, calls) by the value itself,
    with the ratio to its baseline beside it; a relative one by the ratio or delta."""
    absolute = _number(figure.bridge, figure.unit) + " " + figure.unit
    comparison = _comparison(figure)
    if not comparison:
        return absolute
    if figure.target and figure.unit in figure.target and "+" not in figure.target:
        return f"{absolute} ({comparison} of its baseline)"
    return comparison


def _targeted(figures: Sequence[Figure]) -> list[str]:
    """The targeted figures of this run, each beside its target and its baseline's name."""
    by_key = {figure.key: figure for figure in figures}
    rows = [
        f"| {f.label} | {_measured(f)} | {f.target or '-'} | {f.verdict} |"
        for f in (by_key.get(key) for key in TARGETED)
        if f is not None
    ]
    if not rows:
        return []
    return [
        "Targets (issue 45, and issue 30's that still hold), this run (each ratio or delta against "
        "its baseline measured in the "
        "same run; the full rows below):",
        "",
        "| figure | measured | target | verdict |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
    ]


def markdown(
    figures: Sequence[Figure],
    facts: dict[str, Any],
    elapsed_s: float,
    method_notes: str,
    name: str = "latest",
) -> str:
    lines = [
        "# mrtr-bridge benchmark results",
        "",
        f"Measured {facts['date_utc']} on {facts['cores']} cores ({facts['cpu']}), Python "
        f"{facts['python']}, "
        f"aiohttp {facts['aiohttp']}, legacy server `mcp` {facts['legacy_mcp']}, bridge "
        f"{facts['bridge']} "
        "at commit "
        f"{facts['commit']}{' (with uncommitted changes)' if facts['worktree_dirty'] else ''}; "
        f"CPUs {facts['cpu_busy_before']:.0%} busy with other work just before; "
        f"load average before {facts['loadavg_before']}, after {' '.join(facts['loadavg_after'])}; "
        f"whole run {elapsed_s:.0f} s. Method and how to run: [bench/README.md](../README.md). "
        f"Raw numbers (p90, per-round ratios, RSS readings): [{name}.json]({name}.json).",
        "",
        *_busy_warning(facts),
        *_targeted(figures),
        "| figure | unit | bridge | direct | bridge vs direct | target | verdict | errors | "
        "details |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(figure) for figure in figures),
        "",
        method_notes.strip(),
        "",
    ]
    notes = [f"- `{figure.key}`: {figure.note}" for figure in figures if figure.note]
    if notes:
        lines += ["Errors seen (first message per figure):", "", *notes, ""]
    return "\n".join(lines)


def write(
    figures: Sequence[Figure],
    facts: dict[str, Any],
    elapsed_s: float,
    method_notes: str,
    name: str = "latest",
) -> Path:
    """`results/<name>.md` and `results/<name>.json`."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": facts,
        "elapsed_s": round(elapsed_s, 1),
        "figures": [f.as_json() for f in figures],
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n")
    path = RESULTS / f"{name}.md"
    path.write_text(markdown(figures, facts, elapsed_s, method_notes, name))
    return path
