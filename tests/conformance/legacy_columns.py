"""Two columns for a set of conformance scenarios: an upstream used directly, and through the
bridge. Writes a Markdown report and exits 1 unless every scenario the upstream passes directly also
passes through the bridge (strict: no FAILURE, no WARNING).

`--kind legacy` (default): the 2025-11-25 server scenarios against the legacy fixture (legacy
clients pass through). `--kind modern`: the 2026-07-28 server scenarios against the modern fixture
(`tests/peers/modern_fixture_server.py`, relayed untranslated).

    python tests/conformance/legacy_columns.py DIRECT_OUTDIR BRIDGE_OUTDIR --scenarios LIST --report
    FILE
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from summarize import Scenario, load_results, load_scenario_list


def _cell(scenario: Scenario | None) -> str:
    if scenario is None:
        return "MISSING"
    if scenario.strict_pass:
        return "PASS"
    return f"FAIL ({scenario.count('FAILURE')} failed, {scenario.count('WARNING')} warnings)"


def _legacy_header(cli_version: str) -> list[str]:
    return [
        "# Conformance at 2025-11-25: legacy clients through the bridge",
        "",
        f"The official conformance CLI {cli_version}, `server --spec-version 2025-11-25` (a "
        "legacy client),",
        "against the legacy fixture server directly and through the bridge in front of it",
        "(`front.legacy_clients = pass`). Strict: a scenario passes with no FAILURE and no "
        "WARNING check.",
        "Regenerate with `make conformance` (written to `.conformance-results/legacy-clients/`).",
    ]


def _modern_header(cli_version: str) -> list[str]:
    return [
        "# Conformance at 2026-07-28: a modern upstream through the bridge",
        "",
        f"The official conformance CLI {cli_version}, `server --suite all --spec-version "
        "2026-07-28`,",
        "against the modern fixture server (`tests/peers/modern_fixture_server.py`, the `mcp` "
        "2.3.0 SDK's",
        "`MCPServer` over Streamable HTTP) directly and through the bridge in front of it, which "
        "detects",
        "the upstream's era and relays modern requests untranslated. Strict: a scenario passes "
        "with no",
        "FAILURE and no WARNING check. The run also fails unless the bridge detected a modern "
        "(here",
        "`dual`: the SDK's server also answers `initialize`) upstream and relayed every front "
        "request",
        "untranslated (its log says `mode: relayed` for each; only its own DNS-rebinding refusal "
        "is not).",
        "Regenerate with `make conformance` (written to `.conformance-results/modern/`).",
    ]


def _reverse_header(cli_version: str) -> list[str]:
    return [
        "# Conformance at 2025-11-25: legacy clients in front of a modern-only server",
        "",
        f"The official conformance CLI {cli_version}, `server --spec-version 2025-11-25` (a "
        "legacy client),",
        "against the legacy fixture server directly, and through the bridge in front of a "
        "modern-only port",
        "of it (`tests/peers/modern_legacy_fixture_server.py`: the `mcp` 2.x SDK's `MCPServer`, "
        "every input",
        "asked with `InputRequiredResult`, a legacy `initialize` refused): the reverse direction "
        "(docs/directions.md).",
        "Strict: a scenario passes with no FAILURE and no WARNING check. Regenerate with",
        "`REVERSE=1 tests/conformance/run_legacy_clients.sh` (written to "
        "`.conformance-results/legacy-clients-reverse/`).",
    ]


HEADERS = {"legacy": _legacy_header, "modern": _modern_header, "reverse": _reverse_header}


def build(
    names: list[str],
    direct: dict[str, Scenario],
    bridged: dict[str, Scenario],
    cli_version: str,
    kind: str = "legacy",
) -> tuple[list[str], list[str]]:
    """(report lines, scenarios that pass directly but not through the bridge)."""
    lost = [
        name
        for name in names
        if (d := direct.get(name)) is not None
        and d.strict_pass
        and not ((b := bridged.get(name)) is not None and b.strict_pass)
    ]
    passed_direct = sum(
        1 for name in names if (d := direct.get(name)) is not None and d.strict_pass
    )
    passed_bridge = sum(
        1 for name in names if (b := bridged.get(name)) is not None and b.strict_pass
    )
    lines = [
        *HEADERS[kind](cli_version),
        "",
        f"Direct: **{passed_direct} of {len(names)}**. Through the bridge: **{passed_bridge} of "
        f"{len(names)}**.",
        "",
        "| scenario | fixture directly | through the bridge |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| {name} | {_cell(direct.get(name))} | {_cell(bridged.get(name))} |" for name in names
    ]
    if lost:
        lines += ["", "Passing directly but not through the bridge: " + ", ".join(lost)]
    return lines, lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("direct", type=Path)
    parser.add_argument("bridge", type=Path)
    parser.add_argument("--scenarios", type=Path, required=True)
    parser.add_argument("--cli-version", default="unknown")
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--kind", choices=sorted(HEADERS), default="legacy")
    args = parser.parse_args(argv)
    names = load_scenario_list(args.scenarios)
    lines, lost = build(
        names, load_results(args.direct), load_results(args.bridge), args.cli_version, args.kind
    )
    args.report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    if not names:
        print("no scenarios listed", file=sys.stderr)
        return 1
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
