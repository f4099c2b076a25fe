"""A watch stream's records and events: lines split wherever the chunks break, and events
decoded in one pass when they carry an object that fits, the long way otherwise."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kube_reloader.kube import errors, resources
from kube_reloader.kube.projections import Object
from kube_reloader.kube.streams import (
    MAX_LINE_BYTES,
    _Bookmark,
    _Events,
    _Lines,
    _RawEvent,
    _TypedEvent,
)


def _events(tp: Any) -> _Events:
    dec = msgspec.json.Decoder
    return _Events(
        resources.CONFIGMAPS, dec(tp), dec(_RawEvent), dec(_Bookmark), dec(_TypedEvent[tp])
    )


@pytest.mark.parametrize(
    ("chunks", "records"),
    [
        ([b"a\n"], [b"a"]),
        ([b"a\nb\n"], [b"a", b"b"]),
        ([b"a", b"b\nc", b"\n"], [b"ab", b"c"]),
        ([b"\n", b"\n\na\n"], [b"a"]),
        ([b"a\n", b"", b"b\n"], [b"a", b"b"]),
    ],
    ids=["one whole record", "two in a chunk", "split anywhere", "empty lines", "an empty chunk"],
)
def test_records_come_out_whole_and_in_order_wherever_the_chunks_break(
    chunks: list[bytes], records: list[bytes]
) -> None:
    lines = _Lines()
    out = [r for c in chunks for r in lines.feed(c)]
    assert out == records
    assert lines.rest() == []


def test_a_last_record_without_its_newline_is_kept_and_an_oversized_one_refused() -> None:
    lines = _Lines()
    assert lines.feed(b"a\nb") == [b"a"]
    lines.check()
    assert lines.rest() == [b"b"]
    big = _Lines()
    assert big.feed(b"x\n" + b"y" * (MAX_LINE_BYTES + 1)) == [b"x"], "what came before is passed on"
    with pytest.raises(errors.KubeError, match="larger than"):
        big.check()


def _line(**event: Any) -> bytes:
    return json.dumps(event).encode()


def test_an_event_with_an_object_is_the_same_decoded_in_one_pass_as_by_its_envelope() -> None:
    events = _events(Object)
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        line = _line(
            type=kind, object={"metadata": {"name": "a", "namespace": "n", "resourceVersion": "4"}}
        )
        one = events.decode(line)
        long_way = events._decode_envelope(line)
        assert one == long_way
        assert one.object.metadata.name == "a"


def test_bookmarks_errors_and_misfits_take_the_long_way() -> None:
    events = _events(Object)
    bookmark = events.decode(_line(type="BOOKMARK", object={"metadata": {"resourceVersion": "9"}}))
    assert (bookmark.type, bookmark.object) == ("BOOKMARK", "9")
    misfit = _line(
        type="ADDED", object={"metadata": {"name": "odd", "resourceVersion": "6", "uid": 42}}
    )
    assert (events.decode(misfit).type, events.decode(misfit).object) == ("BOOKMARK", "6")
    error = _line(
        type="ERROR", object={"kind": "Status", "code": 410, "reason": "Expired", "message": "old"}
    )
    with pytest.raises(errors.Gone, match="old"):
        events.decode(error)
    with pytest.raises(errors.KubeError, match="cannot decode an event"):
        events.decode(b"{not json")
