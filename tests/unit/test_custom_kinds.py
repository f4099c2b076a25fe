"""`--workload-kind=GROUP/VERSION/RESOURCE:PATH`: the flag's parser (total), the pod template
taken from PATH, the kind registered under its discovered name, and the writes at PATH."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.cli.flags import FlagError, parse
from kube_reloader.core import planning
from kube_reloader.core.customkinds import CustomKind, CustomKindError, parse_workload_kind
from kube_reloader.core.evicting import PodStrategy, policy_of
from kube_reloader.core.matching import MatchConfig
from kube_reloader.core.strategies import Strategy
from kube_reloader.kube import projections as p
from kube_reloader.kube.client import PatchType
from kube_reloader.runtime import kinds
from kube_reloader.runtime.cache import workload_entry
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.writing import KubeWriter
from tests.unit.runtime.fakes import EPOCH, KEYS, change
from tests.unit.runtime.test_writeseam import RecordingClient

PODSETS = "core.example.io/v1beta2/podsets:spec.pod.template"


@pytest.mark.parametrize(
    ("text", "want"),
    [("serving.knative.dev/v1/services:spec.template",
      CustomKind("serving.knative.dev", "v1", "services", ("spec", "template"))),
     (PODSETS, CustomKind("core.example.io", "v1beta2", "podsets", ("spec", "pod", "template")))],
)  # fmt: skip
def test_a_workload_kind_names_a_group_version_resource_and_the_templates_path(
    text: str, want: CustomKind
) -> None:
    assert parse_workload_kind(text) == want
    assert str(want) == text


@pytest.mark.parametrize(
    "text",
    ["", "services:spec.template", "v1/services:spec.template", "apps/v1/deployments:spec.template",
     "serving.knative.dev/v1/services", "serving.knative.dev/v1/services:template",
     "serving.knative.dev/v1/services:spec", "serving.knative.dev/v1/Services:spec.template",
     "serving.knative.dev/1/services:spec.template", "x.io/v1/s:spec..template",
     "x.io/v1/s:spec.a-b", "x.io/v1/s:" + ".".join(["spec"] * 9)],
)  # fmt: skip
def test_anything_else_is_refused_with_one_line(text: str) -> None:
    with pytest.raises(CustomKindError) as err:
        parse_workload_kind(text)
    assert "\n" not in str(err.value)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=600))
def test_the_parser_gives_a_kind_or_a_one_line_error_for_any_text(text: str) -> None:
    try:
        parse_workload_kind(text)
    except CustomKindError as err:
        assert "\n" not in str(err)  # noqa: PT017 - totality: every failure is this one class


def test_the_flag_repeats_and_refuses_a_resource_named_twice() -> None:
    opts = parse([f"--workload-kind={PODSETS}",
                  "--workload-kind=serving.knative.dev/v1/services:spec.template"], env={}).options  # fmt: skip
    assert [k.plural for k in opts.custom_kinds] == ["podsets", "services"]
    with pytest.raises(FlagError, match="named twice"):
        parse([f"--workload-kind={PODSETS}", f"--workload-kind={PODSETS}"], env={})
    with pytest.raises(FlagError, match="want GROUP/VERSION/RESOURCE:PATH"):
        parse(["--workload-kind=podsets"], env={})


POD_SET: dict[str, Any] = {
    "metadata": {"name": "ps", "namespace": "ns", "uid": "u1",
                 "annotations": {"reloader.stakater.com/auto": "true"}},
    "spec": {"replicas": 2, "pod": {"template": {"metadata": {"labels": {"app": "ps"}}, "spec": {
        "containers": [{"name": "main", "envFrom": [{"configMapRef": {"name": "cm"}}]}]}}}},
}  # fmt: skip


def test_the_pod_template_is_read_at_its_path_and_nothing_is_read_where_there_is_none() -> None:
    spec = kinds.custom("PodSet", parse_workload_kind(PODSETS))
    obj = msgspec.convert(POD_SET, spec.projection)
    w = workload_entry("PodSet", spec.workload(obj), KEYS).workload
    assert set(w.template.references()) == {(change().rtype, "cm")}
    assert (w.kind, w.uid) == ("PodSet", "u1")
    elsewhere = msgspec.convert({**POD_SET, "spec": {"pod": "not an object"}}, spec.projection)
    assert spec.workload(elsewhere).spec.template is None
    assert isinstance(spec.workload(obj), p.Workload)


def test_a_custom_kind_is_evictable_and_its_evict_annotation_is_honoured() -> None:
    spec = kinds.custom("PodSet", parse_workload_kind(PODSETS))
    assert spec.evictable
    policy, _ = policy_of("PodSet", {"kube-reloader.io/strategy": "evict"}, evictable=True)
    assert policy is not None
    assert policy.strategy is PodStrategy.EVICT


async def test_the_env_var_is_written_at_the_templates_path_by_a_guarded_json_patch() -> None:
    spec = kinds.custom("PodSet", parse_workload_kind(PODSETS))
    registry = BUILTIN.with_kind(spec)
    w = workload_entry("PodSet", spec.workload(msgspec.convert(POD_SET, spec.projection)),
                       KEYS).workload  # fmt: skip
    config = planning.Config(match=MatchConfig(), strategy=Strategy.ENV_VARS)
    plans = [planning.plan(change=change("cm", "2"), workload=w, config=config, now=int(EPOCH))]
    client = RecordingClient()
    await KubeWriter(client, registry, "Reloader").reload(  # type: ignore[arg-type]
        w, plans, now=dt.datetime.fromtimestamp(EPOCH, dt.UTC)
    )
    ((verb, plural, ptype, ops),) = client.calls
    assert (verb, plural, ptype) == ("patch", "podsets", PatchType.JSON)
    assert ops[0] == {"op": "test", "path": "/spec/pod/template/spec/containers/0/name",
                      "value": "main"}  # fmt: skip
    assert ops[-1]["path"] == "/spec/pod/template/spec/containers/0/env"


async def test_annotations_are_written_at_the_templates_path_by_a_json_merge_patch() -> None:
    spec = kinds.custom("PodSet", parse_workload_kind(PODSETS))
    w = workload_entry("PodSet", spec.workload(msgspec.convert(POD_SET, spec.projection)),
                       KEYS).workload  # fmt: skip
    config = planning.Config(match=MatchConfig(), strategy=Strategy.ANNOTATIONS)
    plans = [planning.plan(change=change("cm", "2"), workload=w, config=config, now=int(EPOCH))]
    client = RecordingClient()
    await KubeWriter(client, BUILTIN.with_kind(spec), "Reloader").reload(  # type: ignore[arg-type]
        w, plans, now=dt.datetime.fromtimestamp(EPOCH, dt.UTC)
    )
    ((_, _, ptype, body),) = client.calls
    assert ptype is PatchType.MERGE
    assert set(body["spec"]["pod"]["template"]["metadata"]["annotations"]) == {
        "reloader.stakater.com/last-reloaded-from",
        "kube-reloader.io/reloaded-hashes",
    }
