"""`python -m proxy` and the `mrtr-bridge` script: the command line in `proxy.app.cli`.

For `mrtr-bridge stdio --upstream-command CMD` the legacy server is started *before* the bridge
imports its own modules (`proxy.app.early_start`, standard library only): the client's first
answer waits for both, and the two start side by side instead of one after the other.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

from proxy.app.early_start import start_early


def _stop_while_starting(signum: int, frame: object) -> None:
    """SIGTERM or SIGINT before the bridge handles them itself: stop, and the process started early
    goes with its whole group (below); the bridge stopped as asked, so the exit status is 0."""
    raise SystemExit(0)


def main() -> int:
    """Entry point of `mrtr-bridge`: start the legacy process first, then import and run the CLI."""
    # Taken over before the legacy process is spawned, not after: a stop that comes while it
    # starts (the process already visible, `Popen` not yet returned) still exits 0.
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    for signum in previous:
        signal.signal(signum, _stop_while_starting)
    early = start_early(sys.argv[1:], os.environ)
    if early is None:  # nothing started: the usual handling until the bridge takes them over
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    try:
        gc.disable()  # while importing: nothing to collect yet, and about 5% of the import time
        try:
            from proxy.app.cli import main as run
        finally:
            gc.enable()
        return run(early=early)
    finally:
        if early is not None:
            early.discard()  # not claimed (another command, other settings, an early exit)


__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
