# The demo cron replica (cmd/cronreplica): a static binary in a distroless
# image that runs as non-root. Build from the repository root:
#
#   docker build -f deploy/cronreplica.Dockerfile -t cronreplica:dev .

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/cronreplica ./cmd/cronreplica

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cronreplica /usr/local/bin/cronreplica
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/cronreplica"]
