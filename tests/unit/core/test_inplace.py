"""In-place reloads as values: tokens, requests, the files' digest, the policy's parsers, and
the next step — table by table, then a simulated workload whose pods take time to restart,
with the controller restarted at any point, for the promises: each pod restarted once, never
two at once, pods already current left alone, and an end."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import inplace
from kube_reloader.core.evicting import PodStrategy, parse_strategy, policy_of
from kube_reloader.core.inplace import Mode, Phase, Pod, next_step

CHANGE = 1_000.4  # the change's time: its whole second is 1000
NOW = 1_010.0


def pod(name: str, *, started: float | None = 900.0, ready: bool = True, request: str | None = None,
        ordinal: int | None = None, terminating: bool = False, restarts: int = 0) -> Pod:  # fmt: skip
    return Pod(uid=f"uid-{name}", name=name, ready=ready, started=started, request=request,
               ordinal=ordinal, terminating=terminating, restarts=restarts)  # fmt: skip


def step(pods: list[Pod], mode: Mode = Mode.RESTART, *, want: str = "", replicas: int = 3,
         last_action: float | None = None, ordered: bool = False, now: float = NOW,
         pending: frozenset[str] = frozenset(),
         restarted: frozenset[str] = frozenset()) -> inplace.Step:  # fmt: skip
    want = want or (inplace.restart_token(CHANGE) if mode is Mode.RESTART else "req")
    return next_step(pods, mode, want, CHANGE, now, replicas=replicas, started=1_005.0,
                     ordered=ordered, last_action=last_action, pending=pending,
                     restarted=restarted)  # fmt: skip


def test_strategy_names_parse_exactly() -> None:
    assert parse_strategy("restart-in-place") is PodStrategy.RESTART_IN_PLACE
    assert parse_strategy("signal") is PodStrategy.SIGNAL
    with pytest.raises(ValueError, match="want one of"):
        parse_strategy("Signal")


def test_the_signal_annotation_is_read_for_the_signal_strategy_only() -> None:
    policy, warnings = policy_of("Deployment", {"kube-reloader.io/strategy": "signal",
                                                "kube-reloader.io/signal": "USR1"})  # fmt: skip
    assert policy is not None
    assert policy.signal == "SIGUSR1"
    assert warnings == ()
    refused, problems = policy_of("Deployment", {"kube-reloader.io/strategy": "signal",
                                                 "kube-reloader.io/signal": "SIGKILL"})  # fmt: skip
    assert refused is None
    assert "invalid kube-reloader.io/signal" in problems[0]


@pytest.mark.parametrize("kind", ["Job", "CronJob", "Rollout"])
def test_in_place_strategies_are_refused_for_kinds_without_replaceable_pods(kind: str) -> None:
    policy, problems = policy_of(kind, {"kube-reloader.io/strategy": "restart-in-place"})
    assert policy is None
    assert "restart-in-place is not supported" in problems[0]


def test_the_files_digest_ignores_names_and_order_but_not_content() -> None:
    assert inplace.files_digest([b"a", b"b"]) == inplace.files_digest([b"b", b"a"])
    assert inplace.files_digest([b"a"]) != inplace.files_digest([b"a", b""])
    assert inplace.files_digest([b"a"]) != inplace.files_digest([b"b"])


def test_a_request_round_trips_and_anything_else_reads_as_nothing() -> None:
    text = inplace.signal_request("SIGHUP", {"b": "2", "a": "1"})
    assert inplace.parse_request(text) == ("SIGHUP", {"a": "1", "b": "2"})
    for bad in ("", "{", "[]", '{"signal":"SIGKILL"}', '{"signal":"HUP","digests":[]}',
                "x" * (inplace.MAX_REQUEST_TEXT + 1)):  # fmt: skip
        assert inplace.parse_request(bad) is None


@given(st.text(max_size=300))
@settings(max_examples=300)
def test_reading_a_request_is_total(text: str) -> None:
    result = inplace.parse_request(text)
    assert result is None or result[0] in inplace.SIGNALS


@given(st.text(max_size=40))
def test_a_token_names_its_change_second_or_nothing(text: str) -> None:
    got = inplace.token_change(text)
    assert got is None or got == int(text.partition("-")[0])
    assert inplace.token_change(inplace.restart_token(CHANGE, 3)) == math.floor(CHANGE)


@pytest.mark.parametrize(
    ("pods", "phase", "picked"),
    [
        # every container started after the change's second: nothing to do
        ([pod("a", started=1_001.0), pod("b", started=1_002.0)], Phase.DONE, None),
        # started within the change's own second: counted as older (restarted once more)
        ([pod("a", started=1_000.0), pod("b", started=1_002.0)], Phase.ACT, "a"),
        # one at a time, by name
        ([pod("b"), pod("a"), pod("c")], Phase.ACT, "a"),
        # a pod that serves nothing goes first
        ([pod("a"), pod("b", ready=False)], Phase.ACT, "b"),
        # a pod is short and it is not one of ours to take: wait
        ([pod("a"), pod("b", started=1_002.0, ready=False)], Phase.WAIT, None),
        # a container not running yet (None) is not current
        ([pod("a", started=None, ready=False), pod("b", started=1_002.0)], Phase.ACT, "a"),
        # a terminating pod is not looked at
        ([pod("a", terminating=True), pod("b", started=1_002.0)], Phase.DONE, None),
    ],
)  # fmt: skip
def test_restart_in_place_picks_the_next_pod(pods: list[Pod], phase: Phase,
                                             picked: str | None) -> None:  # fmt: skip
    got = step(pods, replicas=len([p for p in pods if not p.terminating]))
    assert got.phase is phase
    assert (got.pod.name if got.pod else None) == picked
    if got.phase is Phase.ACT:
        assert got.value == inplace.restart_token(CHANGE)


def test_a_pod_asked_to_restart_is_waited_for_then_asked_again_with_the_next_attempt() -> None:
    asked = pod("a", request=inplace.restart_token(CHANGE), ready=False)
    waiting = step([asked, pod("b")], last_action=NOW - 5)
    assert waiting.phase is Phase.WAIT
    assert "waiting for a to restart" in waiting.reason
    # patience counts from the later of the last write and the rotation's start (1005)
    later = NOW + inplace.RESTART_PATIENCE
    late = step([asked, pod("b")], last_action=NOW - 5, now=later)
    assert late.phase is Phase.ACT
    assert late.pod == asked
    assert late.value == inplace.restart_token(CHANGE, 1)


def test_a_token_of_an_older_change_does_not_count_as_asked() -> None:
    old = pod("a", request=inplace.restart_token(500.0))
    got = step([old, pod("b", started=1_002.0)], replicas=2)
    assert got.phase is Phase.ACT
    assert got.pod == old


def test_statefulsets_go_from_the_highest_ordinal() -> None:
    pods = [pod(f"s-{i}", ordinal=i) for i in range(3)]
    assert step(pods, ordered=True).pod == pods[2]


def test_signal_writes_the_request_on_one_pod_then_settles() -> None:
    pods = [pod("a", request="req"), pod("b"), pod("c", request="old")]
    got = step(pods, Mode.SIGNAL)
    assert got.phase is Phase.ACT
    assert got.pod is not None
    assert got.pod.name == "b"
    assert got.value == "req"
    settling = step(pods, Mode.SIGNAL, last_action=NOW - 1)
    assert settling.phase is Phase.WAIT
    assert settling.reason == "settling"
    done = [dataclasses.replace(p, request="req") for p in pods]
    assert step(done, Mode.SIGNAL, last_action=NOW - 1).phase is Phase.WAIT
    assert step(done, Mode.SIGNAL, last_action=NOW - inplace.SIGNAL_SETTLE).phase is Phase.DONE


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=6),
       st.integers(0, 6))  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_a_simulated_rotation_restarts_each_stale_pod_once_never_two_at_once(
    spec: list[tuple[int, bool]], crash_at: int
) -> None:
    """Pods restart a few looks after being asked (`delay`); the controller forgets its own
    state at look `crash_at` (a restart: only the cluster remains)."""
    now = NOW
    pods = {f"p{i}": pod(f"p{i}", started=1_002.0 if fresh else 900.0)
            for i, (_, fresh) in enumerate(spec)}  # fmt: skip
    delay = {f"p{i}": d for i, (d, _) in enumerate(spec)}
    restarting: dict[str, int] = {}
    restarts = dict.fromkeys(pods, 0)
    last_action: float | None = None
    for look in range(200):
        if look == crash_at:
            last_action = None
        for name in list(restarting):
            restarting[name] -= 1
            if restarting[name] < 0:
                del restarting[name]
                restarts[name] += 1
                pods[name] = dataclasses.replace(pods[name], started=now, ready=True)
        assert len(restarting) <= 1
        got = next_step(list(pods.values()), Mode.RESTART, inplace.restart_token(CHANGE), CHANGE,
                        now, replicas=len(pods), started=NOW, last_action=last_action)  # fmt: skip
        if got.phase is Phase.DONE:
            break
        if got.phase is Phase.ACT:
            assert got.pod is not None
            pods[got.pod.name] = dataclasses.replace(got.pod, request=got.value, ready=False)
            restarting[got.pod.name] = delay[got.pod.name]
            last_action = now
        now += 1.0
    else:
        pytest.fail("the rotation never ended")
    for i, (_, fresh) in enumerate(spec):
        assert restarts[f"p{i}"] == (0 if fresh else 1)


def test_a_pod_asked_for_an_older_change_is_waited_for_before_another_is_asked() -> None:
    """Pod b was asked for an earlier change and has not restarted yet (still Ready): a newer
    change must not ask a second pod meanwhile."""
    older = pod("b", request=inplace.restart_token(500.0))
    got = step([pod("a"), older, pod("c")], last_action=NOW - 1,
               pending=frozenset({older.uid}))  # fmt: skip
    assert got.phase is Phase.WAIT
    assert "waiting for b to restart" in got.reason


def test_a_pod_this_rotation_saw_restart_counts_as_current_whatever_its_clock() -> None:
    behind = pod("a", started=950.0, restarts=1)  # a node clock behind the API server's
    got = step([behind, pod("b", started=1_002.0)], replicas=2,
               restarted=frozenset({behind.uid}))  # fmt: skip
    assert got.phase is Phase.DONE


def test_signal_leaves_pods_started_after_the_change_alone() -> None:
    got = step([pod("new", started=1_003.0), pod("old")], Mode.SIGNAL, replicas=2)
    assert got.pod is not None
    assert got.pod.name == "old"


def test_a_hostile_token_attempt_reads_as_zero() -> None:
    assert inplace.token_attempt("1000-x") == 0
    assert inplace.token_attempt("1000-" + "9" * 50) == 0
    assert inplace.token_attempt("1000-4") == 4


@given(st.text(max_size=5000), st.sampled_from(["signal", "restart-in-place"]))
@settings(max_examples=200)
def test_any_signal_annotation_reads_as_a_policy_or_one_short_reason(
    text: str, strategy: str
) -> None:
    policy, problems = policy_of("Deployment", {"kube-reloader.io/strategy": strategy,
                                                "kube-reloader.io/signal": text})  # fmt: skip
    if policy is None:
        assert len(problems) == 1
        assert len(problems[0]) < 300
        assert "\n" not in problems[0]
    else:
        assert policy.signal in inplace.SIGNALS


def test_a_change_identifier_is_keyed_and_told_apart_by_content_and_second() -> None:
    contents = [("Secret", "tls", "hash-a")]
    one = inplace.change_id(100.2, contents, b"k1")
    assert one == inplace.change_id(100.9, contents, b"k1"), "the same second, the same id"
    assert one != inplace.change_id(100.2, contents, b"k2"), "another process, another id"
    assert one != inplace.change_id(100.2, [("Secret", "tls", "hash-b")], b"k1")
    assert one != inplace.change_id(101.0, contents, b"k1")
    assert "hash-a" not in one


def test_only_a_request_naming_a_changed_volume_carries_the_change_identifier() -> None:
    digested = inplace.signal_request("SIGHUP", {"config": "d1"}, "abc")
    named = inplace.signal_request("SIGHUP", {"config": "d1", "tls": inplace.CHANGED}, "abc")
    assert '"change"' not in digested
    assert json.loads(named)["change"] == "abc"
    assert inplace.parse_request(named) == ("SIGHUP", {"config": "d1", "tls": inplace.CHANGED})
