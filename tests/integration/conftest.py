"""Fixtures for integration tests: real legacy peers and the bridge as subprocesses.

Every test here gets the `integration` marker, and a skip is reported as a failure: `make test`
provides every peer, so a skipped integration test only hides a broken set-up. When a test
fails, the log tail of every peer it used is attached to its report ("peer log" sections),
whatever the fixture scope.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterable, Iterator
from pathlib import Path

import aiohttp
import pytest

from .harness import Bridged, ModernPoster, PeerProcess, Peers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = (
            f"integration tests must not skip (make test provides every peer): {report.longrepr}"
        )
    if report.failed:
        for process in _processes_of(getattr(item, "funcargs", {}).values()):
            title = (
                f"peer log: {process.name} (port {process.port}, exit status "
                f"{process.popen.poll()})"
            )
            report.sections.append((title, process.log_text()))
    return report


def _processes_of(values: Iterable[object]) -> list[PeerProcess]:
    """Every peer process reachable from a test's fixture values, once each, in start order."""
    found: dict[int, PeerProcess] = {}
    for value in values:
        if isinstance(value, Peers):
            candidates = value.processes
        elif isinstance(value, Bridged):
            candidates = [value.legacy, value.bridge]
        elif isinstance(value, PeerProcess):
            candidates = [value]
        elif isinstance(getattr(value, "peers", None), Peers):
            candidates = value.peers.processes  # type: ignore[attr-defined]  (e.g. a RevisionStack)
        else:
            candidates = []
        for process in candidates:
            found.setdefault(id(process), process)
    return sorted(found.values(), key=lambda p: p.log_path.name)


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[Peers]:
    """Start any peers; all are stopped when the test ends."""
    started = Peers(log_dir=tmp_path)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="module")
def module_peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    """Like `peers`, shared by the tests of one module (start once, stop at module end)."""
    started = Peers(log_dir=tmp_path_factory.mktemp("peers"))
    try:
        yield started
    finally:
        started.close()


@pytest.fixture
def legacy_server(peers: Peers) -> PeerProcess:
    """The legacy conformance fixture server (mcp 1.x) over HTTP, for one test."""
    return peers.legacy()


@pytest.fixture
def bridged(peers: Peers) -> Bridged:
    """The legacy fixture server with the bridge in front of it, for one test."""
    return peers.bridged()


@pytest.fixture(scope="module")
def module_bridged(module_peers: Peers) -> Bridged:
    """The legacy fixture server behind the bridge, shared by one module's tests."""
    return module_peers.bridged()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """An aiohttp client session for raw requests."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def poster(http: aiohttp.ClientSession, bridged: Bridged) -> ModernPoster:
    """Raw modern requests to the bridge (three headers and `_meta` filled in)."""
    return ModernPoster(http, bridged.url)
