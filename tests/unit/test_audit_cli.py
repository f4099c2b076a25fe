"""`kube-reloader audit`: usage errors are one line and exit 2; the report renders as text or
json with every field a user needs (no API server needed here; the cluster run is in
tests/integration/test_audit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kube_reloader.cli import audit, main
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.staleness import Finding, Reason
from kube_reloader.core.x509 import Validity
from kube_reloader.runtime.auditing import Report

NATS = Finding(ObjectKey("Deployment", "tenant", "nats"), ResourceType.SECRET, "nats-tls",
               Reason.NO_ANNOTATION, "no reload annotation for Secrets on the workload or its pod template",
               1_780_000_000.0, 1_779_990_000.0, 2, 3, tls=True,
               validity=Validity(1_780_000_000.0, 1_787_776_000.0))  # fmt: skip
REPORT = Report(findings=[NATS], workloads=200, namespaces_read=1)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--cluster", "-n", "x"], "--cluster and -n are exclusive"),
        (["--reload-strategy=bogus"], "--reload-strategy"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "error: "),
    ],
)
def test_a_usage_or_connection_error_is_one_line_and_exits_2(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *argv]) == 2
    err = capsys.readouterr().err
    assert error in err
    assert err.count("\n") == 1


def test_the_text_report_names_the_workload_resource_reason_and_certificate() -> None:
    text = audit.render_text(REPORT)
    assert "Deployment tenant/nats: Secret/nats-tls changed at 2026-05-28T20:26:40Z" in text
    assert "2 of 3 pod(s) started before" in text
    assert "not reloaded: no_annotation: no reload annotation" in text
    assert "certificate: notBefore 2026-05-28T20:26:40Z, notAfter 2026-08-26T20:26:40Z" in text
    assert text.endswith("1 stale (workload, resource) pair(s) among 200 workload(s)\n")


def test_the_json_report_is_one_document_with_every_finding() -> None:
    doc = json.loads(audit.render_json(REPORT))
    assert doc["workloads"] == 200
    assert doc["errors"] == []
    assert doc["stale"] == [NATS.to_dict()]
    assert doc["stale"][0]["certificate"]["notAfter"] == "2026-08-26T20:26:40Z"


def test_an_unreadable_kubeconfig_is_reported_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [a kubeconfig")
    assert main(["audit", "--kubeconfig", str(bad)]) == 2
    assert "Traceback" not in capsys.readouterr().err
