"""The pure core: annotation rules, reference discovery, hashing, decisions and patches.

Everything under `kube_reloader.core` is standard-library only, synchronous and deterministic:
it never performs I/O and never reads the clock. The import-linter contracts in
`pyproject.toml` enforce this, so the same rules can serve the controller, `explain` and `lint`.
"""
