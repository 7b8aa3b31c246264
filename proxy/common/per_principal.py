"""Per-principal caps, in one place: how many of something each principal may hold and all of them
together, what a refusal says, and which entry gives way when a new one would not fit
(docs/security.md, "Per-principal tables").

- `Caps`: a per-principal and a total cap, and their refusals: `ClientLimitExceeded` past the
  caller's own cap (its fault), `CapacityExceeded` past the total (the bridge is full), each naming
  its setting in `data.limit`.
- `PrincipalCounts`: things that are never evicted, only counted and refused past the caps (calls
  waiting for a client's input, in both directions).
- `victims()`: the one eviction rule of every per-principal table (the relayed legacy sessions,
  the reverse sessions, the upstream pool). A principal at its own cap gives up its own least
  recently used entry, one with nothing in flight first. At the total cap, the new entry may take
  the place of another principal's entry only when that principal cannot notice: one with nothing
  in flight for `Eviction.foreign_idle_s`; else the opener's own goes; else the refusal. Another
  principal's entry in use is never taken.
- `PrincipalTable`: entries by id under `victims()`, for the tables whose entries a client sees
  (the relayed legacy sessions and the reverse sessions).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

from proxy.common.clock import Clock
from translators.wire.errors import CapacityExceeded, ClientLimitExceeded

NOTHING_OPENING: Final[Mapping[str, int]] = {}


@dataclass(frozen=True)
class Caps:
    """`per_principal` and `total`, named by their settings in every refusal."""

    per_principal: int
    total: int
    per_principal_setting: str
    total_setting: str
    what: str  # what is counted, as the messages say it: "upstream sessions in use"
    hint: str = "finish some and retry"  # what a caller at its own cap can do

    def principal_refusal(self) -> ClientLimitExceeded:
        return ClientLimitExceeded(
            f"This caller already has {self.per_principal} {self.what} "
            f"({self.per_principal_setting}); {self.hint}",
            self.per_principal_setting,
        )

    def total_refusal(self) -> CapacityExceeded:
        return CapacityExceeded(
            f"The bridge already has {self.total} {self.what} ({self.total_setting}); retry later",
            self.total_setting,
        )


def held_call_caps(per_principal: int, total: int) -> Caps:
    """The caps on calls waiting for their client's input, in either direction (`held.*`)."""
    return Caps(
        per_principal,
        total,
        "held.max_per_principal",
        "held.max_total",
        "calls waiting for input",
        "finish or abandon one first",
    )


class PrincipalCounts:
    """What each principal holds now (keyed by anything hashable), refused past `caps`."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self._owners: dict[Hashable, str] = {}
        self._per_principal: dict[str, int] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._owners

    def __len__(self) -> int:
        return len(self._owners)

    def count(self, principal: str) -> int:
        return self._per_principal.get(principal, 0)

    def admit(self, key: Hashable, principal: str) -> None:
        """Count `key` for `principal` (once, however often admitted), or raise the refusal."""
        if key in self._owners:
            return
        if self.count(principal) >= self.caps.per_principal:
            raise self.caps.principal_refusal()
        if len(self._owners) >= self.caps.total:
            raise self.caps.total_refusal()
        self._owners[key] = principal
        self._per_principal[principal] = self.count(principal) + 1

    def release(self, key: Hashable) -> None:
        principal = self._owners.pop(key, None)
        if principal is None:
            return
        left = self.count(principal) - 1
        if left:
            self._per_principal[principal] = left
        else:
            del self._per_principal[principal]

    def clear(self) -> None:
        self._owners.clear()
        self._per_principal.clear()


@dataclass(frozen=True)
class Eviction:
    """What may give way to a new entry, by whether a client sees the entries.

    - `foreign_idle_s`: another principal's entry may be taken (at the total cap only) once it has
      had nothing in flight this long. A client sees its legacy session: taking it is noticed (the
      next request gets 404), so only one idle past the session idle timeout, which a server would
      have expired anyway. The pool's sessions are the bridge's own cache, opened again unseen on
      the next call with the same key (their log level is raised again, their roots answer is in
      the key, subscriptions and listens hold a lease): any idle one may go, 0.
    - `own_in_use`: whether the opener's own entry with something in flight may go when none of
      its own is idle. A client's own sessions: yes (it opened one more than its cap; its oldest
      goes, as on a server with a session limit). The pool: never (a lease is a call running).
    """

    foreign_idle_s: float
    own_in_use: bool

    @classmethod
    def client_visible(cls, idle_s: float) -> Eviction:
        return cls(idle_s, own_in_use=True)


BRIDGE_CACHE: Final = Eviction(0.0, own_in_use=False)  # the upstream pool's sessions


class Slot(Protocol):
    """One entry as `victims()` sees it."""

    @property
    def principal(self) -> str: ...

    @property
    def in_use(self) -> bool: ...  # something in flight

    @property
    def last_used(self) -> float: ...  # when something on it last began or ended


S = TypeVar("S", bound=Slot)


def fits(
    slots: Collection[Slot],
    principal: str,
    caps: Caps,
    opening: Mapping[str, int] = NOTHING_OPENING,
) -> bool:
    """Whether one more entry of `principal` fits without evicting any (`opening`: entries being
    made, by principal, which count as made)."""
    if len(slots) + sum(opening.values()) >= caps.total:
        return False
    own = sum(1 for slot in slots if slot.principal == principal)
    return own + opening.get(principal, 0) < caps.per_principal


def victims(
    slots: Collection[S],
    principal: str,
    caps: Caps,
    eviction: Eviction,
    now: float,
    opening: Mapping[str, int] = NOTHING_OPENING,
) -> list[S]:
    """The entries to close so that one more entry of `principal` fits (see the module's rule), in
    the order chosen; raises `caps`' refusal, having chosen nothing, when that cannot be."""
    taken: list[S] = []
    own = [slot for slot in slots if slot.principal == principal]
    while len(own) - len(taken) + opening.get(principal, 0) >= caps.per_principal:
        victim = _own_victim(own, taken, eviction)
        if victim is None:
            raise caps.principal_refusal()
        taken.append(victim)
    horizon = now - eviction.foreign_idle_s
    while len(slots) - len(taken) + sum(opening.values()) >= caps.total:
        victim = _least_recent(slots, taken, horizon) or _own_victim(own, taken, eviction)
        if victim is None:
            raise caps.total_refusal()
        taken.append(victim)
    return taken


def _own_victim(own: Sequence[S], taken: list[S], eviction: Eviction) -> S | None:
    """The opener's least recently used entry with nothing in flight, else (if allowed) its least
    recently used one."""
    return _least_recent(own, taken, None) or (
        _least_recent(own, taken, None, in_use=True) if eviction.own_in_use else None
    )


def _least_recent(
    slots: Collection[S], taken: list[S], horizon: float | None, *, in_use: bool = False
) -> S | None:
    """The least recently used of `slots` not `taken`, in use or not as asked, used no later than
    `horizon` (if given); the first of equals."""
    best: S | None = None
    for slot in slots:
        used = slot.last_used
        if (horizon is not None and used > horizon) or (
            best is not None and used >= best.last_used
        ):
            continue
        if slot.in_use == in_use and slot not in taken:
            best = slot
    return best


V = TypeVar("V")


class _Entry(Generic[V]):
    __slots__ = ("id", "in_flight", "last_used", "principal", "value")

    def __init__(self, entry_id: str, principal: str, value: V, now: float) -> None:
        self.id = entry_id
        self.principal = principal
        self.value = value
        self.last_used = now
        self.in_flight = 0

    @property
    def in_use(self) -> bool:
        return self.in_flight > 0


class PrincipalTable(Generic[V]):
    """Values by id, each bound to the principal that added it, under `caps` and the eviction of a
    table whose entries clients see (`Eviction.client_visible(idle_s)`). An entry is in use from
    `begin` to `end` (a request on it, a stream open)."""

    def __init__(self, caps: Caps, idle_s: float, clock: Clock = time.monotonic) -> None:
        self._caps = caps
        self._idle_s = idle_s
        self._eviction = Eviction.client_visible(idle_s)
        self._clock = clock
        self._entries: OrderedDict[str, _Entry[V]] = OrderedDict()  # least recently used first
        self._counts: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self._entries

    def count(self, principal: str) -> int:
        return self._counts.get(principal, 0)

    def owned(self, entry_id: str, principal: str) -> V | None:
        """The entry's value if `principal` added it (anyone else: None, as if it did not
        exist)."""
        entry = self._entries.get(entry_id)
        return entry.value if entry is not None and entry.principal == principal else None

    def owned_by(self, entry_id: str, principal: str) -> bool:
        return self.owned(entry_id, principal) is not None

    def values(self) -> Iterator[V]:
        return (entry.value for entry in list(self._entries.values()))

    def begin(self, entry_id: str) -> None:
        """Something starts on the entry: it is in use, and the most recently used."""
        entry = self._entries.get(entry_id)
        if entry is not None:
            entry.in_flight += 1
            self._touch(entry)

    def end(self, entry_id: str) -> None:
        """What `begin` started has ended (an entry gone since is ignored)."""
        entry = self._entries.get(entry_id)
        if entry is not None:
            entry.in_flight -= 1
            self._touch(entry)

    def _touch(self, entry: _Entry[V]) -> None:
        entry.last_used = self._clock()
        self._entries.move_to_end(entry.id)

    def add(self, entry_id: str, principal: str, value: V) -> list[tuple[str, V]]:
        """Add an entry (replacing one of the same id); the entries evicted to make room, already
        removed. Raises the caps' refusal, having evicted nothing, when it cannot fit."""
        self.pop(entry_id)
        now = self._clock()
        chosen = victims(self._entries.values(), principal, self._caps, self._eviction, now)
        evicted = [(victim.id, victim.value) for victim in chosen]
        for victim_id, _ in evicted:
            self.pop(victim_id)
        self._entries[entry_id] = _Entry(entry_id, principal, value, now)
        self._counts[principal] = self.count(principal) + 1
        return evicted

    def pop(self, entry_id: str) -> V | None:
        entry = self._entries.pop(entry_id, None)
        if entry is None:
            return None
        left = self.count(entry.principal) - 1
        if left:
            self._counts[entry.principal] = left
        else:
            del self._counts[entry.principal]
        return entry.value

    def expired(self) -> list[str]:
        """The entries with nothing in flight for the idle timeout, least recently used first."""
        horizon = self._clock() - self._idle_s
        return [
            entry.id
            for entry in self._entries.values()
            if not entry.in_use and entry.last_used <= horizon
        ]


__all__ = [
    "BRIDGE_CACHE",
    "Caps",
    "Eviction",
    "PrincipalCounts",
    "PrincipalTable",
    "Slot",
    "fits",
    "held_call_caps",
    "victims",
]
