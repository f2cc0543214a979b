# Skiff's container image: docker build -t REGISTRY/skiff:0.1.0 .
# The manifests in k8s/ run it with --redis-url; the image has no redis-server (the
# embedded Redis of a bare `skiff serve` is for local use).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Skiff loads its Lua scripts from lua/ next to the package (sidecar/storage/scripts.py),
# so the source tree stays in /app and is installed in place (editable).
WORKDIR /app
COPY pyproject.toml setup.py ./
COPY lua ./lua
COPY sidecar ./sidecar
COPY pipeline ./pipeline
# gcc builds the one C extension (sidecar/protocol/_record_walk.c), then goes.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install -e . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/* \
    && python -m compileall -q sidecar pipeline \
    && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin skiff

USER 10001
EXPOSE 9092 8080
ENTRYPOINT ["skiff"]
CMD ["serve", "--listen", "0.0.0.0:9092", "--http-listen", "0.0.0.0:8080"]
