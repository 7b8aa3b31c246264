"""RootsAffinity (proxy/calls/roots_affinity.py; issue 10): learning whether the upstream keeps
roots, answering
its outside-call asks per session, settling fresh sessions. The pool and leases are small fakes
here; tests/integration/test_roots_isolation.py runs the whole path against real peers."""

from __future__ import annotations

import asyncio
from typing import Any, Literal, cast

import pytest
from virtual_time import on_virtual_time

from config.settings import UpstreamSettings
from proxy.calls.roots_affinity import NO_ROOTS, AskClient, RootsAffinity
from proxy.upstream.base import UpstreamSession
from proxy.upstream.pool import Lease, SessionKey, UpstreamPool
from proxy.upstream.session_limit import SessionLimit
from translators.protocol.capabilities import capability_fingerprint
from translators.protocol.roots import PROBE, ROOTS_INPUT_KEY, roots_digest
from translators.wire.errors import InvalidParams, UpstreamUnavailable
from translators.wire.jsonrpc import JsonObject

ROOTS: JsonObject = {"roots": [{"uri": "file:///a"}]}
ROOTS_CAPS: JsonObject = {"roots": {"listChanged": True}}
BOUND_S = 10.0  # generous ceiling on any wait below
PROBE_WINDOW_S = UpstreamSettings(url="http://upstream.invalid/mcp").roots_probe_ms / 1000


class FakeSession:
    pass


class FakePool:
    def __init__(self, session_limit: Literal["auto", "one"] = "auto") -> None:
        self.keys: dict[int, SessionKey] = {}
        self.retired: list[object] = []
        self.limit = SessionLimit(session_limit, 1.0)

    def key_of(self, session: object) -> SessionKey | None:
        return self.keys.get(id(session))

    def retire(self, session: object) -> None:
        self.retired.append(session)


class FakeLease:
    def __init__(self, key: SessionKey, session: object) -> None:
        self.key = key
        self.session = session
        self.released: list[bool] = []

    async def release(self, *, discard: bool = False) -> None:
        self.released.append(discard)


def affinity(pool: FakePool, **settings: Any) -> RootsAffinity:
    options = {"url": "http://upstream.invalid/mcp", **settings}
    return RootsAffinity(UpstreamSettings(**options), cast(UpstreamPool, pool))


class Prober:
    """A probe leaser that opens a FakeSession under the probe key; optionally the server asks."""

    def __init__(self, pool: FakePool, affinity_: list[RootsAffinity], *, asks: bool) -> None:
        self.pool, self.affinity, self.asks = pool, affinity_, asks
        self.leases: list[FakeLease] = []

    async def __call__(self, legacy: JsonObject, fingerprint: str) -> Lease:
        assert legacy == {"roots": {}}
        session = FakeSession()
        key = SessionKey("alice", fingerprint, PROBE)
        self.pool.keys[id(session)] = key
        lease = FakeLease(key, session)
        self.leases.append(lease)
        if self.asks:
            loop = asyncio.get_running_loop()
            loop.call_soon(lambda: self._answered(session))
        return cast(Lease, lease)

    def _answered(self, session: FakeSession) -> None:
        answer = self.affinity[0].answer_outside_call(cast(UpstreamSession, session))
        assert answer is not None and answer.result == {"roots": []}


async def test_the_probe_learns_an_upstream_that_asks_and_runs_once() -> None:
    pool = FakePool()
    roots = affinity(pool, roots_probe_ms=BOUND_S * 1000)
    prober = Prober(pool, [roots], asks=True)
    async with asyncio.timeout(BOUND_S):
        results = await asyncio.gather(
            *(roots.roots_for_call(ROOTS_CAPS, {}, prober) for _ in range(5))
        )
    assert all(isinstance(r, AskClient) for r in results)
    assert roots.keeps_roots is True
    assert len(prober.leases) == 1
    assert prober.leases[0].released == [True]  # the probe session never serves a call


@on_virtual_time
async def test_the_probe_of_an_ordinary_upstream_ends_after_its_window() -> None:
    """A server that never asks: the call waits out the probe window (the default, exactly, on the
    loop's virtual clock), then no call needs roots-affine sessions."""
    pool = FakePool()
    roots = affinity(pool)
    prober = Prober(pool, [roots], asks=False)
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with asyncio.timeout(BOUND_S):
        assert await roots.roots_for_call(ROOTS_CAPS, {ROOTS_INPUT_KEY: ROOTS}, prober) is None
        assert loop.time() - began == pytest.approx(PROBE_WINDOW_S)
        assert await roots.roots_for_call(ROOTS_CAPS, {}, prober) is None
    assert roots.keeps_roots is False
    assert len(prober.leases) == 1


async def test_no_probe_without_roots_or_in_always_mode() -> None:
    pool = FakePool()
    auto = affinity(pool)
    prober = Prober(pool, [auto], asks=True)
    assert await auto.roots_for_call({"elicitation": {}}, {ROOTS_INPUT_KEY: ROOTS}, prober) is None
    assert auto.keeps_roots is None
    always = affinity(pool, roots_affinity="always")
    assert always.keeps_roots is True
    assert await always.roots_for_call(ROOTS_CAPS, {ROOTS_INPUT_KEY: ROOTS}, prober) == ROOTS
    assert prober.leases == []


async def test_an_upstream_of_one_session_is_never_probed_and_learns_nothing_from_asks() -> None:
    """One session serves every caller in turn: no probe (it would need a session of its own), no
    roots-affine sessions, and an ask outside a call neither teaches nor retires (the default
    policy answers it)."""
    pool = FakePool("one")
    roots = affinity(pool)
    prober = Prober(pool, [roots], asks=True)
    assert await roots.roots_for_call(ROOTS_CAPS, {ROOTS_INPUT_KEY: ROOTS}, prober) is None
    session = FakeSession()
    pool.keys[id(session)] = SessionKey("alice", "f")
    assert roots.answer_outside_call(cast(UpstreamSession, session)) is None
    assert prober.leases == [] and pool.retired == [] and roots.keeps_roots is None


async def test_a_failed_probe_is_tried_again_by_the_next_call() -> None:
    pool = FakePool()
    roots = affinity(pool, roots_probe_ms=20)
    calls = 0

    async def failing(legacy: JsonObject, fingerprint: str) -> Lease:
        nonlocal calls
        calls += 1
        raise UpstreamUnavailable("down")

    for _ in range(2):
        with pytest.raises(UpstreamUnavailable):
            await roots.roots_for_call(ROOTS_CAPS, {}, failing)
    assert calls == 2
    assert roots.keeps_roots is None


async def test_a_malformed_pre_answer_is_invalid_params() -> None:
    roots = affinity(FakePool(), roots_affinity="always")
    with pytest.raises(InvalidParams):
        await roots.roots_for_call(
            ROOTS_CAPS,
            {ROOTS_INPUT_KEY: {"roots": [{"uri": ""}]}},
            Prober(FakePool(), [roots], asks=False),
        )


def test_outside_call_asks_get_the_sessions_own_roots() -> None:
    pool = FakePool()
    roots = affinity(pool, roots_affinity="always")
    session = FakeSession()
    pool.keys[id(session)] = SessionKey("alice", "f", roots_digest(ROOTS), ROOTS)
    answer = roots.answer_outside_call(cast(UpstreamSession, session))
    assert answer is not None and answer.result == ROOTS and answer.error is None
    # not in the pool
    assert roots.answer_outside_call(cast(UpstreamSession, FakeSession())) is None
    assert pool.retired == []


def test_an_outside_call_ask_on_a_session_without_roots_teaches_and_retires_it() -> None:
    pool = FakePool()
    roots = affinity(pool)
    session = FakeSession()
    pool.keys[id(session)] = SessionKey("alice", "f")
    # the default policy answers
    assert roots.answer_outside_call(cast(UpstreamSession, session)) is None
    assert roots.keeps_roots is True
    assert pool.retired == [session]


async def test_a_fresh_affine_session_settles_once_after_its_ask() -> None:
    pool = FakePool()
    roots = affinity(
        pool, roots_affinity="always", roots_probe_ms=BOUND_S * 1000, roots_settle_ms=1
    )
    session = FakeSession()
    key = SessionKey("alice", "f", roots_digest(ROOTS), ROOTS)
    pool.keys[id(session)] = key
    lease = cast(Lease, FakeLease(key, session))
    settling = asyncio.ensure_future(roots.settle(lease))
    await asyncio.sleep(0)
    assert not settling.done()  # waits for the server's ask
    assert roots.answer_outside_call(cast(UpstreamSession, session)) is not None
    async with asyncio.timeout(BOUND_S):
        await settling
        await roots.settle(lease)  # settled: no wait


async def test_a_session_whose_server_never_asks_settles_after_the_window() -> None:
    roots = affinity(FakePool(), roots_affinity="always", roots_probe_ms=20)
    key = SessionKey("alice", "f", roots_digest(ROOTS), ROOTS)
    async with asyncio.timeout(BOUND_S):
        await roots.settle(cast(Lease, FakeLease(key, FakeSession())))
        # not affine
        await roots.settle(cast(Lease, FakeLease(SessionKey("alice", "f"), FakeSession())))


def session_key(
    roots: RootsAffinity,
    principal: str,
    legacy: JsonObject,
    given: JsonObject | None,
    fresh: int | None = None,
) -> tuple[SessionKey, JsonObject]:
    """The pool key a request gets, built as `RouteContext.session_key` builds it."""
    fingerprint = capability_fingerprint(legacy)
    affinity, answer = roots.affinity(principal, fingerprint, legacy, given, fresh)
    return SessionKey(principal, fingerprint, affinity, answer), legacy


def test_session_keys() -> None:
    roots = affinity(FakePool())
    legacy = {"roots": {}, "sampling": {}}
    plain, caps = session_key(roots, "alice", legacy, None)
    assert (plain.roots, caps) == ("", legacy)  # not known to keep roots: unchanged
    roots.keeps_roots = True
    # a request that cannot ask, before any call gave roots: roots declared, holding none
    unknown, caps = session_key(roots, "alice", legacy, None)
    assert caps == legacy and unknown.fingerprint == plain.fingerprint
    assert unknown.roots == roots_digest(NO_ROOTS) and unknown.roots_answer == NO_ROOTS
    affine, caps = session_key(roots, "alice", legacy, ROOTS)
    assert caps == legacy and affine.roots == roots_digest(ROOTS) and affine.roots_answer == ROOTS
    assert affine.fingerprint == plain.fingerprint
    # after a call gave roots: the same session key as that call's (known roots), per principal
    assert session_key(roots, "alice", legacy, None)[0] == affine
    assert session_key(roots, "bob", legacy, None)[0] == SessionKey(
        "bob", unknown.fingerprint, unknown.roots
    )
    # a client that declares no roots: no roots, no affinity
    none, caps = session_key(roots, "alice", {"sampling": {}}, None)
    assert caps == {"sampling": {}} and none.roots == "" and none.roots_answer is None
    fresh1, _ = session_key(roots, "alice", legacy, ROOTS, 1)
    fresh2, _ = session_key(roots, "alice", legacy, ROOTS, 2)
    assert len({affine, fresh1, fresh2}) == 3
    # answer not in identity
    assert SessionKey("alice", "f", "d", {"roots": []}) == SessionKey("alice", "f", "d", None)


def test_known_roots_are_per_principal_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last roots each principal's calls gave, for lists and listens; the oldest forgotten."""
    monkeypatch.setattr("proxy.calls.roots_affinity.MAX_KNOWN", 2)
    roots = affinity(FakePool(), roots_affinity="always")
    legacy: JsonObject = {"roots": {}}
    other: JsonObject = {"roots": [{"uri": "file:///other"}]}
    for principal in ("alice", "bob"):
        session_key(roots, principal, legacy, ROOTS)
    session_key(roots, "alice", legacy, other)  # alice's latest, and now the most recent entry
    assert session_key(roots, "alice", legacy, None)[0].roots_answer == other
    session_key(roots, "carol", legacy, ROOTS)  # bob's is the oldest: forgotten
    assert session_key(roots, "bob", legacy, None)[0].roots_answer == NO_ROOTS
    assert session_key(roots, "carol", legacy, None)[0].roots_answer == ROOTS
    # a fresh (session_per_call) key is never remembered
    session_key(roots, "dave", legacy, other, 7)
    assert session_key(roots, "dave", legacy, None)[0].roots_answer == NO_ROOTS
