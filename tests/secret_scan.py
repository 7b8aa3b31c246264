"""What must never appear in a log line, whatever the test: sealed `requestState`s and bearer
tokens.

`tests/conftest.py` applies it to the captured output (stdout, stderr, logging) of every test in the
suite, and `tests/integration/harness.py` to the log file of every bridge process a test started.
Test-specific secrets (elicited answers, keys, session ids) are checked where they are known:
`tests/proxy/observe/test_secrets_in_logs.py`."""

from __future__ import annotations

import re
from typing import Final

PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    "a requestState": re.compile(r"v1\.[A-Za-z0-9_-]{100,}"),
    "a bearer token": re.compile(r"Bearer\s+(?!\[redacted\])[A-Za-z0-9._~+/=-]{6,}"),
}


def secrets_in(text: str) -> list[str]:
    """A description of each secret found in `text` (empty when clean); never the secret itself."""
    return [
        f"{what} at offset {match.start()}"
        for what, pattern in PATTERNS.items()
        for match in pattern.finditer(text)
    ]
