# Multi-stage build: a static, pure-Go binary (the embedded SQLite store is
# modernc.org/sqlite, no cgo) in a distroless image that runs as non-root.

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# make release passes the version, its commit and the commit's time (the
# build context has no .git); a plain docker build reports "devel".
ARG VERSION=
ARG COMMIT=
ARG COMMIT_TIME=
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w \
      -X github.com/leaseapi/leaseapi/internal/version.Version=${VERSION} \
      -X github.com/leaseapi/leaseapi/internal/version.Commit=${COMMIT} \
      -X github.com/leaseapi/leaseapi/internal/version.CommitTime=${COMMIT_TIME}" \
    -o /out/ ./cmd/leaseapi ./cmd/leasectl

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=
LABEL org.opencontainers.image.title="leaseapi" org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/leaseapi /usr/local/bin/leaseapi
# leasectl ships beside the service: `docker run --entrypoint leasectl` for
# ls/get/runs/revoke, and `COPY --from=<this image> /usr/local/bin/leasectl`
# into a job's own image for `leasectl run` (this image has no shell).
COPY --from=build /out/leasectl /usr/local/bin/leasectl
# nonroot (65532) owns its home: the embedded store's default file
# (leaseapi.db in the working directory) can be written there. With
# LEASEAPI_DATABASE_URL set, nothing is written.
WORKDIR /home/nonroot
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/leaseapi"]
