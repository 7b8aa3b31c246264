"""`python -m proxy` and the `mrtr-bridge` script: the command line in `proxy.app.cli`.

SIGINT and SIGTERM are taken before anything else is imported (`proxy.app.interrupts`): a stop at
any moment of start-up or shutdown ends the process with one line and no traceback, exit 130 for
SIGINT and 0 for SIGTERM (0 after a clean drain either way once the bridge serves).

For `mrtr-bridge stdio --upstream-command CMD` the legacy server is started *before* the bridge
imports its own modules (`proxy.app.early_start`, standard library only): the client's first
answer waits for both, and the two start side by side instead of one after the other.
"""

from __future__ import annotations

import gc
import os
import sys  # these three are loaded with the interpreter: importing them takes no time

from proxy.app import interrupts

interrupts.install()  # before anything else is imported: a stop is one line, not a traceback


def _run() -> int:
    """Start the legacy process first (a `stdio` command line), then import and run the CLI (the
    imports in here, where `main` catches a stop)."""
    from proxy.app.early_start import start_early

    early = start_early(sys.argv[1:], os.environ)
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


def main() -> int:
    """Entry point of `mrtr-bridge`; a stop signal that nothing drains is one line on stderr."""
    try:
        status = _run()
    except interrupts.StopRequested as stop:
        interrupts.finished()  # a signal while this line is written changes nothing
        sys.stderr.write(stop.line)
        sys.stderr.flush()
        return stop.status
    interrupts.finished()
    return status


__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
