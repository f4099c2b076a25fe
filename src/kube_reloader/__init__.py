"""kube-reloader: restart Kubernetes workloads when the ConfigMaps and Secrets they use change."""

import os
import sys

#: the directory name an installed distribution's metadata lives in, as packaging normalizes it
_DIST_PREFIX = "kube_reloader-"


def __getattr__(name: str) -> str:
    # `__version__`, read on first use: pyproject.toml's `version` is the one source and the
    # installed package's metadata carries it. Lazily, because importing importlib.metadata
    # costs ~5 MiB RSS that the in-place agent (one per pod) never needs.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    version = installed_version()
    if version is None:
        from importlib import metadata

        try:
            version = metadata.version("kube-reloader")
        except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
            version = "0+unknown"
    globals()["__version__"] = version
    return version


def installed_version() -> str | None:
    """The `Version:` of the first `kube_reloader-*.dist-info` on sys.path, the one
    importlib.metadata would find, or None (then it is asked). Read without importing it:
    importlib.metadata costs a controller's start ~5 ms of CPU (issue 33). Anything else
    importlib.metadata might take first (an `.egg-info`, a name spelt otherwise, several
    installs in one place, a zip archive or an `.egg` on the path) means None."""
    for entry in sys.path:
        where = entry or "."
        if where.lower().rstrip("/\\").endswith(".egg"):
            return None
        try:
            names = [n for n in os.listdir(where) if _ours(n)]
        except NotADirectoryError:
            return None  # a zip archive: importlib.metadata looks inside
        except OSError:
            continue
        if not names:
            continue
        if len(names) > 1 or not (
            names[0].startswith(_DIST_PREFIX) and names[0].endswith(".dist-info")
        ):
            return None
        return _version_header(os.path.join(where, names[0], "METADATA"))
    return None


def _version_header(path: str) -> str | None:
    """The `Version` header of a METADATA file as importlib.metadata's email parser reads
    it: the first one, its name in any case, its value without the blanks after the colon
    or the line's end. None when unsure (a value folded onto the next line) or when there is
    none before the headers end."""
    value, last = None, ""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line in ("\n", "\r\n"):
                    break  # the headers end at the first empty line
                if line[:1] in (" ", "\t"):
                    if last == "version":
                        return None  # folded: the parser joins the lines
                    continue
                name, colon, rest = line.partition(":")
                last = name.lower() if colon else ""
                if last == "version" and value is None:
                    value = rest.lstrip(" \t").rstrip("\r\n")
                elif value is not None:
                    break  # the next header: nothing can fold onto the version any more
    except (OSError, UnicodeDecodeError):
        return None
    return value


def _ours(name: str) -> bool:
    """Metadata that may be this distribution's, however spelt (`Kube.Reloader-1.dist-info`,
    `kube_reloader.egg-info`); the package's own directory is not, nor anything else that is
    not metadata (a `kube-reloader-*` directory in the working directory, which is on the path:
    importlib.metadata looks only at `.dist-info` and `.egg-info`)."""
    folded = name.lower().replace("-", "_").replace(".", "_")
    while "__" in folded:  # a run of separators is one, as importlib.metadata normalizes
        folded = folded.replace("__", "_")
    return folded.startswith("kube_reloader_") and folded.endswith(("_dist_info", "_egg_info"))
