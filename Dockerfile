# kube-reloader image: the same `pip install` the README documents, nothing else.
# Build:  docker build -t <registry>/kube-reloader:0.1.0 .
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m venv /opt/kube-reloader \
 && /opt/kube-reloader/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/kube-reloader/bin/pip install --no-cache-dir . \
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
