# syntax=docker/dockerfile:1
# Two images from one file (see docker-compose.yml):
#   --target bridge  mrtr-bridge, serving modern MCP (2026-07-28) on :8080
#   --target demo    the legacy MCP (2025-11-25) demo server, tests/peers/demo_server.py on :8931
# Pinned by version (a rebuild gets the same interpreter); move it forward deliberately.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 mcp
WORKDIR /app

FROM base AS bridge
COPY pyproject.toml README.md ./
COPY config ./config
COPY translators ./translators
COPY proxy ./proxy
RUN pip install . && rm -rf build *.egg-info
USER mcp
# Where the bridge listens: set it here (docker run -e, compose `environment`), not with --listen,
# so that the HEALTHCHECK below asks the same address.
ENV MRTR_BRIDGE_FRONT_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; host, _, port = os.environ.get('MRTR_BRIDGE_FRONT_LISTEN', '0.0.0.0:8080').rpartition(':'); host = {'0.0.0.0': '127.0.0.1', '[::]': '[::1]', '': '127.0.0.1'}.get(host, host); urllib.request.urlopen(f'http://{host}:{port}/healthz', timeout=2)"]
ENTRYPOINT ["mrtr-bridge"]
CMD ["serve"]

FROM base AS demo
COPY tests/peers/requirements-legacy.txt ./
RUN pip install -r requirements-legacy.txt
COPY tests/peers/demo_server.py ./
USER mcp
EXPOSE 8931
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=5 \
    CMD ["python", "-c", "import socket; socket.create_connection(('127.0.0.1', 8931), timeout=2).close()"]
CMD ["python", "demo_server.py", "--host", "0.0.0.0", "--port", "8931"]
