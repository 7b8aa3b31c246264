"""Fixtures shared by the proxy tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    """An aiohttp client session (the bridge's upstream side uses one like it)."""
    async with aiohttp.ClientSession() as session:
        yield session
