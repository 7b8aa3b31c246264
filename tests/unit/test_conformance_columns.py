"""The direct-vs-bridge conformance report (tests/conformance/legacy_columns.py): both kinds of
header, and the rule that fails the run when a scenario passes directly but not through the bridge.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "conformance"


@pytest.fixture(scope="module")
def columns() -> ModuleType:
    sys.path.insert(0, str(HARNESS))
    try:
        return importlib.import_module("legacy_columns")
    finally:
        sys.path.remove(str(HARNESS))


def _scenario(columns: ModuleType, name: str, status: str) -> object:
    summarize = sys.modules["summarize"]
    return summarize.Scenario(
        name, (summarize.Check("c1", "SUCCESS", ""), summarize.Check("c2", status, ""))
    )


def test_modern_report_names_the_lost_scenario(columns: ModuleType) -> None:
    names = ["tools-list", "caching", "dns-rebinding-protection"]
    direct = {name: _scenario(columns, name, "SUCCESS") for name in names}
    bridged = {
        "tools-list": _scenario(columns, "tools-list", "SUCCESS"),
        "caching": _scenario(columns, "caching", "WARNING"),
    }
    lines, lost = columns.build(names, direct, bridged, "9.9", "modern")
    assert lost == ["caching", "dns-rebinding-protection"]
    assert lines[0] == "# Conformance at 2026-07-28: a modern upstream through the bridge"
    assert "Direct: **3 of 3**. Through the bridge: **1 of 3**." in lines
    assert "| caching | PASS | FAIL (0 failed, 1 warnings) |" in lines
    assert "| dns-rebinding-protection | PASS | MISSING |" in lines
    assert (
        lines[-1]
        == "Passing directly but not through the bridge: caching, dns-rebinding-protection"
    )


def test_failing_directly_is_not_held_against_the_bridge(columns: ModuleType) -> None:
    direct = {"tools-list": _scenario(columns, "tools-list", "FAILURE")}
    lines, lost = columns.build(["tools-list"], direct, {}, "9.9")
    assert lost == []
    assert lines[0] == "# Conformance at 2025-11-25: legacy clients through the bridge"
    assert "| tools-list | FAIL (1 failed, 0 warnings) | MISSING |" in lines
