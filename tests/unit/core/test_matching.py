"""The decision table: every row of compat-spec §1.7 that concerns v1, and more; then Reloader
v2's rules (`--compat=v2`, read from its `pkg/matcher`): the rows where v2 decides the same,
and a table of its own where it does not."""

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


#: v1's rows that v2 decides otherwise (each has its v2 counterpart in V2_ROWS)
V1_ONLY = frozenset({
    "3 auto True is ParseBool true", "auto 1 and t are true too",
    "5 auto no opts out of auto-reload-all", "14 exclude on PA is ignored",
    "15 exclude on WA applies to a PA trigger",
})  # fmt: skip

V2_ROWS = [
    Row("v2 auto True is not true", wa={AUTO: "True"}),
    Row("v2 auto 1 and t are not true", wa={AUTO: "t", CM_AUTO: "1"}),
    Row("v2 typed auto TRUE is not true", wa={CM_AUTO: "TRUE"}),
    Row("v2 typed auto true", pa={CM_AUTO: "true"}, reload=True, reason=Reason.AUTO, auto=True, source=Source.POD_TEMPLATE),
    Row("v2 auto false opts out of auto-reload-all", wa={AUTO: "false"}, auto_reload_all=True),
    Row("v2 typed auto false opts out of auto-reload-all", pa={CM_AUTO: "false"}, auto_reload_all=True),
    Row("v2 auto no does not opt out of auto-reload-all", wa={AUTO: "no"}, auto_reload_all=True,
        reload=True, reason=Reason.AUTO_RELOAD_ALL, auto=True),
    Row("v2 auto False does not opt out of auto-reload-all", wa={AUTO: "False"}, auto_reload_all=True,
        reload=True, reason=Reason.AUTO_RELOAD_ALL, auto=True),
    Row("v2 exclude on PA applies when PA is read", pa={AUTO: "true", CM_EXCLUDE: "cm"}, reason=Reason.EXCLUDED,
        source=Source.POD_TEMPLATE),
    Row("v2 exclude on WA does not apply to a PA trigger", wa={CM_EXCLUDE: "cm"}, pa={AUTO: "true"},
        reload=True, reason=Reason.AUTO, auto=True, source=Source.POD_TEMPLATE),
    Row("v2 exclude on WA with no trigger anywhere", wa={CM_EXCLUDE: "cm"}, auto_reload_all=True, reason=Reason.EXCLUDED),
    Row("v2 exclude on PA with no trigger anywhere is not read", pa={CM_EXCLUDE: "cm"}, auto_reload_all=True,
        reload=True, reason=Reason.AUTO_RELOAD_ALL, auto=True),
    Row("v2 exclude on PA beats a PA named list", pa={CM_RELOAD: "cm", CM_EXCLUDE: "x, cm"}, reason=Reason.EXCLUDED),
]  # fmt: skip


def _row_decision(row: Row, *, v2: bool) -> Decision:
    return decide(
        rtype=row.rtype,
        name=row.name,
        resource_annotations=row.ra,
        kind=row.kind,
        workload_annotations=row.wa,
        template_annotations=row.pa,
        config=MatchConfig(
            auto_reload_all=row.auto_reload_all, ignored_workload_types=row.ignored_types, v2=v2
        ),
    )


def _check(row: Row, d: Decision) -> None:
    assert (d.reload, d.reason, d.auto) == (row.reload, row.reason, row.auto), d.message
    if row.source is not None:
        assert d.source is row.source
    assert d.message


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_decision_table(row: Row) -> None:
    _check(row, _row_decision(row, v2=False))


SHARED = [r for r in ROWS if r.id not in V1_ONLY and r.kind is WorkloadKind.DEPLOYMENT]


@pytest.mark.parametrize("row", SHARED, ids=[r.id for r in SHARED])
def test_v2_decides_v1s_rows_alike_where_the_versions_agree(row: Row) -> None:
    _check(row, _row_decision(row, v2=True))


@pytest.mark.parametrize("row", V2_ROWS, ids=[r.id for r in V2_ROWS])
def test_v2_decision_table(row: Row) -> None:
    _check(row, _row_decision(row, v2=True))


def test_every_row_v2_decides_otherwise_is_a_row_of_v1s_table() -> None:
    assert {r.id for r in ROWS} >= V1_ONLY


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


def test_a_v2_auto_value_other_than_true_or_false_is_a_warning_naming_it() -> None:
    d = _decide(workload_annotations={AUTO: "True"}, config=MatchConfig(v2=True))
    assert not d.reload
    assert d.warnings == (
        "reloader.stakater.com/auto='True' on the workload metadata is neither true nor false: "
        'not true, and only "false" opts out',
    )
    assert _decide(workload_annotations={AUTO: "false"}, config=MatchConfig(v2=True)).warnings == ()


def test_the_v2_opt_out_message_names_false_as_the_only_opt_out() -> None:
    config = MatchConfig(auto_reload_all=True, v2=True)
    d = _decide(workload_annotations={AUTO: "false"}, config=config)
    assert not d.reload
    assert '"false" opts out of --auto-reload-all' in d.message


@pytest.mark.parametrize(
    ("v2", "auto", "opted_out"),
    [(False, "false", True), (False, "0", True), (False, "no", False),
     (True, "false", True), (True, "0", False), (True, "False", False)],
)  # fmt: skip
def test_a_tls_secret_is_opted_out_of_by_a_false_auto_value_as_each_version_reads_it(
    v2: bool, auto: str, opted_out: bool
) -> None:
    d = _decide(
        rtype=ResourceType.SECRET,
        name="tls",
        workload_annotations={AUTO: auto},
        config=MatchConfig(reload_tls_secrets=True, v2=v2),
        resource_tls=True,
    )
    assert d.reload is not opted_out, d.message
