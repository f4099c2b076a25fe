"""core.gojson: Go's json.Marshal output, which Reloader's annotations and alerts carry."""

from __future__ import annotations

import pytest

from kube_reloader.core import alerting, gojson


@pytest.mark.parametrize(
    ("value", "sort_keys", "expected"),
    [
        ({"b": 1, "a": [1, 2]}, False, '{"b":1,"a":[1,2]}'),  # a struct: declared order
        ({"b": 1, "a": 2}, True, '{"a":2,"b":1}'),  # a map: keys sorted
        ({"x": "<a&b>"}, False, '{"x":"\\u003ca\\u0026b\\u003e"}'),  # HTML-safe
        ({"x": "line\u2028sep\u2029"}, False, '{"x":"line\\u2028sep\\u2029"}'),
        ({"x": "zürich ✓"}, False, '{"x":"zürich ✓"}'),  # other text stays UTF-8
        ({"x": 'q"\n'}, False, '{"x":"q\\"\\n"}'),
    ],
)
def test_values_are_written_as_go_marshals_them(
    value: object, sort_keys: bool, expected: str
) -> None:
    assert gojson.marshal(value, sort_keys=sort_keys) == expected


def test_a_slack_alert_escapes_javascript_line_separators_as_go_does() -> None:
    # gorequest marshals the map with Go's encoder: U+2028 comes out escaped (it did not here
    # before core.gojson, which every Go-shaped writer now shares)
    payload = alerting.payload("slack", "text\u2028more")
    assert b"\\u2028" in payload.body
    assert "\u2028".encode() not in payload.body
