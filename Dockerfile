# syntax=docker/dockerfile:1
# Two images from one file (see docker-compose.yml):
#   --target bridge  mrtr-bridge, serving modern MCP (2026-07-28) on :8080
#   --target demo    the legacy MCP (2025-11-25) demo server, tests/peers/demo_server.py on :8931
ARG PYTHON_IMAGE=python:3.11-slim

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
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
ENTRYPOINT ["mrtr-bridge"]
CMD ["serve", "--listen", "0.0.0.0:8080"]

FROM base AS demo
COPY tests/peers/requirements-legacy.txt ./
RUN pip install -r requirements-legacy.txt
COPY tests/peers/demo_server.py ./
USER mcp
EXPOSE 8931
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=5 \
    CMD ["python", "-c", "import socket; socket.create_connection(('127.0.0.1', 8931), timeout=2).close()"]
CMD ["python", "demo_server.py", "--host", "0.0.0.0", "--port", "8931"]
