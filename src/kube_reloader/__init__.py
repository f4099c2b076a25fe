"""kube-reloader: restart Kubernetes workloads when the ConfigMaps and Secrets they use change."""

from importlib import metadata

try:
    # pyproject.toml's `version` is the one source: the installed package's metadata carries it
    __version__ = metadata.version("kube-reloader")
except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
    __version__ = "0+unknown"
