"""Summarize a conformance CLI output directory into a strict per-scenario Markdown report.

Reads every `<outdir>/server-<scenario>-<timestamp>/checks.json` written by
`@modelcontextprotocol/conformance server -o <outdir>`, prints a Markdown table (scenario,
checks, passed, failed, warnings, other, strict verdict), writes it with the date, CLI
version and totals to `--report`, and exits 1 unless every expected scenario passes
strictly: no FAILURE and no WARNING check (several scenarios only have SHOULD-level
checks, so counting warnings is the only way they say anything).

Scenarios named in `--expected-failures` (one per line: `<scenario> <reason>`, `#`
comments) may fail; one that passes is reported so the list stays honest, and fails the run.

`tasks-*` scenarios belong to the Tasks extension (SEP-2663), not to the 40 core
2026-07-28 server scenarios: the bridge serves legacy `tasks/*` as legacy-only methods
(-32601) and does not implement the extension, and even the python SDK reference server
fails 9 of 10. If the CLI runs them they are listed in a separate table and never fail the run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
LIST_LINE = re.compile(r"^\s*-\s+(?P<scenario>[a-z0-9][a-z0-9-]*)\b")
EXTENSION_PREFIX = "tasks-"
OTHER_STATUSES = ("SKIPPED", "INFO")
MESSAGE_LIMIT = 240


@dataclass(frozen=True)
class Check:
    id: str
    status: str
    message: str
    note: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    checks: tuple[Check, ...]

    def count(self, status: str) -> int:
        return sum(1 for check in self.checks if check.status == status)

    @property
    def strict_pass(self) -> bool:
        return bool(self.checks) and self.count("FAILURE") == 0 and self.count("WARNING") == 0


def load_results(outdir: Path) -> dict[str, Scenario]:
    """Every scenario's checks; the newest directory wins when a scenario ran twice."""
    found: dict[str, Scenario] = {}
    for path in sorted(outdir.glob("server-*/checks.json")):
        match = RESULT_DIR.match(path.parent.name)
        if match is None:
            continue
        raw = json.loads(path.read_text(encoding="utf-8"))
        checks = tuple(
            Check(
                str(c.get("id", "?")),
                str(c.get("status", "?")),
                str(c.get("errorMessage") or ""),
                _note(c),
            )
            for c in raw
        )
        found[match["scenario"]] = Scenario(match["scenario"], checks)
    return found


def _note(check: dict[str, Any]) -> str:
    """The human note a SKIPPED or INFO check leaves in its details, if any."""
    details = check.get("details")
    if not isinstance(details, dict):
        return ""
    return str(details.get("note") or details.get("message") or "")


def load_scenario_list(path: Path) -> list[str]:
    """Scenario names from `conformance list --server` output, in listed order."""
    names: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if (match := LIST_LINE.match(line)) is not None:
            names.append(match["scenario"])
    return names


def load_expected_failures(path: Path) -> dict[str, str]:
    """`<scenario> <reason>` lines; a missing reason is an error."""
    expected: dict[str, str] = {}
    if not path.exists():
        return expected
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        name, _, reason = text.partition(" ")
        if not reason.strip():
            raise SystemExit(f"{path}:{number}: give a reason after the scenario name")
        expected[name] = reason.strip()
    return expected


def verdict(scenario: Scenario | None, expected_reason: str | None) -> tuple[str, bool]:
    """(label, ok) for one core scenario."""
    if scenario is None:
        return ("MISSING (no checks.json)", expected_reason is not None)
    if scenario.strict_pass:
        if expected_reason is not None:
            return ("PASS (listed as expected failure: remove it)", False)
        return ("PASS", True)
    if expected_reason is not None:
        return (f"expected failure: {expected_reason}", True)
    return ("FAIL", False)


def table(rows: list[tuple[str, Scenario | None, str]]) -> list[str]:
    lines = [
        "| scenario | checks | passed | failed | warnings | other | strict verdict |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, scenario, label in rows:
        if scenario is None:
            lines.append(f"| {name} | 0 | 0 | 0 | 0 | 0 | {label} |")
            continue
        total = len(scenario.checks)
        passed, failed, warned = (scenario.count(s) for s in ("SUCCESS", "FAILURE", "WARNING"))
        other = total - passed - failed - warned
        lines.append(f"| {name} | {total} | {passed} | {failed} | {warned} | {other} | {label} |")
    return lines


def check_details(
    scenarios: list[Scenario], statuses: tuple[str, ...], *, quote_messages: bool = True
) -> list[str]:
    """A bullet per scenario, a sub-bullet per check whose status is one of `statuses`;
    `quote_messages=False` leaves out the offending message a schema check quotes (a task's
    sealed id is not for a report)."""
    lines: list[str] = []
    for scenario in scenarios:
        checks = [c for c in scenario.checks if c.status in statuses]
        if not checks:
            continue
        lines.append(f"- **{scenario.name}**")
        for check in checks:
            text = check.message or check.note
            if not quote_messages:
                text = text.split(" — message:")[0]
            message = " ".join(text.split())[:MESSAGE_LIMIT]
            lines.append(f"  - `{check.id}` {check.status}: {message}")
    return lines


@dataclass(frozen=True)
class Options:
    outdir: Path
    scenarios: list[str]
    expected: dict[str, str]
    cli_version: str
    mode: str
    report: Path | None
    upstream: str = "`tests/peers/legacy_fixture_server.py` (mcp 1.30.0)"


def build_report(options: Options, results: dict[str, Scenario]) -> tuple[list[str], bool]:
    """The Markdown lines and whether the run passes."""
    core = [name for name in options.scenarios if not name.startswith(EXTENSION_PREFIX)]
    core += sorted(n for n in results if n not in core and not n.startswith(EXTENSION_PREFIX))
    extension = sorted(n for n in results if n.startswith(EXTENSION_PREFIX))
    rows: list[tuple[str, Scenario | None, str]] = []
    ok = True
    for name in core:
        label, good = verdict(results.get(name), options.expected.get(name))
        rows.append((name, results.get(name), label))
        ok = ok and good
    present = [results[name] for name in core if name in results]
    totals: Counter[str] = Counter(check.status for s in present for check in s.checks)
    strict = sum(1 for s in present if s.strict_pass)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Conformance: MCP 2026-07-28 server scenarios",
        "",
        f"- Date: {now}",
        f"- CLI: `@modelcontextprotocol/conformance@{options.cli_version}` "
        "(`server --suite all --spec-version 2026-07-28`)",
        f"- Target: {options.mode}, upstream {options.upstream}",
        f"- Scenarios passing strictly (no FAILURE, no WARNING): **{strict} of {len(core)}**",
        f"- Checks: {sum(totals.values())} total, {totals['SUCCESS']} passed, {totals['FAILURE']} "
        "failed, "
        f"{totals['WARNING']} warnings",
        f"- Verdict: **{'PASS' if ok else 'FAIL'}**",
        "",
        "Reproduce with `make conformance` (see `tests/conformance/run.sh`).",
        "",
        *table(rows),
    ]
    if extension:
        lines += [
            "",
            "## Extension scenarios (Tasks, SEP-2663; informational, never fail the run)",
            "",
        ]
        lines += table(
            [
                (n, results[n], "PASS" if results[n].strict_pass else "not passing")
                for n in extension
            ]
        )
        failed = check_details(
            [results[n] for n in extension], ("FAILURE", "WARNING"), quote_messages=False
        )
        if failed:
            lines += [
                "",
                'Their failed checks (docs/tasks.md, "Conformance", says why):',
                "",
                *failed,
            ]
    details = check_details(present, ("FAILURE", "WARNING"))
    if details:
        lines += ["", "## Failed and warned checks", "", *details]
    others = check_details(present, OTHER_STATUSES)
    if others:
        lines += [
            "",
            "## Skipped and informational checks (counted as `other`; they do not fail the run)",
            "",
        ]
        lines += others
    return lines, ok


def parse_args(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--scenarios", type=Path, help="output of `conformance list --server`")
    parser.add_argument("--only", help="expect this one scenario instead of the listed ones")
    parser.add_argument(
        "--expected-failures", type=Path, default=Path("tests/conformance/expected-failures.txt")
    )
    parser.add_argument("--cli-version", default="unknown")
    parser.add_argument("--mode", default="bridge")
    parser.add_argument("--report", type=Path, help="write the Markdown report here")
    parser.add_argument(
        "--upstream", default=Options.upstream, help="the upstream server, for the report"
    )
    args = parser.parse_args(argv)
    if args.only:
        scenarios = [args.only]
    elif args.scenarios:
        scenarios = load_scenario_list(args.scenarios)
    else:
        scenarios = []
    return Options(
        args.outdir,
        scenarios,
        load_expected_failures(args.expected_failures),
        args.cli_version,
        args.mode,
        args.report,
        args.upstream,
    )


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    results = load_results(options.outdir)
    if not results and not options.scenarios:
        print(f"no checks.json under {options.outdir}", file=sys.stderr)
        return 1
    lines, ok = build_report(options, results)
    text = "\n".join(lines) + "\n"
    print(text)
    if options.report is not None:
        options.report.parent.mkdir(parents=True, exist_ok=True)
        options.report.write_text(text, encoding="utf-8")
        print(f"report written to {options.report}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
