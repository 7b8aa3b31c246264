#!/usr/bin/env python3
"""`mrtr-bridge` with a profile hook that records which project modules a request enters
(bench/module_trace.py).

Runs the bridge's own entry point with its arguments. SIGUSR1 starts recording: every Python call
or resume (`sys.setprofile`) whose code lives under `proxy/`, `translators/` or `config/` adds its
module (and the function to another) to a set, and every change of module from one event to the
next counts as a move. SIGUSR2 stops recording and writes `{"modules": [...], "moves": n,
"functions": [...]}` to `$MRTR_TRACE_OUT`, then touches `$MRTR_TRACE_OUT.done`. Not part of
`make bench`: the hook slows the bridge down.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = tuple(str(ROOT / name) + os.sep for name in ("proxy", "translators", "config"))
_modules: set[str] = set()
_functions: set[str] = set()
_moves = [0]
_last: list[str | None] = [None]
_names: dict[str, str | None] = {}


def _module_of(filename: str) -> str | None:
    name = _names.get(filename, "")
    if name != "":
        return name
    module = None
    if filename.startswith(_PACKAGES):
        module = os.path.relpath(filename, ROOT)[: -len(".py")].replace(os.sep, ".")
    _names[filename] = module
    return module


def _hook(frame: FrameType, event: str, _arg: Any) -> None:
    if event != "call":
        return
    module = _module_of(frame.f_code.co_filename)
    if module is None:
        return
    _modules.add(module)
    _functions.add(f"{module}:{frame.f_code.co_qualname}")
    if module != _last[0]:
        _moves[0] += 1
        _last[0] = module


def _start(_signum: int, _frame: FrameType | None) -> None:
    _modules.clear()
    _functions.clear()
    _moves[0] = 0
    _last[0] = None
    threading.setprofile(_hook)
    sys.setprofile(_hook)


def _stop(_signum: int, _frame: FrameType | None) -> None:
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    out = Path(os.environ["MRTR_TRACE_OUT"])
    out.write_text(
        json.dumps(
            {"modules": sorted(_modules), "moves": _moves[0], "functions": sorted(_functions)}
        )
    )
    Path(f"{out}.done").touch()


def main() -> int:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    from proxy.__main__ import main as bridge_main

    sys.argv[0] = "mrtr-bridge"
    return bridge_main()


if __name__ == "__main__":
    sys.exit(main())
