# kube-reloader's image: the recipe of src/kube_reloader/devcluster/ownimage.py (`make image`, the
# image the real-node tests run), for a container engine: Debian bookworm's python3, a virtualenv
# at /opt/kube-reloader holding the hashed locks (requirements/build.txt, then
# requirements/runtime.txt, every file checked against its sha256, wheels only) and the package
# itself, user 65534, entrypoint /opt/kube-reloader/bin/kube-reloader.
# tests/unit/test_install_image.py checks this file says what ownimage.py does (nothing builds it
# in the test suite). Released for linux/amd64 and linux/arm64 by .github/workflows/release.yml.
# Build:  docker build -t <registry>/kube-reloader:<version> .
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY requirements/build.txt requirements/runtime.txt ./requirements/
# pip and the build backend come from the hashed lock too (no unpinned `--upgrade pip`); the
# dependencies are wheels only, so nothing is compiled or fetched unhashed.
RUN /usr/bin/python3 -m venv /opt/kube-reloader \
 && /opt/kube-reloader/bin/pip install --no-cache-dir --disable-pip-version-check \
      --require-hashes -r requirements/build.txt \
 && /opt/kube-reloader/bin/pip install --no-cache-dir --require-hashes --only-binary=:all: \
      -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY src ./src
# --no-deps: the dependencies are exactly the locked ones above; the build backend is the locked
# setuptools, which then leaves the image with wheel and packaging (nothing at run time needs them).
# Every module is byte-compiled here: the running image never compiles (PYTHONDONTWRITEBYTECODE,
# a read-only root), so a start does not pay for compiling what it imports.
RUN /opt/kube-reloader/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
 && /opt/kube-reloader/bin/pip uninstall --yes --quiet setuptools wheel packaging \
 && /opt/kube-reloader/bin/python -m compileall -q --invalidation-mode unchecked-hash /opt/kube-reloader/lib

FROM debian:bookworm-slim
# The same packages (the virtualenv's python is /usr/bin/python3), then what nothing reads at
# run time removed, as ownimage.py trims its root filesystem.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/cache/apt /var/lib/apt/lists /usr/share/doc /usr/share/man /usr/share/info \
      /usr/share/locale /var/log
# No compilers, no pip cache, no source tree: only the virtualenv with the installed package.
COPY --from=build /opt/kube-reloader /opt/kube-reloader
ENV PATH=/opt/kube-reloader/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
LABEL org.opencontainers.image.title="kube-reloader" \
      org.opencontainers.image.licenses="Apache-2.0"
# nobody:nogroup, as Stakater's chart runs it (runAsUser 65534); works on a read-only root FS
USER 65534:65534
EXPOSE 9090
ENTRYPOINT ["/opt/kube-reloader/bin/kube-reloader"]
