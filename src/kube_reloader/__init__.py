"""kube-reloader: restart Kubernetes workloads when the ConfigMaps and Secrets they use change."""


def __getattr__(name: str) -> str:
    # `__version__`, read on first use: pyproject.toml's `version` is the one source and the
    # installed package's metadata carries it. Lazily, because importing importlib.metadata
    # costs ~5 MiB RSS that the in-place agent (one per pod) never needs.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("kube-reloader")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
        version = "0+unknown"
    globals()["__version__"] = version
    return version
