"""Pod-level reloads: the annotations' parsers, a rotation's targets, and the next step — table
by table, then a simulated workload whose replacements take time to become Ready, restarted at
any point, for the promises: each target evicted once, no other pod ever, never more than
`max-unavailable` short, StatefulSets from the highest ordinal one at a time, and an end."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core.evicting import (
    EvictError,
    MaxUnavailable,
    Phase,
    Pod,
    PodPolicy,
    PodStrategy,
    Rotation,
    next_step,
    ordinal_of,
    parse_max_unavailable,
    parse_strategy,
    policy_of,
    targets,
)
from kube_reloader.core.selectors import SelectorError, from_label_selector


@pytest.mark.parametrize(
    ("text", "want"),
    [("1", MaxUnavailable(1)), ("3", MaxUnavailable(3)), ("007", MaxUnavailable(7)),
     ("25%", MaxUnavailable(25, percent=True)), ("100%", MaxUnavailable(100, percent=True)),
     ("999999", MaxUnavailable(999999))],
)  # fmt: skip
def test_max_unavailable_takes_a_count_or_a_percentage(text: str, want: MaxUnavailable) -> None:
    assert parse_max_unavailable(text) == want


@pytest.mark.parametrize(
    "text", ["", "0", "0%", "101%", "%", "-1", "+1", " 1", "1 ", "1.5", "25 %", "1e3", "٣",
             "²", "1000000", "ten", "25%%"],
)  # fmt: skip
def test_max_unavailable_refuses_anything_else_with_one_line(text: str) -> None:
    with pytest.raises(EvictError) as err:
        parse_max_unavailable(text)
    assert "kube-reloader.io/max-unavailable" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("value", "replicas", "want"),
    [(MaxUnavailable(2), 10, 2), (MaxUnavailable(25, True), 10, 2),
     (MaxUnavailable(25, True), 3, 1), (MaxUnavailable(100, True), 5, 5),
     (MaxUnavailable(50, True), 0, 1), (MaxUnavailable(5), 2, 5)],
)  # fmt: skip
def test_a_percentage_rounds_down_but_never_below_one(
    value: MaxUnavailable, replicas: int, want: int
) -> None:
    assert value.resolve(replicas) == want


def test_the_strategy_is_patch_or_evict_exactly() -> None:
    assert parse_strategy("evict") is PodStrategy.EVICT
    assert parse_strategy("patch") is PodStrategy.PATCH
    for bad in ("Evict", " evict", "restart", "", "evict\n"):
        with pytest.raises(EvictError):
            parse_strategy(bad)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_both_parsers_give_a_value_or_a_one_line_error(text: str) -> None:
    for parse in (parse_max_unavailable, parse_strategy):
        error = ""
        try:
            parse(text)
        except EvictError as err:
            error = str(err)
        assert "\n" not in error


@pytest.mark.parametrize(
    ("name", "labels", "want"),
    [("web-2", None, 2), ("web-10", {}, 10), ("web", None, None), ("a-b-c", None, None),
     ("db-x", {"apps.kubernetes.io/pod-index": "4"}, 4), ("web-1234567890", None, None),
     ("web-", None, None)],
)  # fmt: skip
def test_a_statefulset_pods_ordinal_comes_from_its_label_or_its_name(
    name: str, labels: dict[str, str] | None, want: int | None
) -> None:
    assert ordinal_of(name, labels) == want


def pod(name: str, created: float = 0, ready: bool = True, **kw: object) -> Pod:
    return Pod(uid=f"uid-{name}", name=name, created=created, ready=ready,
               ready_since=kw.pop("ready_since", created), **kw)  # type: ignore[arg-type]  # fmt: skip


def test_targets_are_the_live_pods_created_before_the_change_or_in_its_second() -> None:
    pods = [pod("old", 90), pod("same-second", 100), pod("after", 101),
            pod("going", 50, terminating=True)]  # fmt: skip
    assert targets(pods, changed_at=100.4) == {"uid-old", "uid-same-second"}


def test_a_serving_target_is_evicted_only_within_the_budget_oldest_first() -> None:
    pods = [pod("b", 2), pod("a", 1), pod("c", 3)]
    step = next_step(pods, targets(pods, 10), Rotation(replicas=3, max_unavailable=2), now=20)
    assert step.phase is Phase.EVICT
    assert [p.name for p in step.evict] == ["a", "b"]
    assert step.remaining == 3


def test_it_waits_while_the_workload_is_short_of_max_unavailable_pods() -> None:
    pods = [pod("a", 1), pod("b", 1)]  # one of three replicas is missing (being replaced)
    step = next_step(pods, {"uid-a", "uid-b"}, Rotation(replicas=3), now=20)  # type: ignore[arg-type]
    assert step.phase is Phase.WAIT
    assert step.reason == "waiting for 1 of 3 pods to be available"


def test_a_target_that_is_not_ready_is_evicted_at_once_as_it_serves_nothing() -> None:
    pods = [pod("ok", 1), pod("crashing", 1, ready=False), pod("also", 1, ready=False)]
    step = next_step(pods, targets(pods, 10), Rotation(replicas=3), now=20)
    assert [p.name for p in step.evict] == ["also", "crashing"]


def test_a_replacement_counts_only_after_min_ready_seconds() -> None:
    old, fresh = pod("old", 1), pod("new", 30, ready_since=40)
    rotation = Rotation(replicas=2, min_ready_seconds=10)
    assert next_step([old, fresh], {"uid-old"}, rotation, now=45).phase is Phase.WAIT
    assert next_step([old, fresh], {"uid-old"}, rotation, now=50).evict == (old,)


def test_a_pod_whose_eviction_was_accepted_counts_as_gone_before_it_shows_terminating() -> None:
    pods = [pod("a", 1), pod("b", 1)]
    step = next_step(pods, targets(pods, 10), Rotation(replicas=2), now=20,
                     evicting=frozenset({"uid-a"}))  # fmt: skip
    assert step.phase is Phase.WAIT, "a is being replaced: b waits"
    assert step.remaining == 1


def test_ordered_workloads_evict_the_highest_ordinal_alone_and_only_when_none_is_short() -> None:
    pods = [pod(f"db-{i}", 1, ordinal=i) for i in range(3)]
    rotation = Rotation(replicas=3, max_unavailable=3, ordered=True)
    assert next_step(pods, targets(pods, 10), rotation, now=20).evict == (pods[2],)
    fresh = dataclasses.replace(pods[2], uid="uid-db-2b", created=21, ready=False)
    step = next_step([pods[0], pods[1], fresh], targets(pods, 10), rotation, now=22)
    assert step.phase is Phase.WAIT


def test_done_when_no_target_is_left_and_nothing_is_short() -> None:
    pods = [pod("new", 30)]
    assert next_step(pods, frozenset({"uid-old"}), Rotation(replicas=1), now=40).phase is Phase.DONE
    assert next_step([], frozenset(), Rotation(replicas=0), now=40).phase is Phase.DONE


def test_failed_when_still_short_after_the_deadline_since_the_last_eviction() -> None:
    pods = [pod("a", 1), pod("replacement", 30, ready=False)]
    rotation = Rotation(replicas=2, deadline=60)
    waiting = next_step(pods, {"uid-a"}, rotation, now=80, last_eviction=30)  # type: ignore[arg-type]
    failed = next_step(pods, {"uid-a"}, rotation, now=91, last_eviction=30)  # type: ignore[arg-type]
    assert waiting.phase is Phase.WAIT
    assert failed.phase is Phase.FAILED
    assert failed.reason == "1 of 2 pods not available 60s after the last eviction"


# ---------------------------------------------------------------------- a simulated workload


@dataclasses.dataclass
class Cluster:
    """A workload's controller: an evicted pod terminates for a tick, then a replacement is
    created (same name for ordered workloads) and turns Ready `ready_after` ticks later."""

    replicas: int
    ordered: bool
    ready_after: int
    pods: dict[str, Pod] = dataclasses.field(default_factory=dict)
    pending: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    uids: itertools.count[int] = dataclasses.field(default_factory=itertools.count)

    def start(self) -> None:
        for i in range(self.replicas):
            self.create(f"w-{i}", now=0, ready_since=0)

    def create(self, name: str, now: int, ready_since: int | None) -> None:
        uid = f"u{next(self.uids)}"
        self.pods[uid] = Pod(uid, name, created=now, ready=ready_since is not None,
                             ready_since=ready_since, ordinal=ordinal_of(name))  # fmt: skip

    def evict(self, uid: str) -> None:
        self.pods[uid] = dataclasses.replace(self.pods[uid], terminating=True)

    def tick(self, now: int) -> None:
        for uid, p in list(self.pods.items()):
            if p.terminating:
                del self.pods[uid]
                name = p.name if self.ordered else f"w-r{next(self.uids)}"
                self.create(name, now=now, ready_since=None)
                self.pending.append((now + self.ready_after, name))
        for due, name in list(self.pending):
            if due <= now:
                self.pending.remove((due, name))
                uid = next(u for u, p in self.pods.items() if p.name == name and not p.ready)
                self.pods[uid] = dataclasses.replace(self.pods[uid], ready=True, ready_since=now)

    def unavailable(self, now: int, min_ready: float) -> int:
        live = [p for p in self.pods.values() if p.available(now, min_ready)]
        return self.replicas - len(live)


@settings(max_examples=250, deadline=None)
@given(
    replicas=st.integers(1, 12),
    share=st.floats(0.01, 1.0),
    ready_after=st.integers(0, 4),
    min_ready=st.sampled_from([0.0, 2.0]),
    ordered=st.booleans(),
    restart_at=st.one_of(st.none(), st.integers(11, 60)),
    lag=st.booleans(),
)
def test_a_rotation_evicts_each_target_once_within_budget_and_ends(
    replicas: int, share: float, ready_after: int, min_ready: float, ordered: bool,
    restart_at: int | None, lag: bool,
) -> None:  # fmt: skip
    cluster = Cluster(replicas, ordered, ready_after)
    cluster.start()
    budget = max(1, int(replicas * share))
    rotation = Rotation(replicas, budget, min_ready, ordered=ordered, deadline=1_000)
    stored = targets(cluster.pods.values(), changed_at=10.5)  # written before the first eviction
    evicted: list[Pod] = []
    evicting: set[str] = set()
    last: float | None = None
    seen = dict(cluster.pods)  # the controller's cache: one tick behind when `lag`
    for now in range(11, 400):
        if now == restart_at:  # SIGKILL: in-memory state gone, the cache re-listed
            evicting, last, seen = set(), None, dict(cluster.pods)
        before = dict(cluster.pods)
        step = next_step(seen.values(), stored, rotation, now, last_eviction=last,
                         evicting=frozenset(evicting))  # fmt: skip
        assert step.phase is not Phase.FAILED
        if step.phase is Phase.DONE:
            break
        if ordered:
            assert len(step.evict) <= 1
        for p in step.evict:
            evicted.append(p)
            evicting.add(p.uid)
            cluster.evict(p.uid)
            last = now
        assert cluster.unavailable(now, min_ready) <= budget
        cluster.tick(now + 1)
        seen = before if lag else dict(cluster.pods)  # `before`: this tick's evictions unseen
        evicting &= {u for u, p in seen.items() if not p.terminating}
    else:
        pytest.fail("the rotation never ended")
    assert sorted(p.uid for p in evicted) == sorted(stored), "each target once, no other pod"
    assert all(not p.terminating for p in cluster.pods.values())
    if ordered:
        ordinals = [p.ordinal for p in evicted]
        assert ordinals == sorted(ordinals, reverse=True), "the highest ordinal first"


# ---------------------------------------------------------------------- a workload's policy

S, M, P = (
    "kube-reloader.io/strategy",
    "kube-reloader.io/max-unavailable",
    "kube-reloader.io/pod-selector",
)


@pytest.mark.parametrize(
    ("kind", "annotations", "default", "strategy", "warned"),
    [("Deployment", {}, PodStrategy.PATCH, PodStrategy.PATCH, False),
     ("Deployment", {}, PodStrategy.EVICT, PodStrategy.EVICT, False),
     ("Job", {}, PodStrategy.EVICT, PodStrategy.PATCH, False),
     ("Rollout", {}, PodStrategy.EVICT, PodStrategy.PATCH, False),
     ("StatefulSet", {S: "evict"}, PodStrategy.PATCH, PodStrategy.EVICT, False),
     ("DaemonSet", {S: "patch"}, PodStrategy.EVICT, PodStrategy.PATCH, False),
     ("Deployment", {S: "evict", M: "0"}, PodStrategy.PATCH, PodStrategy.EVICT, True)],
)  # fmt: skip
def test_the_policy_follows_the_annotation_then_the_default_for_kinds_whose_pods_can_be_replaced(
    kind: str, annotations: dict[str, str], default: PodStrategy, strategy: PodStrategy,
    warned: bool,
) -> None:  # fmt: skip
    policy, warnings = policy_of(kind, annotations, default)
    assert policy is not None
    assert policy.strategy is strategy
    assert bool(warnings) is warned


@pytest.mark.parametrize(
    "annotations",
    [{S: "evcit"}, {S: "evict", P: "app in (a"}, {S: "evict", P: " "}, {S: "evict", P: "a" * 2000}],
)
def test_an_unreadable_policy_means_no_reload_rather_than_a_template_write(
    annotations: dict[str, str],
) -> None:
    policy, warnings = policy_of("Deployment", annotations)
    assert policy is None
    assert len(warnings) == 1
    assert "\n" not in warnings[0]


def test_evict_on_a_kind_whose_pods_cannot_be_replaced_is_refused_with_a_warning() -> None:
    policy, warnings = policy_of("CronJob", {S: "evict"})
    assert policy is None
    assert warnings == (
        "kube-reloader.io/strategy: evict is not supported for CronJob; not reloaded",
    )


def test_max_unavailable_and_the_pod_selector_are_read_with_evict() -> None:
    policy, _ = policy_of("Deployment", {S: "evict", M: "25%", P: "app=web,tier in (a,b)"})
    assert policy == PodPolicy(PodStrategy.EVICT, MaxUnavailable(25, percent=True),
                               "app=web,tier in (a,b)")  # fmt: skip
    assert str(policy.max_unavailable) == "25%"


@pytest.mark.parametrize(
    ("selector", "want"),
    [({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
     ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "y"]},
                            {"key": "canary", "operator": "DoesNotExist"},
                            {"key": "app", "operator": "Exists"}]}, "tier in (x,y),!canary,app"),
     ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "NotIn",
                                                        "values": ["2"]}]}, "a=1,b notin (2)")],
)  # fmt: skip
def test_a_workloads_selector_becomes_the_selector_its_pods_are_listed_with(
    selector: dict[str, object], want: str
) -> None:
    assert from_label_selector(selector) == want


@pytest.mark.parametrize(
    "selector",
    [None, {}, {"matchLabels": []}, {"matchExpressions": [{"key": "a", "operator": "Near"}]},
     {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
     {"matchExpressions": ["a"]}, {"matchLabels": {"bad key!": "1"}}],
)  # fmt: skip
def test_a_selector_that_selects_every_pod_or_cannot_be_read_is_refused(selector: object) -> None:
    with pytest.raises(SelectorError):
        from_label_selector(selector)


def test_an_ordered_workload_evicts_a_target_that_is_not_ready_before_any_other() -> None:
    pods = [pod("db-0", 1, ordinal=0), pod("db-1", 1, ready=False, ordinal=1),
            pod("db-2", 1, ordinal=2)]  # fmt: skip
    rotation = Rotation(replicas=3, ordered=True)
    step = next_step(pods, targets(pods, 10), rotation, now=20)
    assert [p.name for p in step.evict] == ["db-1"], "down anyway, even though one is short"


def test_nothing_to_replace_is_done_even_if_the_workload_is_short_for_other_reasons() -> None:
    pods = [pod("new", 30)]  # one of two replicas cannot be created (a quota, say)
    assert next_step(pods, frozenset(), Rotation(replicas=2), now=40).phase is Phase.DONE


def test_failed_when_short_from_the_start_and_no_target_may_be_evicted_by_the_deadline() -> None:
    pods = [pod("a", 1), pod("b", 1)]  # a third replica never comes
    rotation = Rotation(replicas=3, deadline=60)
    tgt = targets(pods, 10)
    assert next_step(pods, tgt, rotation, now=50, started=0).phase is Phase.WAIT
    failed = next_step(pods, tgt, rotation, now=61, started=0)
    assert failed.phase is Phase.FAILED
    assert failed.reason == "1 of 3 pods not available 60s after the rotation began"
