"""Benchmarks of kube-reloader (bench/README.md). Run from the repository root:
`python -m bench.compare` (side by side with Stakater Reloader) and `python -m bench.reload_bench`
(reload latency and memory)."""
