# syntax=docker/dockerfile:1
# The draforge image for machines with Docker (BuildKit). `go tool task image` builds the same
# files and config without Docker (build/containerimage); this file runs that builder's
# --rootfs mode in a build stage and copies the result into an empty image. Not run in CI here
# (no Docker engine); test TestDockerfileMatchesBuilder checks it against the builder.
# `go tool task image:docker` passes the arguments below from VERSION and git:
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) \
#     --build-arg CREATED=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd) \
#     -t ghcr.io/draforge/draforge:0.1.0 .
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS TARGETARCH VERSION REVISION SOURCE_DATE_EPOCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go run ./build/containerimage/imagebuild --rootfs /rootfs --rootfs-platform "$TARGETOS/$TARGETARCH" \
      --version "$VERSION" --revision "$REVISION" --created "$SOURCE_DATE_EPOCH"

FROM scratch
ARG VERSION REVISION CREATED
COPY --from=build /rootfs/ /
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/draforge"]
LABEL org.opencontainers.image.source="https://github.com/draforge/draforge" \
      org.opencontainers.image.title="draforge" \
      org.opencontainers.image.description="DRAForge, a Kubernetes Dynamic Resource Allocation simulator: controller, API server and CLI" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
