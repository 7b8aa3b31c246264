"""The held call: a sans-I/O state machine for one MRTR-capable upstream call (docs/decisions.md,
"The held call is a sans-I/O machine").

`HeldCall.handle(event, now) -> list[Action]` is the whole interface. Time comes in as a
parameter; timers go out as `StartTimer` actions and come back as `BatchWindowClosed` /
`DeadlinePassed` events. Every (state, event type) pair is in `TRANSITIONS`
(translators/held/transitions.py), which names the states the transition may lead to; a handler
computes its actions and returns its target (`Step`), and `handle()` alone moves the state, once
it has checked the table names the target.
A missing pair, or a target the table does not name, is a `BridgeBug`: it yields `ReportBug`
and leaves the state unchanged.

Attempts: each front request (the first call and every retry) is an *attempt* with an integer id
chosen by the driver. `Reply*` actions name the attempt they answer.
"""

from __future__ import annotations

from translators.held.events import Action, Event, ReplyError, ReportBug
from translators.held.record import CallRecord, HeldCallState, Limits, Step
from translators.held.transitions import EVENT_TYPES, TRANSITIONS, Transition
from translators.wire.errors import ShuttingDown, UpstreamLimitExceeded

_S = HeldCallState


class HeldCall(CallRecord):
    """One MRTR-capable upstream call, from its first attempt to its final reply."""

    def start(
        self, now: float, *, attempt: int | None = None, deadline_s: float | None = None
    ) -> list[Action]:
        """Actions for the first attempt (`attempt`, unless given at construction): its deadline,
        `deadline_s` from now when the call ran plain before (what is left of the attempt's
        timeout), else the whole timeout."""
        if attempt is not None:
            self.attempt = attempt
        timeout_s = self.limits.attempt_timeout_s if deadline_s is None else deadline_s
        return [self.timer("deadline", timeout_s)]

    def handle(self, event: Event, now: float) -> list[Action]:
        transition = TRANSITIONS.get((self.state, type(event)))
        if transition is None:
            return [ReportBug(f"no transition for {type(event).__name__} in {self.state.name}")]
        step = transition.handler(self, event, now)
        if step.target not in transition.targets:
            return [
                ReportBug(f"{type(event).__name__} in {self.state.name} led to {step.target.name}")
            ]
        self.state = step.target
        return step.actions

    def abort(self, reason: str, now: float) -> list[Action]:
        """Abandon the call now (shutdown, or a held-call cap refused it): an attached
        attempt is told the bridge is shutting down, pending pushes are refused and the upstream
        call is cancelled."""
        if self.state is _S.DONE:
            return []
        told = [ReplyError(self.attempt, fault=ShuttingDown())] if self.attempt is not None else []
        step = self.abandon(reason, *told)
        self.state = step.target
        return step.actions

    def relimit(self, limits: Limits) -> list[Action]:
        """Run under `limits` from now on, restarting the current deadline under them: a call the
        bridge turned into a task lives as long as the task, not one front request
        (docs/tasks.md, "Long plain calls as tasks")."""
        self.limits = limits
        if self.state is _S.DONE:
            return []
        waiting = self.state is _S.WAITING_CLIENT
        return [self.timer("deadline", limits.held_ttl_s if waiting else limits.attempt_timeout_s)]

    def overflow(self, fault: UpstreamLimitExceeded, now: float, *before: Action) -> list[Action]:
        """The upstream went past a push cap (`held.max_pushes_per_call`, checked by the driver):
        `before` (the excess push refused), then as `overflowed`."""
        if self.state is _S.DONE or (self.attempt is None and self.upstream_done):
            return []  # the call is already over upstream (its session discarded): nothing to tell
        step = self.overflowed(fault, *before)
        self.state = step.target
        return step.actions


__all__ = ["EVENT_TYPES", "HeldCall", "HeldCallState", "Limits", "Step", "Transition"]
