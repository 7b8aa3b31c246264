"""The one per-principal policy (proxy/common/per_principal.py), table-driven: which entry gives
way to a new one, for the tables whose entries clients see (the relayed legacy sessions, the
reverse sessions) and for the pool's own sessions, and what is refused, with which error; then the
table built on it, on a scripted clock, and the count of things never evicted (calls waiting for
input)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fake_clock import FakeClock

from proxy.common.per_principal import (
    BRIDGE_CACHE,
    Caps,
    Eviction,
    PrincipalCounts,
    PrincipalTable,
    fits,
    held_call_caps,
    victims,
)
from translators.wire.errors import CapacityExceeded, ClientLimitExceeded, LimitExceeded

IDLE_S = 300.0
NOW = 10_000.0
CLIENT = Eviction.client_visible(IDLE_S)


@dataclass(eq=False)
class Entry:
    name: str
    principal: str
    in_use: bool
    last_used: float


def caps(per_principal: int, total: int) -> Caps:
    return Caps(per_principal, total, "t.per_principal", "t.total", "things")


def entries(*rows: str) -> list[Entry]:
    """`"a1 alice idle 100"`: name, principal, idle or busy, seconds since last used."""
    made = []
    for row in rows:
        name, principal, state, ago = row.split()
        made.append(Entry(name, principal, state == "busy", NOW - float(ago)))
    return made


# (what happens, the entries, opener, per principal, total, eviction, opening, victims or refusal)
CASES = [
    ("room: nothing goes", ["a1 alice idle 5"], "alice", 2, 4, CLIENT, {}, []),
    (
        "own cap: the opener's least recently used idle one, not its older busy one",
        ["a1 alice busy 90", "a2 alice idle 50", "a3 alice idle 10"],
        "alice",
        3,
        10,
        CLIENT,
        {},
        ["a2"],
    ),
    (
        "own cap, all its own busy: a client's own oldest goes",
        ["a1 alice busy 50", "a2 alice busy 90"],
        "alice",
        2,
        10,
        CLIENT,
        {},
        ["a2"],
    ),
    (
        "own cap, all its own busy: a pool session in use never goes",
        ["a1 alice busy 50", "a2 alice busy 90"],
        "alice",
        2,
        10,
        BRIDGE_CACHE,
        {},
        "t.per_principal",
    ),
    (
        "full: another's session idle past the timeout takes the place, before the opener's own",
        ["c1 carol idle 301", "a1 alice idle 100", "b1 bob idle 400"],
        "alice",
        5,
        3,
        CLIENT,
        {},
        ["b1"],
    ),
    (
        "full: another's idle one not past the timeout stays; the opener's own goes",
        ["b1 bob idle 200", "a1 alice busy 5"],
        "alice",
        5,
        2,
        CLIENT,
        {},
        ["a1"],
    ),
    (
        "full: another's pool session idle for any time goes (the bridge re-opens it unseen)",
        ["b1 bob idle 1", "b2 bob idle 2", "a1 alice busy 500"],
        "alice",
        5,
        3,
        BRIDGE_CACHE,
        {},
        ["b2"],
    ),
    (
        "full: another's session in use is never taken, however old (issue 40, defect 1)",
        ["v1 victim busy 5000", "v2 victim idle 200", "o1 other idle 1"],
        "newcomer",
        8,
        3,
        CLIENT,
        {},
        "t.total",
    ),
    (
        "full, the pool: nothing idle, refused",
        ["b1 bob busy 900", "c1 carol busy 900"],
        "alice",
        5,
        2,
        BRIDGE_CACHE,
        {},
        "t.total",
    ),
    (
        "both caps: its own oldest for its cap, then one more for the total",
        ["a1 alice idle 30", "a2 alice idle 20", "b1 bob busy 10"],
        "alice",
        2,
        2,
        CLIENT,
        {},
        ["a1", "a2"],
    ),
    (
        "sessions being opened count: the pool evicts its own idle one for them",
        ["a1 alice idle 30", "a2 alice idle 20"],
        "alice",
        3,
        10,
        BRIDGE_CACHE,
        {"alice": 2},
        ["a1", "a2"],
    ),
    (
        "sessions being opened count: nothing of its own idle, refused",
        ["a1 alice busy 30"],
        "alice",
        2,
        10,
        BRIDGE_CACHE,
        {"alice": 1},
        "t.per_principal",
    ),
    (
        "sessions being opened count towards the total",
        ["b1 bob idle 20"],
        "alice",
        5,
        2,
        BRIDGE_CACHE,
        {"carol": 1},
        ["b1"],
    ),
]


@pytest.mark.parametrize(
    ("rows", "opener", "per_principal", "total", "eviction", "opening", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_who_gives_way(
    rows: list[str],
    opener: str,
    per_principal: int,
    total: int,
    eviction: Eviction,
    opening: dict[str, int],
    expected: list[str] | str,
) -> None:
    slots = entries(*rows)
    if isinstance(expected, str):
        with pytest.raises(LimitExceeded) as refused:
            victims(slots, opener, caps(per_principal, total), eviction, NOW, opening)
        assert refused.value.limit == expected
        kind = ClientLimitExceeded if expected == "t.per_principal" else CapacityExceeded
        assert type(refused.value) is kind
        return
    chosen = victims(slots, opener, caps(per_principal, total), eviction, NOW, opening)
    assert [slot.name for slot in chosen] == expected


@pytest.mark.parametrize(
    ("rows", "opener", "opening", "expected"),
    [
        (["a1 alice idle 1"], "alice", {}, True),
        (["a1 alice idle 1", "a2 alice idle 1"], "alice", {}, False),  # its own cap
        (["a1 alice idle 1"], "alice", {"alice": 1}, False),  # one being opened counts
        (["b1 bob idle 1", "c1 carol idle 1"], "alice", {"dave": 1}, False),  # the total
        (["b1 bob idle 1"], "alice", {"dave": 1}, True),
    ],
)
def test_fits_without_evicting(
    rows: list[str], opener: str, opening: dict[str, int], expected: bool
) -> None:
    assert fits(entries(*rows), opener, caps(2, 3), opening) is expected


def test_refusals_name_their_setting() -> None:
    pool = Caps(
        2,
        3,
        "upstream.max_sessions_per_principal",
        "upstream.max_sessions",
        "upstream sessions in use",
        "finish or cancel some calls and retry",
    )
    assert pool.principal_refusal().to_error() == {
        "code": -32603,
        "message": "This caller already has 2 upstream sessions in use "
        "(upstream.max_sessions_per_principal); finish or cancel some calls and retry",
        "data": {"source": "mrtr-bridge", "limit": "upstream.max_sessions_per_principal"},
    }
    assert pool.total_refusal().message == (
        "The bridge already has 3 upstream sessions in use (upstream.max_sessions); retry later"
    )


def table(per_principal: int, total: int) -> tuple[PrincipalTable[str], FakeClock]:
    clock = FakeClock()
    return PrincipalTable[str](caps(per_principal, total), IDLE_S, clock), clock


def test_a_principal_at_its_cap_loses_its_own_least_recently_used_entry() -> None:
    sessions, clock = table(per_principal=2, total=100)
    assert sessions.add("b1", "bob", "bob's") == []
    for n in range(1, 4):
        clock.now += 1
        sessions.add(f"m{n}", "mallory", f"mallory-{n}")
    clock.now += 1
    sessions.begin("m2")  # used again, and so the most recent
    sessions.end("m2")
    assert sessions.add("m4", "mallory", "mallory-4") == [("m3", "mallory-3")]
    owned = [sessions.owned_by(sid, "mallory") for sid in ("m1", "m2", "m3", "m4")]
    assert owned == [False, True, False, True]
    assert sessions.owned_by("b1", "bob") and (sessions.count("mallory"), len(sessions)) == (2, 3)


def test_an_entry_in_use_goes_last_and_another_principals_never() -> None:
    sessions, clock = table(per_principal=2, total=3)
    sessions.add("v1", "victim", "v1")
    sessions.begin("v1")  # its stream stays open
    clock.now += 1
    sessions.add("m1", "mallory", "m1")
    clock.now += 1
    sessions.add("m2", "mallory", "m2")
    sessions.begin("m1")
    sessions.begin("m2")
    sessions.end("m2")  # m1 busy, m2 idle but more recent
    assert sessions.add("m3", "mallory", "m3") == [("m2", "m2")]
    sessions.begin("m3")
    assert sessions.add("m4", "mallory", "m4") == [("m1", "m1")]  # all hers busy: her oldest
    sessions.begin("m4")
    clock.now += 10 * IDLE_S  # the victim's session, in use, is never taken
    with pytest.raises(CapacityExceeded):
        sessions.add("c1", "carol", "c1")
    assert sessions.owned("v1", "victim") == "v1" and sessions.owned("v1", "mallory") is None


def test_when_full_an_entry_idle_past_the_timeout_goes_then_the_openers_own() -> None:
    sessions, clock = table(per_principal=3, total=3)
    sessions.add("a1", "alice", "a1")
    clock.now += 10
    sessions.add("b1", "bob", "b1")
    sessions.add("m1", "mallory", "m1")
    clock.now += 1
    assert sessions.add("m2", "mallory", "m2") == [("m1", "m1")]  # nobody idle long enough
    with pytest.raises(CapacityExceeded):  # carol holds none
        sessions.add("c1", "carol", "c1")
    assert "c1" not in sessions and len(sessions) == 3
    clock.now += IDLE_S
    sessions.begin("b1")  # bob is using his; alice's is idle past the timeout
    assert sessions.expired() == ["a1", "m2"]
    assert sessions.add("c1", "carol", "c1") == [("a1", "a1")]
    assert [sessions.owned_by(*pair) for pair in (("b1", "bob"), ("m2", "mallory"))] == [True, True]


def test_replacing_and_popping_keep_the_counts_right() -> None:
    sessions, _ = table(per_principal=2, total=4)
    sessions.add("s1", "alice", "first")
    sessions.add("s1", "alice", "again")  # the upstream reissued the same id
    assert sessions.owned("s1", "alice") == "again"
    assert sessions.pop("s1") == "again" and sessions.pop("s1") is None
    sessions.end("s1")  # a request that outlived its entry
    assert (len(sessions), sessions.count("alice")) == (0, 0)
    assert sessions.add("s2", "alice", "s2") == []


def test_counts_refuse_past_each_cap_with_the_held_call_errors() -> None:
    counts = PrincipalCounts(held_call_caps(2, 3))
    for key in ("a1", "a2", "a1"):  # admitting the same key twice counts it once
        counts.admit(key, "alice")
    with pytest.raises(ClientLimitExceeded) as mine:
        counts.admit("a3", "alice")
    counts.admit("b1", "bob")
    with pytest.raises(CapacityExceeded) as full:
        counts.admit("c1", "carol")
    assert mine.value.to_error() == {
        "code": -32603,
        "message": "This caller already has 2 calls waiting for input (held.max_per_principal); "
        "finish or abandon one first",
        "data": {"source": "mrtr-bridge", "limit": "held.max_per_principal"},
    }
    assert full.value.message == (
        "The bridge already has 3 calls waiting for input (held.max_total); retry later"
    )
    counts.release("a1")
    counts.release("never-admitted")
    counts.admit("c1", "carol")
    assert (len(counts), counts.count("alice"), "a1" in counts, "c1" in counts) == (
        3,
        1,
        False,
        True,
    )
