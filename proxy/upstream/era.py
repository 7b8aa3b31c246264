"""Which era the upstream speaks, kept current while the bridge runs (docs/architecture.md, "Eras").

`UpstreamEra` probes at start, again every `upstream.era_probe_interval_s` (0: never), and soon
after a failure is reported (`reprobe_soon`: a session that would not open, a relay that could not
connect), so upgrading the server behind a running bridge needs no restart. A probe is the
`server/discover` probe of `proxy.upstream.era_probe` (harmless to a legacy server; a stdio upstream
is probed in a throwaway process); a modern answer is followed by a legacy `initialize`
(its session deleted at once) to tell a dual-era server from a modern-only one. Where the settings
allow one upstream session at a time (proxy/upstream/session_limit.py), that `initialize` is sent
once, at the first probe that needs it (at start, before the pool opens a session), and its session
is never deleted (a `DELETE` would leave such a server unconnected); later probes keep its answer.
The era is logged when first known (`upstream_era_detected`) and when it changes
(`upstream_era_changed`), and `/readyz` shows it. An unreachable upstream keeps the last known era.

A stdio upstream is tracked by the subclass `StdioEra`: probed in a throwaway process only after a
failure or when a legacy client needs the era, never at start or on the interval (each probe costs
a process, and some servers must start only once).
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import structlog

from config.settings import UpstreamSettings
from proxy.common.shown import shown_uri
from proxy.upstream.era_probe import probe_http, probe_stdio, stdio_probe_settings
from proxy.upstream.http.outbound import upstream_client
from proxy.upstream.http.wire import client_info, read_reply
from proxy.upstream.session_limit import one_session_configured
from translators.protocol.era_detection import DUAL, LEGACY, MODERN, Era, era_of
from translators.protocol.eras import INITIALIZE
from translators.protocol.revisions import OFFERED
from translators.wire.errors import BridgeError, UpstreamFault
from translators.wire.fast_json import as_object

_log = structlog.get_logger(__name__)


class UpstreamEra:
    """The upstream's era (None until a probe got an answer); owns its probe task and HTTP
    client."""

    def __init__(self, settings: UpstreamSettings) -> None:
        self._settings = settings
        # read by the front on every request, so plain attributes, kept current here: the era,
        # whether a probe is in flight (`settled` would wait), and whether modern requests go to
        # the upstream untranslated
        self.era: Era | None = None
        self.probing = False
        self.relays_modern = False
        self._probe: asyncio.Task[Era | None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._client: aiohttp.ClientSession | None = None
        self.last_failure: BridgeError | None = None  # why the last probe got no answer
        self.probed_at: float | None = None  # loop time the last probe ended (answered or not)
        self.discover_status: int | None = None  # the HTTP status of the last probe's answer
        # one upstream session at a time: the legacy initialize's answer, asked once
        self._one_session = one_session_configured(settings)
        self._answered_initialize: bool | None = None

    # whether a modern request waits for a probe in flight before its path is chosen
    modern_waits = True

    def _relays(self, era: Era) -> bool:
        """Whether modern requests go to the upstream untranslated (an HTTP upstream that speaks
        modern)."""
        return era in (MODERN, DUAL) and self._settings.url is not None

    async def start(self) -> None:
        """The first probe (bounded by the probe timeout), then the interval ticker."""
        await self.probe()
        if self._settings.era_probe_interval_s > 0:
            self._ticker = asyncio.get_running_loop().create_task(
                self._tick(), name="upstream-era-ticker"
            )

    async def settled(self) -> None:
        """Wait for a probe in flight, if any (its failures are the probe's to log)."""
        probe = self._probe
        if probe is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(probe)

    def reprobe_soon(self) -> None:
        """Probe again now, unless a probe runs (concurrent failures share one probe)."""
        if self._probe is None:
            self._start_probe()

    async def probe(self) -> Era | None:
        if self._probe is None:
            self._start_probe()
        assert self._probe is not None
        return await asyncio.shield(self._probe)

    def _start_probe(self) -> None:
        self._probe = asyncio.get_running_loop().create_task(
            self._run_probe(), name="upstream-era-probe"
        )
        self.probing = True
        self._probe.add_done_callback(self._probe_done)

    def _probe_done(self, task: asyncio.Task[Era | None]) -> None:
        self._probe = None
        self.probing = False
        if not task.cancelled() and task.exception() is not None:
            _log.warning("upstream_era_probe_failed", error=type(task.exception()).__name__)

    async def _run_probe(self) -> Era | None:
        try:
            era = await self._probe_http()
        except BridgeError as exc:
            _log.info("upstream_era_unknown", reason=exc.message, keeping=self.era)
            self.last_failure = exc
            self.probed_at = asyncio.get_running_loop().time()
            return self.era
        self.last_failure = None
        self.probed_at = asyncio.get_running_loop().time()
        self._learn(era)
        return era

    async def _probe_http(self) -> Era:
        client = self._http()
        assert self._settings.url is not None
        verdict = await probe_http(
            client, self._settings.url, self._settings, self._static_headers()
        )
        self.discover_status = verdict.status
        if not verdict.modern:
            return LEGACY
        answered = self._answered_initialize
        if answered is None:
            answered = await self._answers_initialize(client)
            if self._one_session:
                self._answered_initialize = answered
        return era_of(verdict, answered)

    async def _answers_initialize(self, client: aiohttp.ClientSession) -> bool:
        """Whether a legacy `initialize` is answered with a result (its session is deleted at
        once, unless one session at a time is allowed); an HTTP 200 carrying an error is a
        refusal."""
        url = self._settings.url
        assert url is not None
        body = {
            "jsonrpc": "2.0",
            "id": "mrtr-bridge-era-initialize",
            "method": INITIALIZE,
            "params": {"protocolVersion": OFFERED, "capabilities": {}, "clientInfo": client_info()},
        }
        headers = {**self._static_headers(), "Accept": "application/json, text/event-stream"}
        timeout = aiohttp.ClientTimeout(total=self._settings.era_probe_timeout_s)
        try:
            async with client.post(url, json=body, headers=headers, timeout=timeout) as response:
                session_id = response.headers.get("Mcp-Session-Id")
                # a 200 may carry a JSON-RPC error (a modern-only server's -32022): read the body
                reply = await read_reply(response, body["id"], self._settings.max_line_bytes)
                answered = response.status == 200 and "result" in as_object(reply)
            if session_id and not self._one_session:
                async with client.delete(
                    url, headers={**headers, "Mcp-Session-Id": session_id}, timeout=timeout
                ):
                    pass
        except (aiohttp.ClientError, OSError, TimeoutError, UpstreamFault):
            return False  # UpstreamFault: a redirect off its origin, an answer past the cap
        return answered

    def _learn(self, era: Era) -> None:
        if era == self.era:
            return
        where = shown_uri(self._settings.url) if self._settings.url else "stdio"
        if self.era is None:
            _log.info("upstream_era_detected", era=era, url=where)
        else:
            _log.info("upstream_era_changed", era=era, previous=self.era, url=where)
        self.era = era
        self.relays_modern = self._relays(era)

    def _static_headers(self) -> dict[str, str]:
        static = self._settings.authorization
        return {"Authorization": static.get_secret_value()} if static is not None else {}

    def _http(self) -> aiohttp.ClientSession:
        if self._client is None:
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=self._settings.connect_timeout_s
            )
            self._client = upstream_client(self._settings, timeout=timeout)
        return self._client

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._settings.era_probe_interval_s)
            with contextlib.suppress(Exception):
                await self.probe()

    async def aclose(self) -> None:
        for task in (self._ticker, self._probe):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self._client is not None:
            await self._client.close()


class StdioEra(UpstreamEra):
    """The era of `upstream.command`; `modern` covers dual-era servers too (their legacy side is
    never used)."""

    modern_waits = False  # a modern request never waits for a probe (a throwaway process)

    def _relays(self, era: Era) -> bool:
        return era in (MODERN, DUAL)

    async def start(self) -> None:
        """Nothing at start: probed when asked (see the module's docstring)."""

    async def _probe_http(self) -> Era:  # the probe hook of UpstreamEra, here over stdio
        verdict = await probe_stdio(stdio_probe_settings(self._settings))
        return MODERN if verdict.modern else LEGACY


__all__ = ["StdioEra", "UpstreamEra"]
