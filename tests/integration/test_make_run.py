"""A second `make run` while the first still serves (issue 44, item 11): it stops before anything,
saying which address is taken and how to choose others, without printing the "serving" banner or
emptying the first one's demo log. `make run` itself is run, with the first one's two addresses
held by listening sockets."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import REPO_ROOT, free_port

TIMEOUT_S = 60


@pytest.fixture
def taken() -> Iterator[int]:
    """A port something listens on (the first `make run`'s)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


@pytest.mark.parametrize("which", ["demo", "bridge"])
def test_a_second_make_run_stops_before_anything(taken: int, which: str, tmp_path: Path) -> None:
    log = tmp_path / "demo_server.log"
    log.write_text("the first run's demo server log\n", encoding="utf-8")
    demo, listen = (taken, free_port()) if which == "demo" else (free_port(), taken)
    done = subprocess.run(
        [
            "make", "-s", "run", f"RUN_DIR={tmp_path}", f"DEMO_PORT={demo}",
            f"BRIDGE_LISTEN=127.0.0.1:{listen}",
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stdout == ""  # no step, no banner
    assert done.stderr.startswith(
        f"make run: 127.0.0.1:{taken} is in use (another make run?): stop it, or choose other "
        "ports: make run DEMO_PORT=8932 BRIDGE_LISTEN=127.0.0.1:8081\n"
    )
    assert log.read_text(encoding="utf-8") == "the first run's demo server log\n"
