# cardboxd with the PostgreSQL binaries, so it can run an embedded Postgres
# when CARDBOX_DATABASE_URL is unset (docker-compose.yml sets it).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/ ./cmd/cardboxd ./cmd/cardbox

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends postgresql ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home cardbox \
    && mkdir -p /var/lib/cardbox && chown cardbox /var/lib/cardbox
COPY --from=build /out/ /usr/local/bin/
USER cardbox
WORKDIR /home/cardbox
ENV CARDBOX_DATA_DIR=/var/lib/cardbox \
    CARDBOX_BINARY_ADDR=0.0.0.0:9009 \
    CARDBOX_HTTP_ADDR=0.0.0.0:9010
VOLUME /var/lib/cardbox
EXPOSE 9009 9010
ENTRYPOINT ["cardboxd"]
