"""Roots-affine upstream sessions: learning whether the upstream keeps roots per session, answering
its outside-call `roots/list` asks, and letting a fresh session settle (docs/architecture.md,
"Roots").

- **Learning.** With `upstream.roots_affinity = "auto"`, the first interactive call whose client
  declares roots waits for a one-time *probe*: a session that declares only roots, opened and
  watched for `upstream.roots_probe_ms`; a `roots/list` ask in that window means the upstream keeps
  roots per session. Any later ask outside a call on a session that holds no client's roots teaches
  the same, and that session is retired. `"always"` skips the probe. An upstream that serves one
  session at a time (proxy/upstream/session_limit.py) is never probed (the probe would need a
  session of its own) and needs no roots-affine sessions (its one session serves every caller in
  turn): nothing is learned, and an ask outside a call gets `upstream.unowned_roots`.
- **Answering.** A roots-affine session's key carries the roots answer it was opened for
  (`SessionKey.roots_answer`); every ask outside a call on it gets exactly that answer.
- **Settling.** A fresh roots-affine session is handed to its first call only after its server
  asked (bounded by the probe window) and `upstream.roots_settle_ms` passed, so the server has
  applied the roots before the call runs.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Final

import structlog

from config.settings import UpstreamSettings
from proxy.upstream.base import UpstreamSession
from proxy.upstream.pool import Lease, UpstreamPool
from translators.protocol.capabilities import capability_fingerprint
from translators.protocol.pushes import PushAnswer
from translators.protocol.roots import PROBE, client_roots, declares_roots, roots_digest
from translators.wire.jsonrpc import JsonObject

log = structlog.get_logger()
ProbeLeaser = Callable[[], Awaitable[Lease]]
# (capabilities, fingerprint) -> lease
KeyedProbeLeaser = Callable[[JsonObject, str], Awaitable[Lease]]
NO_ROOTS: Final[JsonObject] = {"roots": []}  # what a request that cannot ask holds, roots unknown
MAX_KNOWN: Final = 4096  # (principal, fingerprint) pairs whose last roots answer is remembered


class AskClient:
    """The call must first ask its client for its roots
    (`translators.protocol.roots.roots_input_requests`)."""


class _SessionRoots:
    """What the bridge knows about one roots-affine session."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.settled = False


class RootsAffinity:
    """Per upstream: does it keep roots per session, and the roots state of each affine session."""

    def __init__(self, settings: UpstreamSettings, pool: UpstreamPool) -> None:
        self._pool = pool
        self._auto = settings.roots_affinity == "auto"
        self._probe_s = settings.roots_probe_ms / 1000
        self._settle_s = settings.roots_settle_ms / 1000
        self.keeps_roots: bool | None = None if self._auto else True
        self._probe: asyncio.Task[bool] | None = None
        self._probe_asked = asyncio.Event()
        self._sessions: weakref.WeakKeyDictionary[UpstreamSession, _SessionRoots] = (
            weakref.WeakKeyDictionary()
        )
        # the last roots answer a call of (principal, capability fingerprint) gave, bounded (LRU)
        self._known: OrderedDict[tuple[str, str], JsonObject] = OrderedDict()

    async def roots_for_call(
        self,
        client_capabilities: JsonObject,
        input_responses: JsonObject,
        lease_probe: KeyedProbeLeaser,
    ) -> JsonObject | AskClient | None:
        """The roots answer an interactive call's session must hold; None when any session of its
        key will do (no roots declared, or an upstream that does not keep roots); `AskClient` when
        the client did not pre-answer `ROOTS_INPUT_KEY`. Raises `InvalidParams` for a malformed
        answer."""
        if not declares_roots(client_capabilities):
            return None
        legacy: JsonObject = {"roots": {}}  # the probe session declares roots and nothing else
        if not await self.upstream_keeps_roots(
            lambda: lease_probe(legacy, capability_fingerprint(legacy))
        ):
            return None
        roots = client_roots(input_responses)
        return AskClient() if roots is None else roots

    def affinity(
        self,
        principal: str,
        fingerprint: str,
        legacy: JsonObject,
        roots: JsonObject | None,
        fresh: int | None = None,
    ) -> tuple[str, JsonObject | None]:
        """The roots part of a request's pool key (`SessionKey.roots`) and the roots answer its
        session holds, for a request that declares roots, gave them, or wants a session of its own
        (`fresh`: a key no other call shares, for `upstream.session_per_call`); a roots-affine
        call's key names the roots it gave. A request that cannot ask (lists, discover,
        completion, listen) from a client declaring roots still declares them to an upstream that
        keeps roots, so the server shows it what it shows such a client directly: its session
        holds the roots this principal's last call with these capabilities gave, or none
        (`{"roots": []}`) when no call gave any yet."""
        if roots is None and self.keeps_roots and declares_roots(legacy):
            roots = self._known.get((principal, fingerprint), NO_ROOTS)
        elif roots is not None and fresh is None:
            self._remember(principal, fingerprint, roots)
        affinity = "" if roots is None else roots_digest(roots)
        if fresh is not None:
            affinity = f"{affinity}#{fresh}"
        return affinity, roots

    def _remember(self, principal: str, fingerprint: str, roots: JsonObject) -> None:
        known = self._known
        known[(principal, fingerprint)] = roots
        known.move_to_end((principal, fingerprint))
        while len(known) > MAX_KNOWN:
            known.popitem(last=False)

    async def upstream_keeps_roots(self, lease_probe: ProbeLeaser) -> bool:
        """Whether calls need roots-affine sessions; runs the one-time probe if nobody knows yet."""
        if self.keeps_roots is not None:
            return self.keeps_roots
        if self._pool.limit.one:
            return False  # one session for every caller: no session of the probe's own
        if self._probe is None:
            self._probe = asyncio.get_running_loop().create_task(
                self._run_probe(lease_probe), name="roots-probe"
            )
        probe = self._probe
        try:
            return await asyncio.shield(probe)
        except Exception:
            if self._probe is probe:
                self._probe = None  # the next request probes again (e.g. the upstream was down)
            raise

    async def _run_probe(self, lease_probe: ProbeLeaser) -> bool:
        lease = await lease_probe()
        try:
            try:
                async with asyncio.timeout(self._probe_s):
                    await self._probe_asked.wait()
            except TimeoutError:
                pass
        finally:
            await lease.release(discard=True)
        if self.keeps_roots is None:
            self.keeps_roots = self._probe_asked.is_set()
        log.info("roots_probe_done", upstream_keeps_roots=self.keeps_roots)
        return self.keeps_roots

    def answer_outside_call(self, session: UpstreamSession) -> PushAnswer | None:
        """The answer to a `roots/list` ask no call owns, or None for the default policy."""
        key = self._pool.key_of(session)
        if key is None:
            return None
        if key.roots == PROBE:
            self._probe_asked.set()
            return PushAnswer(result={"roots": []})  # the probe session never serves a call
        if key.roots_answer is not None:
            self._state(session).asked.set()
            return PushAnswer(result=key.roots_answer)
        if self._pool.limit.one:
            return None  # the one session serves every caller: nothing to learn or retire
        if not self.keeps_roots and self._auto:
            self.keeps_roots = True
            log.info("roots_kept_by_upstream", learned="ask_outside_call")
        self._pool.retire(session)  # it holds roots no client of a later call vouched for
        return None

    async def settle(self, lease: Lease) -> None:
        """Before the first call on a fresh roots-affine session: let its server ask and apply."""
        if lease.key.roots_answer is None:
            return
        state = self._state(lease.session)
        if state.settled:
            return
        try:
            async with asyncio.timeout(self._probe_s):
                await state.asked.wait()
        except TimeoutError:
            log.info("roots_not_asked", window_ms=self._probe_s * 1000)
        else:
            await asyncio.sleep(self._settle_s)
        state.settled = True

    def _state(self, session: UpstreamSession) -> _SessionRoots:
        state = self._sessions.get(session)
        if state is None:
            state = self._sessions[session] = _SessionRoots()
        return state


__all__ = ["AskClient", "KeyedProbeLeaser", "RootsAffinity"]
