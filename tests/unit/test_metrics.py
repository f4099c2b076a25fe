"""Metric names are a public interface: Reloader's exactly, ours under kube_reloader_."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp

from kube_reloader import metrics
from kube_reloader.edges.plainhttp import Routes
from kube_reloader.edges.serving import Health, Server, build_app, split_addr


@contextlib.asynccontextmanager
async def listening(routes: Routes) -> AsyncIterator[aiohttp.ClientSession]:
    """`routes` served on a free loopback port; yields a client session based there."""
    server = Server(routes, "127.0.0.1:0")
    await server.start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{server.port}") as session:
            yield session
    finally:
        await server.stop()


RELOADER_V1 = [
    "reloader_action_latency_seconds", "reloader_action_total", "reloader_errors_total",
    "reloader_events_processed_total", "reloader_events_received_total",
    "reloader_reconcile_duration_seconds", "reloader_reconcile_total",
    "reloader_reload_executed_total", "reloader_retries_total", "reloader_skipped_total",
    "reloader_workloads_matched_total", "reloader_workloads_scanned_total",
    "reloader_workqueue_adds_total", "reloader_workqueue_depth", "reloader_workqueue_latency_seconds",
]  # fmt: skip
#: client-go's, registered by Reloader v1 with these labels (its metrics adapters)
CLIENT_GO = ["rest_client_request_duration_seconds", "rest_client_requests_total"]
OURS = [
    "kube_reloader_api_requests_total", "kube_reloader_coalesced_total", "kube_reloader_decisions_total",
    "kube_reloader_deferred_total", "kube_reloader_dropped_total",
    "kube_reloader_event_loop_lag_max_seconds", "kube_reloader_event_loop_lag_seconds",
    "kube_reloader_evictions_total", "kube_reloader_halted",
    "kube_reloader_leader",
    "kube_reloader_object_errors_total",
    "kube_reloader_pauses_total",
    "kube_reloader_ready", "kube_reloader_reconciles_total", "kube_reloader_reload_latency_seconds", "kube_reloader_rollout_duration_seconds",
    "kube_reloader_reverted_total", "kube_reloader_rollouts_total",
    "kube_reloader_side_channel_total", "kube_reloader_stale_workloads",
    "kube_reloader_task_restarts_total",
]  # fmt: skip


def test_golden_metric_names() -> None:
    names = [
        n
        for n in metrics.names(metrics.Recorder(by_namespace=False))
        if not n.startswith("process_")
    ]
    assert names == sorted(OURS + RELOADER_V1 + CLIENT_GO)


def test_client_gos_request_metrics_have_reloaders_labels_and_buckets() -> None:
    recorder = metrics.Recorder(by_namespace=False)
    recorder.api_request("GET", "200", "10.96.0.1:443")
    recorder.api_request("PATCH", "<error>", "10.96.0.1:443")
    recorder.api_request_done("GET", "10.96.0.1:443", 0.02)
    text = recorder.exposition().decode()
    assert 'rest_client_requests_total{code="200",host="10.96.0.1:443",method="GET"} 1.0' in text
    assert (
        'rest_client_requests_total{code="<error>",host="10.96.0.1:443",method="PATCH"} 1.0' in text
    )
    buckets = [
        line.split('le="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("rest_client_request_duration_seconds_bucket")
    ]
    assert buckets == ["0.001", "0.01", "0.05", "0.1", "0.5", "1.0", "5.0", "10.0", "30.0", "+Inf"]
    assert 'rest_client_request_duration_seconds_count{host="10.96.0.1:443",verb="GET"} 1.0' in text
    # our own counter keeps its labels and values
    assert 'kube_reloader_api_requests_total{code="error",verb="PATCH"} 1.0' in text


def test_reload_executed_is_pre_initialised_with_both_labels() -> None:
    text = metrics.Recorder(by_namespace=False).exposition().decode()
    assert 'reloader_reload_executed_total{success="true"} 0.0' in text
    assert 'reloader_reload_executed_total{success="false"} 0.0' in text
    assert "_created" not in text


def test_by_namespace_family_has_reloaders_exact_name_only_when_enabled() -> None:
    off = metrics.Recorder(by_namespace=False)
    off.reload_done(kind="Deployment", namespace="a", success=True, seconds=0.01)
    assert metrics.BY_NAMESPACE not in off.exposition().decode()
    on = metrics.Recorder(by_namespace=True)
    on.reload_done(kind="Deployment", namespace="a", success=True, seconds=0.01)
    on.reload_done(kind="Deployment", namespace="b", success=False, seconds=None)
    text = on.exposition().decode()
    assert "# TYPE reloader_reload_executed_total_by_namespace counter" in text
    assert 'reloader_reload_executed_total_by_namespace{namespace="a",success="true"} 1.0' in text
    assert 'reloader_reload_executed_total_by_namespace{namespace="b",success="false"} 1.0' in text
    assert 'reloader_action_total{result="success",workload_kind="Deployment"} 1.0' in text
    assert "kube_reloader_reload_latency_seconds_count" in text


async def test_live_readyz_and_metrics_endpoints() -> None:
    recorder = metrics.Recorder(by_namespace=False)
    health = Health()
    async with listening(build_app(recorder, health)) as client:
        live = await client.get("/live")
        assert (live.status, await live.text()) == (200, "alive")
        assert (await client.get("/readyz")).status == 503
        health.synced = True
        ready = await client.get("/readyz")
        assert (ready.status, await ready.text()) == (200, "ok (single)")
        health.ha, health.leader = True, False
        assert await (await client.get("/readyz")).text() == "ok (standby)"
        health.lost_lease = True
        assert (await client.get("/live")).status == 500
        m = await client.get("/metrics")
        assert m.headers["Content-Type"].startswith("text/plain")
        assert "reloader_reload_executed_total" in await m.text()


def test_listen_addresses() -> None:
    assert split_addr(":9090") == ("0.0.0.0", 9090)  # noqa: S104
    assert split_addr("127.0.0.1:6060") == ("127.0.0.1", 6060)
    assert split_addr("[::1]:6060") == ("::1", 6060)


async def test_readyz_and_live_report_the_supervisors_failing_and_dead_tasks() -> None:
    failing: list[str] = []
    dead: list[str] = []
    health = Health(synced=True, failing=lambda: failing, dead=lambda: dead)
    async with listening(build_app(metrics.Recorder(by_namespace=False), health)) as c:
        assert (await c.get("/readyz")).status == 200
        failing.append("watch/configmaps")
        ready = await c.get("/readyz")
        assert (ready.status, await ready.text()) == (
            503,
            "tasks failing: watch/configmaps (single)",
        )
        assert (await c.get("/live")).status == 200
        dead.append("watch/configmaps")
        live = await c.get("/live")
        assert (live.status, await live.text()) == (500, "tasks keep crashing: watch/configmaps")


def test_the_event_loop_lag_has_a_bucket_at_the_tenant_proofing_bound() -> None:
    recorder = metrics.Recorder(by_namespace=False)
    recorder.event_loop_lag(0.3, 0.3)
    recorder.event_loop_lag(0.01, 0.3)
    get = recorder.registry.get_sample_value
    assert get("kube_reloader_event_loop_lag_seconds_bucket", {"le": "0.25"}) == 1.0
    assert get("kube_reloader_event_loop_lag_seconds_count") == 2.0
    assert get("kube_reloader_event_loop_lag_max_seconds") == 0.3


def test_the_stale_series_cap_is_cut_fairly_and_what_is_left_out_counted_per_namespace() -> None:
    recorder = metrics.Recorder(by_namespace=False)
    hog = {("hog", "Deployment", f"w{i}", "ConfigMap/c") for i in range(metrics.MAX_STALE_SERIES)}
    small = {("small", "Deployment", f"w{i}", "ConfigMap/c") for i in range(10)}
    left_out = recorder.set_stale_workloads(hog | small)
    assert left_out == {"hog": 10}, "the small namespace keeps all of its pairs"
    get = recorder.registry.get_sample_value
    assert (
        get(
            "kube_reloader_stale_workloads",
            {"namespace": "small", "kind": "Deployment", "name": "w3", "resource": "ConfigMap/c"},
        )
        == 1
    )
    assert get("kube_reloader_dropped_total", {"namespace": "hog", "what": "stale_series"}) == 10


async def test_the_exposition_off_the_loop_is_the_same_text_and_lets_the_loop_run() -> None:
    import asyncio

    recorder = metrics.Recorder(by_namespace=False)
    recorder.set_stale_workloads(
        {("ns", "Deployment", f"w{i}", "ConfigMap/c") for i in range(metrics.MAX_STALE_SERIES)}
    )
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.ensure_future(tick())
    text = await recorder.exposition_soon()
    task.cancel()
    assert ticks > 1, "the loop ran while the 10,000 series were formatted"
    assert text.count(b"kube_reloader_stale_workloads{") == metrics.MAX_STALE_SERIES
