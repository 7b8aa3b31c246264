"""Shared pytest configuration: make `tests/` importable (`import schema_check`), behind the
repository itself."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
# The repository goes first: tests/proxy/ mirrors proxy/ (tests/proxy/upstream/, ...), and with
# only tests/ on the path `import proxy.upstream.base` would find that folder, not the package.
ROOT_DIR = str(TESTS_DIR.parent)
if ROOT_DIR in sys.path:
    sys.path.remove(ROOT_DIR)
sys.path.insert(0, ROOT_DIR)


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
