"""`clock.Grains`: timers that need not be exact run at the first whole grain at or after
their due time, all those of one grain from one timer of the clock."""

from __future__ import annotations

import pytest

from kube_reloader.runtime.clock import Grains

from .fakes import FakeClock


def made() -> tuple[FakeClock, list[object], Grains]:
    """A fake clock, a list for what fired, and grains of a second on that clock."""
    clock = FakeClock()
    return clock, [], Grains(clock)


def test_timers_made_apart_within_one_grain_fire_together_from_one_timer() -> None:
    clock, fired, grains = made()
    clock.now = 10.2
    grains.call_later(60.0, lambda: fired.append(("a", clock.now)))
    clock.now = 10.7
    grains.call_later(60.0, lambda: fired.append(("b", clock.now)))
    assert clock.pending() == [pytest.approx(60.3)], "one timer, at the grain after both"
    clock.advance(60.29)
    assert fired == []
    clock.advance(0.01)
    assert fired == [("a", pytest.approx(71.0)), ("b", pytest.approx(71.0))]
    assert clock.pending() == []


@pytest.mark.parametrize("now", [0.0, 3.0, 3.25, 7.999999, 1e6 + 0.5, 123456789.000001])
@pytest.mark.parametrize("delay", [0.0, 0.4, 1.0, 60.0])
def test_a_timer_is_never_early_and_at_most_a_grain_late(now: float, delay: float) -> None:
    clock = FakeClock()
    clock.now = now
    Grains(clock).call_later(delay, lambda: None)
    (waits,) = clock.pending()
    assert delay - 1e-6 <= waits <= delay + 1.0
    assert (now + waits) % 1.0 == pytest.approx(0.0, abs=1e-6) or (
        now + waits
    ) % 1.0 == pytest.approx(1.0, abs=1e-6), "on a whole second"


def test_timers_of_different_grains_fire_each_at_their_own() -> None:
    clock, fired, grains = made()
    grains.call_later(0.5, lambda: fired.append(1))
    grains.call_later(1.5, lambda: fired.append(2))
    assert clock.pending() == [pytest.approx(1.0), pytest.approx(2.0)]
    clock.advance(1.0)
    assert fired == [1]
    clock.advance(1.0)
    assert fired == [1, 2]


def test_a_cancelled_timer_does_not_fire_and_the_last_one_cancelled_ends_the_clocks() -> None:
    clock, fired, grains = made()
    first = grains.call_later(5.0, lambda: fired.append("first"))
    second = grains.call_later(5.0, lambda: fired.append("second"))
    third = grains.call_later(5.0, lambda: fired.append("third"))
    second.cancel()
    assert clock.pending() == [pytest.approx(5.0)], "the others still wait"
    first.cancel()
    third.cancel()
    assert clock.pending() == [], "nothing left in the grain: its timer is cancelled"
    first.cancel()  # twice: nothing
    clock.advance(10.0)
    assert fired == []


def test_cancelling_one_timer_of_a_grain_leaves_exactly_the_others() -> None:
    clock, fired, grains = made()
    grains.call_later(5.0, lambda: fired.append("first"))
    second = grains.call_later(5.0, lambda: fired.append("second"))
    grains.call_later(5.0, lambda: fired.append("third"))
    second.cancel()
    clock.advance(5.0)
    assert fired == ["first", "third"]


def test_a_timer_made_in_a_grain_whose_only_timer_was_cancelled_arms_one_again() -> None:
    clock, fired, grains = made()
    grains.call_later(5.0, lambda: fired.append("gone")).cancel()
    grains.call_later(5.0, lambda: fired.append("kept"))
    clock.advance(5.0)
    assert fired == ["kept"]


def test_a_callback_that_raises_does_not_stop_the_others_of_its_grain() -> None:
    clock, fired, grains = made()

    def broken() -> None:
        raise RuntimeError("broken")

    grains.call_later(1.0, broken)
    grains.call_later(1.0, lambda: fired.append("after"))
    with pytest.raises(RuntimeError, match="broken"):
        clock.advance(1.0)
    assert fired == ["after"]
    assert clock.pending() == []


def test_cancelling_a_timer_that_fired_is_a_no_op() -> None:
    clock, fired, grains = made()
    done = grains.call_later(1.0, lambda: fired.append("done"))
    clock.advance(1.0)
    done.cancel()
    grains.call_later(0.5, lambda: fired.append("next"))
    clock.advance(1.0)
    assert fired == ["done", "next"]


def test_a_callback_that_cancels_a_later_one_of_its_grain_stops_it() -> None:
    clock, fired, grains = made()
    handles = []
    grains.call_later(1.0, lambda: handles[0].cancel())
    handles.append(grains.call_later(1.0, lambda: fired.append("cancelled")))
    grains.call_later(1.0, lambda: fired.append("kept"))
    clock.advance(1.0)
    assert fired == ["kept"]
    assert clock.pending() == []


def test_a_callback_may_make_a_timer_for_a_later_grain() -> None:
    clock, fired, grains = made()
    grains.call_later(1.0, lambda: grains.call_later(1.0, lambda: fired.append(clock.now)))
    clock.advance(1.0)
    assert clock.pending() == [pytest.approx(1.0)]
    clock.advance(1.0)
    assert fired == [pytest.approx(2.0)]


def test_a_timer_made_for_a_grain_that_already_fired_is_armed_and_runs() -> None:
    clock, fired, grains = made()
    grains.call_later(1.0, lambda: fired.append("first"))
    clock.advance(1.0)
    grains.call_later(0.0, lambda: fired.append("again"))  # at 1.0: the same grain's number
    assert clock.pending() == [0.0]
    clock.advance(0.0)
    assert fired == ["first", "again"]
