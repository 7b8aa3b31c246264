"""The one task owner (proxy/common/owned_tasks.py): failures are logged, `stop()` cancels and
awaits."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from proxy.common.owned_tasks import TaskOwner


async def fail() -> None:
    raise RuntimeError("boom")


async def test_a_failed_task_is_logged_with_its_name() -> None:
    owner = TaskOwner()
    with capture_logs() as logs:
        task = owner.spawn(fail(), name="doomed")
        await asyncio.wait([task])
    assert [(entry["event"], entry["task"], entry["log_level"]) for entry in logs] == [
        ("background_task_failed", "doomed", "error")
    ]
    assert len(owner) == 0


async def test_stop_cancels_the_chosen_tasks_and_never_the_caller() -> None:
    owner = TaskOwner()
    forever, other = (
        owner.spawn(asyncio.Event().wait(), name="a"),
        owner.spawn(asyncio.Event().wait(), name="b"),
    )

    async def stop_all() -> None:
        await owner.stop()

    stopper = owner.spawn(stop_all(), name="stopper")  # an owned task stopping its owner
    await asyncio.wait([stopper])
    assert (forever.cancelled(), other.cancelled(), stopper.cancelled(), len(owner)) == (
        True,
        True,
        False,
        0,
    )


async def test_stop_with_a_subset_leaves_the_others_running() -> None:
    owner = TaskOwner()
    chosen, kept = (
        owner.spawn(asyncio.Event().wait(), name="a"),
        owner.spawn(asyncio.Event().wait(), name="b"),
    )
    await owner.stop([chosen])
    assert (chosen.cancelled(), kept.done()) == (True, False)
    await owner.aclose()
    assert kept.cancelled()
