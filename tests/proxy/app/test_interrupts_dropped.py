"""A stop signal whose `StopRequested` the interpreter drops (raised inside a weakref callback, as
when SIGTERM lands in an import lock's callback while the bridge imports) is not lost: nothing is
printed for it, and the event loop's start raises it again (proxy/app/interrupts.py, regime 1)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from cli_run import TIMEOUT_S, clean_env

SCRIPT = textwrap.dedent(
    """
    import os, signal, weakref
    from proxy.app import event_loop, interrupts

    interrupts.install()

    class Thing:
        pass

    def dropped(_):  # the handler runs in here; the interpreter drops what it raises
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):
            pass

    thing = Thing()
    ref = weakref.ref(thing, dropped)
    del thing
    print("went on", flush=True)

    async def serve():
        print("served", flush=True)

    try:
        event_loop.run(serve(), "asyncio")
    except interrupts.StopRequested as stop:
        print(f"stopped {stop.status}: {stop.line.strip()}", flush=True)
    """
)


def test_a_dropped_stop_is_raised_again_when_the_loop_starts() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=clean_env(),
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "went on\nstopped 0: mrtr-bridge: stopped by SIGTERM while starting\n"
