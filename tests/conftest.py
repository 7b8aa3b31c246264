"""Shared pytest configuration: make `tests/` importable (`import schema_check`)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
# tests/proxy/ (and tests/unit/config/) mirror the packages' folders but are not packages: with
# only tests/ on sys.path, `import proxy` would find tests/proxy/ as a namespace package before the
# editable install's finder runs. The checkout first, so the real packages win.
REPO_ROOT = TESTS_DIR.parent
if sys.path[:1] != [str(REPO_ROOT)]:
    sys.path.insert(0, str(REPO_ROOT))


import pytest  # noqa: E402
from secret_scan import secrets_in  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """The whole suite runs under log capture: a passing phase whose captured output holds a
    requestState or a bearer token fails."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.passed:
        found = [f"{title}: {hit}" for title, text in report.sections for hit in secrets_in(text)]
        if found:
            report.outcome = "failed"
            report.longrepr = "secret material in captured output:\n" + "\n".join(found)
    return None
