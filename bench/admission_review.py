"""Decoding a forged AdmissionReview at the webhook's cap: time (best of 5) and peak memory
(tracemalloc) of the msgspec decoder the webhook uses and of the JSON parser it used before,
for a body of one long string and one of many small objects.

    python -m bench.admission_review
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from kube_reloader.core import admitting
from kube_reloader.runtime import admitter

SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "one long string": lambda n: {
        "kind": "Deployment", "metadata": {"name": "w", "annotations": {"pad": "x" * n}},
    },
    "many small objects": lambda n: {
        "kind": "Deployment", "metadata": {"name": "w"}, "x": [{"a": 1}] * n,
    },
}  # fmt: skip


def review(obj: dict[str, Any]) -> bytes:
    request = {"uid": "u", "operation": "CREATE", "namespace": "ns", "object": obj}
    doc = {"apiVersion": admitting.REVIEW_API_VERSION, "kind": "AdmissionReview",
           "request": request}  # fmt: skip
    return json.dumps(doc, separators=(",", ":")).encode()


def at_cap(shape: Callable[[int], dict[str, Any]]) -> bytes:
    lo, hi = 1, 8_000_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (
            (mid, hi) if len(review(shape(mid))) <= admitting.MAX_REVIEW_BYTES else (lo, mid - 1)
        )
    return review(shape(lo))


def main() -> None:
    decoders = {"msgspec (now)": admitter.decode_review, "json (before)": admitting.parse_review}
    for name, shape in SHAPES.items():
        body = at_cap(shape)
        for label, decode in decoders.items():
            best = min(_timed(decode, body) for _ in range(5))
            tracemalloc.start()
            kept = decode(body)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert kept.review is not None
            print(f"{name:19} {len(body) / 2**20:.2f} MiB  {label:14} "
                  f"{best * 1000:7.1f} ms  peak {peak / 2**20:6.1f} MiB")  # fmt: skip


def _timed(decode: Callable[[bytes], object], body: bytes) -> float:
    start = time.perf_counter()
    decode(body)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
