"""core.admitting: the webhook writes exactly what the controller would, and reads hostile
reviews without raising; how long a review may take, and which workloads are key-level."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import admitting, hashing, planning, scoping, strategies
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import Outcome
from tests import builders

CM = ResourceType.CONFIGMAP
SECRET = ResourceType.SECRET
H1 = hashing.configmap_hash({"v": "1"})
H2 = hashing.configmap_hash({"v": "2"})
NOW = 1_700_000_000


def apply_ops(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A JSONPatch applier for the operations the webhook emits (add, replace)."""
    out = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node: Any = out
        for p in parts[:-1]:
            node = node[int(p)] if isinstance(node, list) else node[p]
        last = parts[-1]
        if isinstance(node, list):
            if last == "-":
                node.append(op["value"])
            elif op["op"] == "add":
                node.insert(int(last), op["value"])
            else:
                node[int(last)] = op["value"]
        else:
            if op["op"] == "replace":
                assert last in node, op
            node[last] = op["value"]
    return out


def review(obj: dict[str, Any], operation: str = "CREATE", old: Any = None) -> bytes:
    request: dict[str, Any] = {
        "uid": "u-1", "operation": operation, "namespace": "ns", "object": obj,
    }  # fmt: skip
    if old is not None:
        request["oldObject"] = old
    doc = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(doc).encode()


def parsed(body: bytes) -> admitting.Review:
    p = admitting.parse_review(body)
    assert p.review is not None, p.error
    return p.review


def env_deployment(env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    obj = builders.auto_deployment("w", "ns", configmaps=("cfg",), secrets=("sec",))
    if env is not None:
        obj["spec"]["template"]["spec"]["containers"][0]["env"] = env
    return obj


def annotated_deployment() -> dict[str, Any]:
    obj = builders.auto_deployment("w", "ns", configmaps=("cfg",), secrets=("sec",))
    del obj["spec"]["template"]["metadata"]
    return obj


def two_containers() -> dict[str, Any]:
    tmpl = builders.pod_template(
        {"app": "w"},
        containers=[builders.container("side"),
                    builders.container("app", env_from_configmaps=("cfg",))],
    )  # fmt: skip
    return builders.deployment("w", "ns", template=tmpl, annotations=builders.AUTO)


def cronjob() -> dict[str, Any]:
    tmpl = builders.pod_template(
        {"c": "w"}, containers=[builders.container("app", env_from_configmaps=("cfg",))],
        restart_policy="Never",
    )  # fmt: skip
    return builders.cronjob("w", "ns", template=tmpl, annotations=builders.AUTO)


ENV = planning.Config()
ANNOTATIONS = planning.Config(strategy=strategies.Strategy.ANNOTATIONS)
V2 = planning.Config(compat=strategies.Compat.V2)
BOTH = {(CM, "cfg"): planning.Change(CM, "ns", "cfg", H1),
        (SECRET, "sec"): planning.Change(SECRET, "ns", "sec", H2)}  # fmt: skip
ONE = {(CM, "cfg"): planning.Change(CM, "ns", "cfg", H1)}

CASES = [
    ("no env list yet", env_deployment(), ENV, BOTH),
    ("an older hash is replaced", env_deployment(
        [{"name": "STAKATER_CFG_CONFIGMAP", "value": "old"}, {"name": "X", "value": "y"}]),
     ENV, BOTH),
    ("an env list without ours", env_deployment([{"name": "X", "value": "y"}]), ENV, BOTH),
    ("annotations strategy, no template metadata", annotated_deployment(), ANNOTATIONS, BOTH),
    ("annotations strategy, existing annotations", env_deployment(), ANNOTATIONS, ONE),
    ("v2 wire format", env_deployment(), V2, BOTH),
    ("the referencing container is the second", two_containers(), ENV, ONE),
    ("a CronJob's template is under jobTemplate", cronjob(), ENV, ONE),
]  # fmt: skip


@pytest.mark.parametrize(("what", "obj", "config", "changes"), CASES, ids=[c[0] for c in CASES])
def test_after_the_webhook_the_controller_finds_every_reference_up_to_date(
    what: str, obj: dict[str, Any], config: planning.Config,
    changes: dict[admitting.Reference, planning.Change],
) -> None:  # fmt: skip
    r = parsed(review(obj))
    workload = admitting.workload_of(r)
    assert isinstance(workload, planning.Workload)
    before = [
        planning.plan(change=c, workload=workload, config=config, now=NOW).outcome
        for c in changes.values()
    ]
    assert Outcome.RELOAD in before
    result = admitting.admit(workload=workload, obj=r.obj, changes=changes, config=config, now=NOW)
    assert result.ops
    mutated = apply_ops(dict(r.obj), result.ops)
    after = planning.workload_from_manifest(mutated)
    for change in changes.values():
        p = planning.plan(change=change, workload=after, config=config, now=NOW + 60)
        assert p.outcome is Outcome.UP_TO_DATE, (what, p.message)


def test_a_workload_already_current_gets_no_operations() -> None:
    obj = env_deployment([{"name": "STAKATER_CFG_CONFIGMAP", "value": H1}])
    r = parsed(review(obj))
    workload = admitting.workload_of(r)
    assert isinstance(workload, planning.Workload)
    result = admitting.admit(workload=workload, obj=r.obj, changes=ONE, config=ENV, now=NOW)
    assert result.ops == []
    assert any("already has" in reason for reason in result.reasons)


def test_a_workload_without_reload_annotations_is_left_unchanged() -> None:
    obj = env_deployment()
    obj["metadata"].pop("annotations")
    r = parsed(review(obj))
    workload = admitting.workload_of(r)
    assert isinstance(workload, planning.Workload)
    assert (
        admitting.admit(workload=workload, obj=r.obj, changes=BOTH, config=ENV, now=NOW).ops == []
    )


def test_an_evicting_workload_is_left_unchanged() -> None:
    obj = env_deployment()
    obj["metadata"]["annotations"]["kube-reloader.io/strategy"] = "evict"
    r = parsed(review(obj))
    workload = admitting.workload_of(r)
    assert isinstance(workload, planning.Workload)
    result = admitting.admit(workload=workload, obj=r.obj, changes=BOTH, config=ENV, now=NOW)
    assert result.ops == []


def test_references_are_the_configmaps_the_template_names_and_never_its_secrets() -> None:
    workload = admitting.workload_of(parsed(review(env_deployment())))
    assert isinstance(workload, planning.Workload)
    assert admitting.references(workload) == [(CM, "cfg")]


ROLLS = [
    ("a create", "CREATE", None, True),
    ("an update changing the image", "UPDATE", "image", True),
    ("an update changing only replicas", "UPDATE", "replicas", False),
    ("an update without the old object", "UPDATE", "none", False),
]


@pytest.mark.parametrize(("what", "op", "change", "want"), ROLLS, ids=[c[0] for c in ROLLS])
def test_only_a_write_that_rolls_anyway_is_mutated(
    what: str, op: str, change: str | None, want: bool
) -> None:
    new, old = env_deployment(), env_deployment()
    if change == "image":
        new["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.local/app:2"
    if change == "replicas":
        new["spec"]["replicas"] = 5
    r = parsed(review(new, op, None if change in (None, "none") else old))
    assert admitting.rolls_anyway(r)[0] is want, what


BAD = [
    ("not JSON", b"{nope"),
    ("not UTF-8", b"\xff\xfe"),
    ("JSON but not an object", b"[1,2]"),
    ("wrong kind", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "X",
                               "request": {"uid": "u"}}).encode()),
    ("no uid", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": {"operation": "CREATE", "object": {}}}).encode()),
    ("a delete", review(env_deployment(), "DELETE")),
    ("deeply nested", b"[" * 5000 + b"]" * 5000),
    ("too big", b" " * (admitting.MAX_REVIEW_BYTES + 1)),
]  # fmt: skip


@pytest.mark.parametrize(("what", "body"), BAD, ids=[c[0] for c in BAD])
def test_an_unreadable_review_has_a_one_line_reason(what: str, body: bytes) -> None:
    p = admitting.parse_review(body)
    assert p.review is None
    assert p.error, what
    assert "\n" not in p.error


def test_the_response_is_allowed_and_carries_the_operations_as_base64_json_patch() -> None:
    ops = [{"op": "add", "path": "/a", "value": 1}]
    answer = admitting.response("u-1", ops)["response"]
    assert answer["allowed"] is True
    assert answer["uid"] == "u-1"
    assert answer["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["patch"])) == ops
    assert "patch" not in admitting.response("u-1")["response"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(obj=json_values, op=st.sampled_from(["CREATE", "UPDATE", "DELETE", 3]), old=json_values)
def test_hostile_review_objects_never_raise(obj: Any, op: Any, old: Any) -> None:
    body = json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": op, "namespace": "ns", "object": obj, "oldObject": old},
    }).encode()  # fmt: skip
    p = admitting.parse_review(body)
    if p.review is None:
        return
    admitting.rolls_anyway(p.review)
    workload = admitting.workload_of(p.review)
    if isinstance(workload, str):
        return
    admitting.admit(workload=workload, obj=p.review.obj, changes=BOTH, config=ENV, now=NOW)


@settings(max_examples=200, deadline=None)
@given(
    containers=st.lists(
        st.fixed_dictionaries({"name": st.text(max_size=4) | st.integers(),
                               "env": json_values, "envFrom": json_values}),
        max_size=3,
    ),
    annotations=json_values,
)  # fmt: skip
def test_hostile_pod_templates_never_raise(containers: Any, annotations: Any) -> None:
    obj = env_deployment()
    obj["metadata"]["annotations"] = annotations
    obj["spec"]["template"]["spec"]["containers"] += containers
    p = admitting.parse_review(review(obj))
    assert p.review is not None
    workload = admitting.workload_of(p.review)
    if isinstance(workload, str):
        return
    admitting.admit(workload=workload, obj=p.review.obj, changes=BOTH, config=ENV, now=NOW)


def test_a_valid_review_of_four_mebibytes_is_refused_unparsed() -> None:
    obj = env_deployment()
    obj["metadata"]["annotations"] = {"pad": "x" * (4 * 1024 * 1024)}
    p = admitting.parse_review(review(obj))
    assert p.review is None
    assert p.error is not None
    assert "over" in p.error


FORGED = [
    ("the object names another namespace", {"namespace": "victim"}, "ns"),
    ("the metadata is not a mapping", ["name"], "ns"),
    ("the request names no namespace", {"name": "w"}, ""),
]


@pytest.mark.parametrize(("what", "meta", "ns"), FORGED, ids=[f[0] for f in FORGED])
def test_a_forged_review_is_refused_with_a_reason_when(what: str, meta: Any, ns: str) -> None:
    obj = env_deployment()
    obj["metadata"] = meta
    doc = json.loads(review(obj))
    doc["request"]["namespace"] = ns
    p = admitting.parse_review(json.dumps(doc).encode())
    assert p.review is None, what
    assert p.uid == "u-1"
    assert p.error


@pytest.mark.parametrize(
    ("timeout", "budget"),
    [
        ("2s", 1.5),  # the chart's timeoutSeconds
        ("1s", 0.5),
        ("10s", admitting.MAX_BUDGET),  # the API server's default: the edge's own bound
        ("1m0s", admitting.MAX_BUDGET),
        ("1.2s", 0.7),
        (None, admitting.MAX_BUDGET),  # named no timeout: the API server's default
        ("", admitting.MAX_BUDGET),
        ("0s", admitting.MAX_BUDGET),
        ("-5s", admitting.MAX_BUDGET),
        ("soon", admitting.MAX_BUDGET),
        ("9" * 5000 + "s", admitting.MAX_BUDGET),
        ("100ms", admitting.MIN_BUDGET),
    ],
)
def test_a_reviews_budget_is_the_api_servers_timeout_less_a_margin_within_bounds(
    timeout: str | None, budget: float
) -> None:
    assert admitting.answer_budget(timeout) == pytest.approx(budget)


@given(st.text(max_size=40))
def test_the_budget_of_any_timeout_text_is_within_its_bounds(text: str) -> None:
    assert admitting.MIN_BUDGET <= admitting.answer_budget(text) <= admitting.MAX_BUDGET


def keyed(where: str, value: str = "keys") -> planning.Workload:
    obj = builders.auto_deployment("w", "ns", configmaps=("cfg",))
    meta = obj["metadata"] if where == "workload" else obj["spec"]["template"]["metadata"]
    meta.setdefault("annotations", {})["kube-reloader.io/reload-scope"] = value
    parsed = admitting.parse_review(review(obj))
    assert parsed.review is not None
    workload = admitting.workload_of(parsed.review)
    assert isinstance(workload, planning.Workload)
    return workload


@pytest.mark.parametrize(
    ("where", "value", "default", "expected"),
    [
        ("workload", "keys", "object", True),
        ("template", "keys", "object", True),
        ("workload", "object", "keys", False),
        ("workload", "nonsense", "keys", True),  # the default applies
        ("workload", "nonsense", "object", False),
    ],
)
def test_a_workload_is_key_scoped_as_the_controller_reads_its_scope(
    where: str, value: str, default: str, expected: bool
) -> None:
    config = planning.Config(scope=scoping.Scope(default))
    assert admitting.key_scoped(keyed(where, value), config) is expected


@pytest.mark.parametrize("namespace", ["Bad", "ns,metadata.name!=x", "a" * 64, "-ns", "ns/x"])
def test_a_request_whose_namespace_is_not_a_namespace_name_is_not_a_review(
    namespace: str,
) -> None:
    obj = builders.auto_deployment("w", None, configmaps=("cfg",))
    doc = json.loads(review(obj))
    doc["request"]["namespace"] = namespace
    parsed = admitting.parse_review(json.dumps(doc).encode())
    assert parsed.review is None
    assert parsed.error == "the request's namespace is not a namespace name"
