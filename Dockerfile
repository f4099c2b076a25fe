# kube-reloader image: the runtime lock (requirements/runtime.txt, every file checked against its
# sha256) plus the package itself, nothing else.
# Build:  docker build -t <registry>/kube-reloader:0.1.0 .
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY requirements/build.txt requirements/runtime.txt ./requirements/
# pip and the build backend come from the hashed lock too (no unpinned `--upgrade pip`); the
# dependencies are wheels only, so nothing is compiled or fetched unhashed.
RUN python -m venv /opt/kube-reloader \
 && /opt/kube-reloader/bin/pip install --no-cache-dir --disable-pip-version-check \
      --require-hashes -r requirements/build.txt \
 && /opt/kube-reloader/bin/pip install --no-cache-dir --require-hashes --only-binary=:all: \
      -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY src ./src
# --no-deps: the dependencies are exactly the locked ones above; the build backend is the locked
# setuptools, which then leaves the image with wheel and packaging (nothing at run time needs them).
RUN /opt/kube-reloader/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
 && /opt/kube-reloader/bin/pip uninstall --yes --quiet setuptools wheel packaging \
 && find /opt/kube-reloader -name '__pycache__' -prune -exec rm -rf {} +

FROM python:3.11.14-slim-bookworm
# No compilers, no pip cache, no source tree: only the virtualenv with the installed package.
COPY --from=build /opt/kube-reloader /opt/kube-reloader
ENV PATH=/opt/kube-reloader/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# nobody:nogroup, as Stakater's chart runs it (runAsUser 65534); works on a read-only root FS
USER 65534:65534
EXPOSE 9090
ENTRYPOINT ["kube-reloader"]
