"""The benchmark's bookkeeping of final states: two concurrent patches of one ConfigMap can
be answered in either order, and the final state is what the API server committed last."""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any

from bench import analysis
from bench.observation import Observation
from bench.runs import Plan, Run, Scenario

from kube_reloader.core import hashing

CM = ("CONFIGMAP", "ns", "cfg")
WORKLOAD = ("Deployment", "ns", "w")
VAR = ("ENV", "STAKATER_CFG_CONFIGMAP")


class AnsweringClient:
    """Answers each patch with the next (resourceVersion, data) given, whatever was sent."""

    def __init__(self, answers: list[tuple[str, dict[str, str]]]) -> None:
        self.answers = answers

    async def patch(self, *_: Any, **__: Any) -> dict[str, Any]:
        version, data = self.answers.pop(0)
        return {"metadata": {"resourceVersion": version}, "data": data}


async def _noop(*_: Any) -> Any:
    return None


def run_with(answers: list[tuple[str, dict[str, str]]]) -> Run:
    scenario = Scenario("T", "test", _noop, _noop)
    plan = Plan(["ns"], affects={CM: [WORKLOAD]}, workloads=[WORKLOAD])
    run = Run(scenario, "kube-reloader", AnsweringClient(answers), plan,  # type: ignore[arg-type]
              random.Random(0), 1.0, argparse.Namespace())  # fmt: skip
    for _ in answers[:]:
        asyncio.run(run.update("CONFIGMAP", "ns", "cfg", {"v": "sent"}))
    return run


def seen(t: float, data: dict[str, str]) -> Observation:
    return Observation(t, WORKLOAD, 2, {VAR: hashing.configmap_hash(data)}, False)


def test_the_final_state_is_the_highest_resource_version_not_the_last_answer_read() -> None:
    # "b" was committed last (version 12) but its answer was read first
    run = run_with([("12", {"v": "b"}), ("11", {"v": "a"})])
    assert [h for _, _, h in run.updates][-1] == hashing.configmap_hash({"v": "a"})
    assert run.final()[CM][1] == hashing.configmap_hash({"v": "b"})
    t_b = run.final()[CM][0]
    carrying_b = [seen(t_b + 0.5, {"v": "b"})]
    assert analysis.convergence(run, carrying_b) == (0, 0.5)
    carrying_a = [seen(t_b + 0.5, {"v": "a"})]
    assert analysis.convergence(run, carrying_a)[0] == 1, "the superseded content is not final"


def test_answers_read_in_commit_order_keep_the_last_one() -> None:
    run = run_with([("11", {"v": "a"}), ("12", {"v": "b"})])
    assert run.final()[CM][1] == hashing.configmap_hash({"v": "b"})
    run.clear_updates()
    assert run.final() == {}
    assert run.updates == []


def template_annotated(value: str) -> dict[str, Any]:
    annotations = {"reloader.stakater.com/last-reloaded-from": value}
    return {"spec": {"template": {"metadata": {"annotations": annotations}, "spec": {}}}}


def test_the_annotation_strategy_is_read_in_both_reloader_formats() -> None:
    from bench.observation import carried_hashes

    v1 = '{"type":"CONFIGMAP","name":"cfg","namespace":"ns","hash":"h1","containerRefs":["app"]}'
    v2 = '{"kind":"configmap","name":"cfg","namespace":"ns","hash":"h2","containers":["app"]}'
    assert carried_hashes(template_annotated(v1)) == {("CONFIGMAP", "cfg"): "h1"}
    assert carried_hashes(template_annotated(v2)) == {("CONFIGMAP", "cfg"): "h2"}
    assert carried_hashes(template_annotated("[1, 2]")) == {}
    assert carried_hashes(template_annotated('{"kind": "configmap"}')) == {}
    assert carried_hashes(template_annotated("not json")) == {}
