"""Go durations and pause-period decisions (compat-spec §5.7)."""

from __future__ import annotations

import datetime as dt

import pytest

from kube_reloader.core import pausing
from kube_reloader.core.pausing import PauseAction

PERIOD = "deployment.reloader.stakater.com/pause-period"
AT = "deployment.reloader.stakater.com/paused-at"
NOW = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("1h30m", 5400), ("1.5h", 5400), ("90s", 90), ("300ms", 0.3), ("0", 0),
     ("-5m", -300), ("2h45m30.5s", 9930.5), ("1us", 1e-6), ("1µs", 1e-6), (".5s", 0.5)],
)  # fmt: skip
def test_go_duration_syntax(text: str, seconds: float) -> None:
    assert pausing.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1d", "5 m", "m", "1h-5m", "+", "five minutes"])
def test_invalid_durations(text: str) -> None:
    with pytest.raises(pausing.DurationError):
        pausing.parse_duration(text)


def plan(annotations: dict[str, str], paused: bool) -> pausing.PausePlan:
    return pausing.plan_pause(
        annotations=annotations, paused=paused, now=NOW, period_key=PERIOD, paused_at_key=AT
    )


def test_no_period_means_no_pause() -> None:
    assert plan({}, False).action is PauseAction.NONE


def test_an_unpaused_deployment_is_paused_for_the_period() -> None:
    p = plan({PERIOD: "5m"}, False)
    assert p.action is PauseAction.PAUSE
    assert p.resume_at == NOW + dt.timedelta(minutes=5)


def test_our_pause_is_not_extended() -> None:
    p = plan({PERIOD: "5m", AT: "2026-11-29T11:58:00Z"}, True)
    assert p.action is PauseAction.KEEP
    assert p.resume_at == dt.datetime(2026, 11, 29, 12, 3, tzinfo=dt.UTC)


def test_a_user_pause_is_left_alone() -> None:
    assert plan({PERIOD: "5m"}, True).action is PauseAction.USER_PAUSED


def test_an_invalid_period_reloads_without_pausing() -> None:
    p = plan({PERIOD: "5 minutes"}, False)
    assert p.action is PauseAction.INVALID
    assert "is not a duration" in p.message


@pytest.mark.parametrize(
    ("annotations", "paused", "due", "when"),
    [
        ({PERIOD: "5m", AT: "2026-11-29T11:50:00Z"}, True, True, dt.datetime(2026, 11, 29, 11, 55, tzinfo=dt.UTC)),
        ({PERIOD: "5m", AT: "2026-11-29T11:58:00Z"}, True, False, dt.datetime(2026, 11, 29, 12, 3, tzinfo=dt.UTC)),
        ({PERIOD: "5m"}, True, False, None),
        ({PERIOD: "5m", AT: "2026-11-29T11:58:00Z"}, False, False, None),
        ({AT: "2026-11-29T11:58:00Z"}, True, True, NOW),
        ({PERIOD: "5m", AT: "yesterday"}, True, True, NOW),
    ],
    ids=["expired", "running", "user pause", "already resumed", "period removed", "bad stamp"],
)  # fmt: skip
def test_resume_is_computed_from_the_object_alone(
    annotations: dict[str, str], paused: bool, due: bool, when: dt.datetime | None
) -> None:
    assert pausing.resume_due(
        annotations=annotations, paused=paused, now=NOW, period_key=PERIOD, paused_at_key=AT
    ) == (due, when)


def test_patch_bodies_are_v1s() -> None:
    assert pausing.pause_patch(AT, NOW) == {
        "metadata": {"annotations": {AT: "2026-11-29T12:00:00Z"}},
        "spec": {"paused": True},
    }
    assert pausing.resume_patch(AT) == {
        "metadata": {"annotations": {AT: None}},
        "spec": {"paused": False},
    }
