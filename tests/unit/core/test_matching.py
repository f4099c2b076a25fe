"""The decision table: every row of compat-spec §1.7 that concerns v1, and more."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kube_reloader.core.matching import Decision, MatchConfig, Reason, Source, decide
from kube_reloader.core.objects import ResourceType, WorkloadKind

AUTO = "reloader.stakater.com/auto"
CM_AUTO = "configmap.reloader.stakater.com/auto"
SECRET_AUTO = "secret.reloader.stakater.com/auto"
CM_RELOAD = "configmap.reloader.stakater.com/reload"
SECRET_RELOAD = "secret.reloader.stakater.com/reload"
CM_EXCLUDE = "configmaps.exclude.reloader.stakater.com/reload"
SEARCH = "reloader.stakater.com/search"
MATCH = "reloader.stakater.com/match"
IGNORE = "reloader.stakater.com/ignore"


@dataclass(frozen=True)
class Row:
    id: str
    wa: dict[str, str] = field(default_factory=dict)
    pa: dict[str, str] = field(default_factory=dict)
    ra: dict[str, str] = field(default_factory=dict)
    name: str = "cm"
    rtype: ResourceType = ResourceType.CONFIGMAP
    kind: WorkloadKind = WorkloadKind.DEPLOYMENT
    auto_reload_all: bool = False
    ignored_types: tuple[str, ...] = ()
    reload: bool = False
    reason: Reason = Reason.NO_MATCH
    auto: bool = False
    source: Source | None = None


ROWS = [
    Row("1 auto true", wa={AUTO: "true"}, reload=True, reason=Reason.AUTO, auto=True),
    Row("3 auto True is ParseBool true", wa={AUTO: "True"}, reload=True, reason=Reason.AUTO, auto=True),
    Row("auto 1 and t are true too", wa={AUTO: "t", CM_AUTO: "1"}, reload=True, reason=Reason.AUTO, auto=True),
    Row("auto yes is not a bool", wa={AUTO: "yes"}),
    Row("4 auto false opts out of auto-reload-all", wa={AUTO: "false"}, auto_reload_all=True),
    Row("5 auto no opts out of auto-reload-all", wa={AUTO: "no"}, auto_reload_all=True),
    Row("auto-reload-all with no annotation", auto_reload_all=True, reload=True, reason=Reason.AUTO_RELOAD_ALL, auto=True),
    Row("6 auto on the pod template only", pa={AUTO: "true"}, reload=True, reason=Reason.AUTO, auto=True, source=Source.POD_TEMPLATE),
    Row("7 other type's named key does not pin WA", wa={CM_RELOAD: "x"}, pa={AUTO: "true"}, name="s", rtype=ResourceType.SECRET,
        reload=True, reason=Reason.AUTO, auto=True, source=Source.POD_TEMPLATE),
    Row("8 search=false on WA pins WA", wa={SEARCH: "false"}, pa={AUTO: "true"}, source=Source.WORKLOAD),
    Row("9 named regex", wa={CM_RELOAD: "app-.*"}, name="app-config", reload=True, reason=Reason.NAMED),
    Row("10a a|b matches alpha", wa={CM_RELOAD: "a|b"}, name="alpha", reload=True, reason=Reason.NAMED),
    Row("10b a|b matches xb", wa={CM_RELOAD: "a|b"}, name="xb", reload=True, reason=Reason.NAMED),
    Row("10c a|b does not match xa", wa={CM_RELOAD: "a|b"}, name="xa"),
    Row("11 entries are anchored", wa={CM_RELOAD: "config"}, name="my-config"),
    Row("12 invalid regex is skipped", wa={CM_RELOAD: "["}),
    Row("12b invalid entry does not hide a valid one", wa={CM_RELOAD: "[, cm"}, reload=True, reason=Reason.NAMED),
    Row("list entries are trimmed", wa={CM_RELOAD: " other , cm "}, reload=True, reason=Reason.NAMED),
    Row("dot matches any character", wa={CM_RELOAD: "my.cm"}, name="myXcm", reload=True, reason=Reason.NAMED),
    Row("13 exclude on WA", wa={AUTO: "true", CM_EXCLUDE: "a, cm"}, reason=Reason.EXCLUDED),
    Row("14 exclude on PA is ignored", pa={AUTO: "true", CM_EXCLUDE: "cm"}, reload=True, reason=Reason.AUTO, auto=True),
    Row("15 exclude on WA applies to a PA trigger", wa={CM_EXCLUDE: "cm"}, pa={AUTO: "true"}, reason=Reason.EXCLUDED),
    Row("exclude is an exact name", wa={AUTO: "true", CM_EXCLUDE: "c.*"}, reload=True, reason=Reason.AUTO, auto=True),
    Row("16 ignore beats named", wa={CM_RELOAD: "cm"}, ra={IGNORE: "true"}, reason=Reason.RESOURCE_IGNORED),
    Row("17 ignore True is not ignore", wa={AUTO: "true"}, ra={IGNORE: "True"}, reload=True, reason=Reason.AUTO, auto=True),
    Row("18 search and match", wa={SEARCH: "true"}, ra={MATCH: "true"}, reload=True, reason=Reason.SEARCH, auto=True),
    Row("18b search without match", wa={SEARCH: "true"}),
    Row("19 match True falls to auto-reload-all", wa={SEARCH: "true"}, ra={MATCH: "True"}, auto_reload_all=True,
        reload=True, reason=Reason.AUTO_RELOAD_ALL, auto=True),
    Row("20 named wins over auto", wa={AUTO: "true", CM_RELOAD: "cm"}, reload=True, reason=Reason.NAMED),
    Row("21 other type's typed auto is irrelevant", wa={SECRET_AUTO: "false"}, auto_reload_all=True,
        reload=True, reason=Reason.AUTO_RELOAD_ALL, auto=True),
    Row("22 empty named pins WA and matches nothing", wa={CM_RELOAD: ""}, pa={AUTO: "true"}),
    Row("23 jobs ignored", wa={AUTO: "true"}, kind=WorkloadKind.JOB, ignored_types=("jobs",), reason=Reason.WORKLOAD_TYPE_IGNORED),
    Row("24 an invalid entry disables the type filter", wa={AUTO: "true"}, kind=WorkloadKind.JOB, ignored_types=("Jobs",),
        reload=True, reason=Reason.AUTO, auto=True),
    Row("cronjobs filter leaves deployments alone", wa={AUTO: "true"}, ignored_types=("cronjobs",), reload=True, reason=Reason.AUTO, auto=True),
    Row("typed auto for secrets", wa={SECRET_AUTO: "true"}, name="s", rtype=ResourceType.SECRET, reload=True, reason=Reason.AUTO, auto=True),
    Row("typed auto for secrets ignores configmaps", wa={SECRET_AUTO: "true"}),
    Row("secret named list", wa={SECRET_RELOAD: "db-.*"}, name="db-pass", rtype=ResourceType.SECRET, reload=True, reason=Reason.NAMED),
    Row("no annotations at all", reason=Reason.NO_MATCH),
    Row("nested repetition runs in linear time and does not match", wa={CM_RELOAD: "(a+)+"}, name="a" * 200 + "!"),
    Row("nested repetition matches like Go", wa={CM_RELOAD: "(a+)+"}, name="a" * 200, reload=True, reason=Reason.NAMED),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_decision_table(row: Row) -> None:
    d = decide(
        rtype=row.rtype,
        name=row.name,
        resource_annotations=row.ra,
        kind=row.kind,
        workload_annotations=row.wa,
        template_annotations=row.pa,
        config=MatchConfig(
            auto_reload_all=row.auto_reload_all, ignored_workload_types=row.ignored_types
        ),
    )
    assert (d.reload, d.reason, d.auto) == (row.reload, row.reason, row.auto), d.message
    if row.source is not None:
        assert d.source is row.source
    assert d.message


def _decide(**kw: object) -> Decision:
    base: dict[str, object] = {
        "rtype": ResourceType.CONFIGMAP, "name": "cm", "resource_annotations": {},
        "kind": WorkloadKind.DEPLOYMENT, "workload_annotations": {}, "template_annotations": {},
        "config": MatchConfig(),
    }  # fmt: skip
    base.update(kw)
    return decide(**base)  # type: ignore[arg-type]


def test_invalid_regex_entries_come_back_as_warnings_naming_the_annotation() -> None:
    d = _decide(workload_annotations={CM_RELOAD: "[,(?=x),cm"})
    assert d.reload
    assert len(d.warnings) == 2
    assert all(CM_RELOAD in w for w in d.warnings)
    assert "invalid regular expression '['" in d.warnings[0]
    assert "invalid perl operator: (?=" in d.warnings[1]


def test_reasons_are_human_readable() -> None:
    assert _decide(workload_annotations={AUTO: "true"}).message == (
        "reloader.stakater.com/auto='true' on the workload metadata"
    )
    assert (
        "matches 'app-.*'"
        in _decide(name="app-x", workload_annotations={CM_RELOAD: "app-.*"}).message
    )
    assert (
        "opts out of --auto-reload-all"
        in _decide(
            workload_annotations={AUTO: "no"}, config=MatchConfig(auto_reload_all=True)
        ).message
    )


def test_renamed_keys_are_honoured() -> None:
    from kube_reloader.core.annotations import Keys

    keys = Keys(auto="example.com/auto")
    assert not _decide(workload_annotations={AUTO: "true"}, config=MatchConfig(keys=keys)).reload
    assert _decide(
        workload_annotations={"example.com/auto": "true"}, config=MatchConfig(keys=keys)
    ).reload


def test_decisions_are_deterministic() -> None:
    kw = {"workload_annotations": {AUTO: "true", CM_RELOAD: "x|cm"}}
    assert _decide(**kw) == _decide(**kw)


def test_a_non_boolean_auto_value_is_a_warning_and_counts_as_false() -> None:
    d = _decide(workload_annotations={AUTO: "yes"})
    assert not d.reload
    assert d.warnings == (
        "reloader.stakater.com/auto='yes' on the workload metadata is not a boolean (true/false); "
        "treated as false",
    )
