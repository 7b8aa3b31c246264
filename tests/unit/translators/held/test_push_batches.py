"""Learned batch sizes (translators/held/push_ledger.py) and the held call closing a batch on
them."""

from __future__ import annotations

import pytest
from test_held_machine import ATTEMPT, LIMITS, P101, P102, P103, QUIET, S, _asked, play

from config import ConfigError, load_settings
from translators.held.events import NoteBatchSize, StartTimer, UpstreamPushArrived
from translators.held.machine import HeldCall
from translators.held.push_ledger import BatchSizes, batch_key


def test_a_batch_closes_the_moment_it_holds_the_learned_size() -> None:
    call = HeldCall(LIMITS, attempt=1, batch_sizes={1: 2})
    assert call.start(0.0) == [StartTimer("deadline", ATTEMPT, 1)]
    play(call, 0.0, UpstreamPushArrived(P101), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    play(call, 0.001, UpstreamPushArrived(P102), _asked(1, 1, [P101, P102], 2), S.WAITING_CLIENT)


def test_a_single_learned_push_is_asked_from_running_without_a_timer() -> None:
    call = HeldCall(LIMITS, attempt=1, batch_sizes={1: 1, 2: 3})
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P101), _asked(1, 1, [P101], 2), S.WAITING_CLIENT)
    play(call, 0.5, UpstreamPushArrived(P103), [NoteBatchSize(1, 2)], S.WAITING_CLIENT)


def test_sizes_are_per_name_and_round_and_the_latest_wins() -> None:
    sizes = BatchSizes()
    key = batch_key("tools/call", {"name": "survey", "arguments": {}})
    assert key == ("tools/call", "survey")
    assert batch_key("resources/read", {"uri": "file:///a"}) == ("resources/read", "file:///a")
    assert batch_key("tools/call", None) == ("tools/call", "")
    assert sizes.sizes(key) == {}
    sizes.note(key, 1, 3)
    sizes.note(key, 2, 1)
    sizes.note(key, 1, 2)
    sizes.note(key, 3, 0)  # never a size of nothing
    assert sizes.sizes(key) == {1: 2, 2: 1}
    assert sizes.sizes(("prompts/get", "survey")) == {}


def test_the_table_forgets_the_least_recently_used_name() -> None:
    sizes = BatchSizes(max_keys=2)
    sizes.note(("tools/call", "a"), 1, 1)
    sizes.note(("tools/call", "b"), 1, 2)
    sizes.sizes(("tools/call", "a"))  # used: "b" is now the oldest
    sizes.note(("tools/call", "c"), 1, 3)
    assert len(sizes) == 2
    assert sizes.sizes(("tools/call", "b")) == {}
    assert sizes.sizes(("tools/call", "a")) == {1: 1}


def test_declared_sizes_cover_every_round_of_a_tool_until_learned() -> None:
    sizes = BatchSizes({"survey": 3})
    assert sizes.declared(("tools/call", "survey")) == 3
    assert sizes.declared(("prompts/get", "survey")) == 0  # tool names only
    sizes.note(("tools/call", "survey"), 2, 1)
    call = HeldCall(LIMITS, attempt=1, batch_sizes=sizes.sizes(("tools/call", "survey")))
    call.batch_size = sizes.declared(("tools/call", "survey"))
    call.start(0.0)
    play(call, 0.0, UpstreamPushArrived(P101), [StartTimer("batch", QUIET, 1)], S.COLLECTING)
    play(call, 0.0, UpstreamPushArrived(P102), [StartTimer("batch", QUIET, 2)], S.COLLECTING)
    play(
        call, 0.0, UpstreamPushArrived(P103), _asked(1, 1, [P101, P102, P103], 2), S.WAITING_CLIENT
    )
    assert call.batch_sizes == {2: 1}  # round 2 was learned: one push


def test_declared_sizes_come_from_the_environment_as_pairs() -> None:
    env = {"MRTR_BRIDGE_HELD_BATCH_SIZES": "survey=3, book=1"}
    assert load_settings(None, env, {}).held.batch_sizes == {"survey": 3, "book": 1}
    with pytest.raises(ConfigError):
        load_settings(None, {"MRTR_BRIDGE_HELD_BATCH_SIZES": "survey=0"}, {})
