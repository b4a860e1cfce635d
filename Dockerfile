# syntax=docker/dockerfile:1
# orksync: GitOps render-and-sync agent. Build: docker build -t orksync:<version> .
# Runs as uid 65532 with a read-only root file system: everything it writes goes to the
# state dir /var/lib/orksync (HOME, git config, clones, caches) or /tmp.

# --- builder: wheels of orksync and every dependency ------------------------------------
FROM python:3.11-slim-bookworm AS builder
WORKDIR /src
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
COPY pyproject.toml README.md ./
COPY orksync ./orksync
# `orksync install` builds from deploy/ (orksync/deploy links to it; package data)
COPY deploy ./deploy
RUN pip wheel --wheel-dir /wheels .

# --- final image -------------------------------------------------------------------------
FROM python:3.11-slim-bookworm

ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="orksync" \
      org.opencontainers.image.description="GitOps render-and-sync agent for Orkestra-style declarative operators" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim-bookworm"

# git and ssh for the Git source (orksync.source shells out to git). Versions are not
# pinned: Debian bookworm's archive keeps only the current point release of each package,
# so a pinned version breaks the build at the next security update; the base image tag
# pins the distribution release instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git openssh-client \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*

COPY --from=builder /wheels /wheels
# Every wheel built above, exactly those versions (no index is consulted).
RUN pip install --no-cache-dir --no-index /wheels/*.whl \
    && rm -rf /wheels \
    && groupadd --gid 65532 orksync \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /var/lib/orksync \
       --shell /usr/sbin/nologin orksync \
    && mkdir -p /var/lib/orksync \
    && chown 65532:65532 /var/lib/orksync

# Nothing is written outside /var/lib/orksync and /tmp (read-only root file system).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/orksync \
    TMPDIR=/tmp \
    XDG_CONFIG_HOME=/var/lib/orksync/.config \
    XDG_CACHE_HOME=/var/lib/orksync/.cache \
    GIT_CONFIG_GLOBAL=/var/lib/orksync/.gitconfig \
    ORKSYNC_STATE_DIR=/var/lib/orksync

WORKDIR /var/lib/orksync
VOLUME ["/var/lib/orksync"]
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["orksync"]
CMD ["agent"]
