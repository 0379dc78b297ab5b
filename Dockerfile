# cardboxd, in hosted mode (an API key on every surface, see
# docs/security.md), and the cardbox CLI, run as an unprivileged user.
# docker-compose.yml runs it beside Postgres; the README's "Run with Docker
# Compose" says how. The PostgreSQL server binaries are included so that
# cardboxd can run an embedded Postgres in the data directory when
# CARDBOX_DATABASE_URL is unset (`docker run` alone).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./cmd/cardboxd ./cmd/cardbox

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends postgresql ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 cardbox \
    && useradd --system --uid 10001 --gid cardbox --create-home cardbox \
    && mkdir -p /var/lib/cardbox && chown cardbox:cardbox /var/lib/cardbox && chmod 0700 /var/lib/cardbox
COPY --from=build /out/cardboxd /out/cardbox /usr/local/bin/
# Numeric, so that a runtime can tell it is not root without reading
# /etc/passwd (Kubernetes' runAsNonRoot).
USER 10001:10001
WORKDIR /home/cardbox
# Hosted mode may listen beyond loopback (dev mode refuses to: it has no
# keys). The first operator key comes from --operator-key-file
# (CARDBOX_OPERATOR_KEY_FILE), a mounted secret.
ENV CARDBOX_MODE=hosted \
    CARDBOX_DATA_DIR=/var/lib/cardbox \
    CARDBOX_BINARY_ADDR=0.0.0.0:9009 \
    CARDBOX_HTTP_ADDR=0.0.0.0:9010
VOLUME /var/lib/cardbox
EXPOSE 9009 9010
# GET /healthz on CARDBOX_HTTP_ADDR (the image has no curl).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["cardbox", "health"]
# On SIGTERM cardboxd lets in-flight requests finish within
# --shutdown-timeout (30s), so stop it with more than docker's default 10s
# (docker stop -t 40; docker-compose.yml's stop_grace_period).
ENTRYPOINT ["cardboxd"]
