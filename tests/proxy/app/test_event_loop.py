"""`front.event_loop` (proxy/app/event_loop.py): uvloop by default when installed, asyncio on
request, and a clear error when uvloop is required but missing."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from config import load_settings
from proxy.app import event_loop
from proxy.app.event_loop import EventLoopUnavailable, loop_factory, running_loop_name


def _missing_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def fake(name: str, package: str | None = None) -> object:
        if name == "uvloop":
            raise ImportError("no uvloop here")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake)


async def _name() -> str:
    await asyncio.sleep(0)
    return running_loop_name()


def test_auto_runs_on_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")
    assert loop_factory("auto")[0] == "uvloop"
    assert event_loop.run(_name(), "auto") == "uvloop"
    assert event_loop.run(_name(), "uvloop") == "uvloop"


def test_asyncio_never_uses_uvloop() -> None:
    assert loop_factory("asyncio") == ("asyncio", None)
    assert event_loop.run(_name(), "asyncio") == "asyncio"


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing_uvloop(monkeypatch)
    assert loop_factory("auto") == ("asyncio", None)
    assert event_loop.run(_name(), "auto") == "asyncio"


def test_uvloop_required_but_missing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing_uvloop(monkeypatch)
    with pytest.raises(EventLoopUnavailable, match="uvloop is not installed"):
        loop_factory("uvloop")


def test_the_setting_comes_from_the_environment() -> None:
    assert load_settings(None, {}, {}).front.event_loop == "auto"
    settings = load_settings(None, {"MRTR_BRIDGE_FRONT_EVENT_LOOP": "asyncio"}, {})
    assert settings.front.event_loop == "asyncio"
    with pytest.raises(Exception, match="event_loop"):
        load_settings(None, {"MRTR_BRIDGE_FRONT_EVENT_LOOP": "trio"}, {})
