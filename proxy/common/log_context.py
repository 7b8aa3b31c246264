"""The log context: what a block of code binds to every log line it (and the tasks it starts)
writes, such as the front request's id, method and principal.

One context variable holds one mapping, never changed in place: a `log_context` block sets a new
mapping and restores the old one, and `merge_log_context` (the first processor of the log chain,
proxy/observe/logs.py) adds it to each line. structlog's own `bound_contextvars` keeps one variable
per key and its merge walks every context variable of the task on every line; this costs one
lookup per line and one small dict per block.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from types import MappingProxyType, TracebackType
from typing import Any, Final, Generic, TypeVar

from structlog.typing import EventDict, WrappedLogger

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
_LOG_CONTEXT: Final[contextvars.ContextVar[Mapping[str, Any]]] = contextvars.ContextVar(
    "mrtr_log_context", default=_EMPTY
)


class log_context:
    """`with log_context(**values)`: bind `values` to the log context for the block, then restore
    exactly what was bound before; an inner block's value wins inside it. Enter and exit must run
    in the same task, as a `with` block does; tasks started inside inherit the binding."""

    __slots__ = ("_token", "_values")

    def __init__(self, **values: Any) -> None:
        self._values = values

    def __enter__(self) -> None:
        self._token = bind_log_context(self._values)

    def __exit__(self, *exc_info: object) -> None:
        _LOG_CONTEXT.reset(self._token)


def bind_log_context(values: Mapping[str, Any]) -> contextvars.Token[Mapping[str, Any]]:
    """Bind `values` (never changed afterwards) on top of what is bound, until
    `unbind_log_context(token)`: the `log_context` block's two halves, for a caller that keeps
    `values` prebuilt (the HTTP front binds its upstream's name around every request)."""
    bound = _LOG_CONTEXT.get()
    return _LOG_CONTEXT.set({**bound, **values} if bound else values)


def unbind_log_context(token: contextvars.Token[Mapping[str, Any]]) -> None:
    _LOG_CONTEXT.reset(token)


Entered = TypeVar("Entered")


class log_context_around(Generic[Entered]):
    """`async with log_context_around(manager, **values)`: `manager` entered, and later exited,
    with `values` bound, so the tasks it starts inherit them; the code between does not see them
    (a `log_context` block around a `yield` would leak its binding into the rest of that task)."""

    __slots__ = ("_manager", "_values")

    def __init__(self, manager: AbstractAsyncContextManager[Entered], **values: Any) -> None:
        self._manager = manager
        self._values = values

    async def __aenter__(self) -> Entered:
        with log_context(**self._values):
            return await self._manager.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        with log_context(**self._values):
            return await self._manager.__aexit__(exc_type, exc, traceback)


def bound_log_context() -> dict[str, Any]:
    """What `log_context` blocks bind here now (a copy)."""
    return dict(_LOG_CONTEXT.get())


def merge_log_context(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: the bound log context, after the line's own keys (which win)."""
    bound = _LOG_CONTEXT.get()
    if bound:
        for key, value in bound.items():
            event_dict.setdefault(key, value)
    return event_dict


__all__ = [
    "bind_log_context",
    "bound_log_context",
    "log_context",
    "log_context_around",
    "merge_log_context",
    "unbind_log_context",
]
