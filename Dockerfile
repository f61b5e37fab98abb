# syntax=docker/dockerfile:1
# Heurist in a container: a static (musl) binary on distroless/static, run as a non-root user.
# About 31 MB: the stripped static binary (~29 MB) and distroless/static (~2 MB). See
# docs/operations.md ("Running in a container") for the mounts and the compose file.

ARG RUST_VERSION=1.95

# ---- build: a static binary, so the runtime image needs no libc ----
FROM rust:${RUST_VERSION}-alpine AS build
# ring (rustls' crypto) compiles C and assembly; libopus (spoken replies) is built from the
# source its crate bundles, with cmake, and linked statically.
RUN apk add --no-cache musl-dev cmake make
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# Cargo reads every target the manifest declares (the benches too) before it builds one.
COPY benches benches
COPY tests/bin tests/bin
COPY config config
COPY src src
ENV CARGO_PROFILE_RELEASE_STRIP=true
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin heurist \
    && cp target/release/heurist /heurist
# The data and backup directories, owned by the runtime's non-root user (uid 65532), so named
# volumes mounted there start out writable by it.
RUN mkdir -p /data /backups && chown 65532:65532 /data /backups

# ---- runtime: no shell, no package manager, CA certificates and tzdata included ----
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /heurist /usr/local/bin/heurist
# Working directory: config/heurist.toml and config/skills/ are read relative to it, so
# `-v ./config:/app/config:ro` replaces both (or set HEURIST_CONFIG to another file).
WORKDIR /app
COPY --chown=65532:65532 config /app/config
COPY --from=build --chown=65532:65532 /data /data
COPY --from=build --chown=65532:65532 /backups /backups
ENV HEURIST_DATA_DIR=/data
# Backups on a volume of their own: keep it on another disk than /data, or copy it off.
ENV HEURIST_BACKUP_DIR=/backups
VOLUME ["/data", "/backups"]
USER 65532:65532
# Webhook mode listens here when HEURIST_WEBHOOK_LISTEN=0.0.0.0:8443 (polling needs no port).
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/heurist"]
# `docker run … heurist doctor` checks the deployment; no argument runs the bot.
CMD []
