"""The relayed legacy sessions' caps (proxy/passthrough/legacy_sessions.py, issue 24 defect 3), on
a scripted clock: who is evicted, in which order, and what is refused."""

from __future__ import annotations

from proxy.passthrough.legacy_sessions import LegacySessions
from proxy.upstream.http.cookies import SessionCookies

IDLE_S = 300.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sessions(per_principal: int, total: int) -> tuple[LegacySessions, Clock]:
    clock = Clock()
    return LegacySessions(per_principal, total, IDLE_S, clock), clock


def headers(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}"}


def test_a_principal_at_its_cap_loses_its_own_least_recently_used_session() -> None:
    table, clock = sessions(per_principal=2, total=100)
    assert table.bind("b1", "bob", headers("bob")) == ([], True)
    for n in range(1, 4):
        clock.now += 1
        table.bind(f"m{n}", "mallory", headers(f"mallory-{n}"))
    clock.now += 1
    table.begin("m2", headers("mallory-2b"))  # in use, and so the most recent
    table.end("m2")
    evicted, admitted = table.bind("m4", "mallory", headers("mallory-4"))
    assert admitted and evicted == [("m3", headers("mallory-3"))]
    assert [table.owned_by(sid, "mallory") for sid in ("m1", "m2", "m3", "m4")] == [
        False,
        True,
        False,
        True,
    ]
    assert table.owned_by("b1", "bob") and (table.count("mallory"), len(table)) == (2, 3)


def test_a_session_with_a_request_in_flight_goes_last() -> None:
    table, clock = sessions(per_principal=2, total=100)
    table.bind("m1", "mallory", headers("m1"))
    clock.now += 1
    table.bind("m2", "mallory", headers("m2"))
    table.begin("m1", headers("m1"))
    table.begin("m2", headers("m2"))
    table.end("m2")  # m1's GET stream stays open; m2 is idle but more recent
    assert table.bind("m3", "mallory", headers("m3")) == ([("m2", headers("m2"))], True)
    table.begin("m3", headers("m3"))
    # every session of hers is in flight: the least recently used goes
    assert table.bind("m4", "mallory", headers("m4")) == ([("m1", headers("m1"))], True)


def test_when_full_an_idle_session_of_anyone_goes_first_then_the_openers_own() -> None:
    table, clock = sessions(per_principal=3, total=3)
    table.bind("a1", "alice", headers("alice"))
    clock.now += 10
    table.bind("b1", "bob", headers("bob"))
    table.bind("m1", "mallory", headers("mallory"))
    clock.now += 1
    # nobody idle for IDLE_S: mallory gives up her own, alice and bob keep theirs
    assert table.bind("m2", "mallory", headers("mallory")) == ([("m1", headers("mallory"))], True)
    # carol holds none: refused, nothing evicted
    assert table.bind("c1", "carol", headers("carol")) == ([], False)
    assert not table.owned_by("c1", "carol") and len(table) == 3
    clock.now += IDLE_S
    table.begin("b1", headers("bob"))  # bob is using his; alice's is idle past the horizon
    assert table.bind("c1", "carol", headers("carol")) == ([("a1", headers("alice"))], True)
    assert [table.owned_by(*pair) for pair in (("b1", "bob"), ("m2", "mallory"))] == [True, True]


def test_forget_and_rebinding_keep_the_counts_right() -> None:
    table, _ = sessions(per_principal=2, total=4)
    table.bind("s1", "alice", headers("alice"))
    table.bind("s1", "alice", headers("alice"))  # the upstream reissued the same id
    table.forget("s1")
    table.forget("s1")
    table.end("s1")  # a request that outlived its session
    assert (len(table), table.count("alice")) == (0, 0)
    assert table.bind("s2", "alice", headers("alice")) == ([], True)


def test_a_session_keeps_the_cookies_its_initialize_answer_set_until_forgotten() -> None:
    """A relayed session's cookie jar is its own, from its `initialize` answer on; an unknown or
    forgotten session has none (decisions.md § 33)."""
    table, _ = sessions(per_principal=2, total=4)
    jar = SessionCookies()
    table.bind("s1", "alice", headers("alice"), jar)
    table.bind("s2", "bob", headers("bob"))
    assert table.cookies_of("s1") is jar
    other = table.cookies_of("s2")
    assert other is not None and other is not jar
    table.forget("s1")
    assert (table.cookies_of("s1"), table.cookies_of("nope")) == (None, None)
