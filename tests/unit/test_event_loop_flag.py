"""`--event-loop`: which loop the controller runs on, refused in one line when it cannot be."""

from __future__ import annotations

import asyncio
import sys

import pytest

from kube_reloader.cli import eventloops
from kube_reloader.cli.flags import FlagError, parse


def test_auto_is_the_default_and_runs_on_uvloop_where_it_is_installed() -> None:
    import uvloop

    assert parse([]).event_loop == "auto"
    assert eventloops.loop_factory("auto") is uvloop.new_event_loop
    assert eventloops.loop_factory("asyncio") is None


def test_auto_falls_back_to_the_standard_loop_without_uvloop_or_with_the_tls_listener(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = ["--admission-addr=:9443"]
    assert parse(argv, env={"POD_NAMESPACE": "kube-system"}).event_loop == "auto"
    assert eventloops.loop_factory("auto", tls_listener=True) is None
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    assert parse([]).event_loop == "auto", "no error: the standard loop instead"
    assert eventloops.loop_factory("auto") is None


def test_uvloop_is_chosen_by_name_and_a_coroutine_runs_on_it() -> None:
    import uvloop

    assert parse(["--event-loop=uvloop"]).event_loop == "uvloop"
    factory = eventloops.loop_factory("uvloop")
    assert factory is not None

    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    with asyncio.Runner(loop_factory=factory) as runner:
        assert runner.run(which()).startswith("uvloop")
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--event-loop=trio"], "--event-loop: 'trio' is not one of auto, asyncio, uvloop"),
        (["--event-loop="], "--event-loop: '' is not one of auto, asyncio, uvloop"),
    ],
    ids=["another library", "empty"],
)
def test_a_loop_that_is_not_offered_is_refused_in_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(FlagError) as err:
        parse(argv)
    assert str(err.value) == message


def test_uvloop_asked_for_where_it_is_not_installed_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    with pytest.raises(FlagError) as err:
        parse(["--event-loop=uvloop"])
    assert str(err.value) == (
        "--event-loop=uvloop: uvloop is not installed (pip install 'kube-reloader[uvloop]')"
    )


def test_uvloop_with_the_admission_webhooks_tls_listener_is_refused_in_one_line() -> None:
    argv = ["--event-loop=uvloop", "--admission-addr=:9443"]
    with pytest.raises(FlagError) as err:
        parse(argv, env={"POD_NAMESPACE": "kube-system"})
    assert str(err.value) == (
        "--event-loop=uvloop: not with --admission-addr (its TLS listener needs asyncio's loop)"
    )
    assert parse(argv[1:], env={"POD_NAMESPACE": "kube-system"}).event_loop == "auto"
