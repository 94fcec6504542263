#!/usr/bin/env bash
# make release VERSION=x.y.z: the release artifacts of the commit checked out,
# into DIST (default dist/):
#
#   leaseapi_X.Y.Z_linux_{amd64,arm64}      static binaries (and leasectl_…, cronreplica_…)
#   *.cdx.json                              a CycloneDX SBOM of each binary
#   SHA256SUMS                              sha256sum of all of the above
#
# and the image leaseapi:X.Y.Z from the Dockerfile, labelled with the
# version, when a Docker engine answers.
#
# The artifacts are reproducible: the same commit and Go give the same bytes,
# wherever the checkout lies (-trimpath, CGO off, no build time but the
# commit's, SOURCE_DATE_EPOCH from `git log -1 --format=%ct`). test/release
# builds twice and compares SHA256SUMS.
set -euo pipefail

GO=${GO:-go}
VERSION=${VERSION:-}
VERSION=${VERSION#v}
cd "$(git rev-parse --show-toplevel)"
DIST=${DIST:-dist}

# Semantic Versioning 2.0.0: MAJOR.MINOR.PATCH with an optional pre-release.
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
if [[ ! $VERSION =~ $semver ]]; then
	echo "release: VERSION=${VERSION:-(unset)} is not a semantic version; run make release VERSION=1.2.3" >&2
	exit 2
fi
# Go stamps vcs.modified=true for any change git status shows, untracked
# files included, which would make the binaries differ from the commit's.
if [[ -n $(git status --porcelain) ]]; then
	echo "release: the working tree has changes or untracked files; a release is built from a commit: commit, stash or remove them (git status)" >&2
	exit 1
fi

commit=$(git rev-parse HEAD)
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
commit_time=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
pkg=github.com/leaseapi/leaseapi/internal/version
ldflags="-s -w -X $pkg.Version=$VERSION -X $pkg.Commit=$commit -X $pkg.CommitTime=$commit_time"

rm -rf "$DIST"
mkdir -p "$DIST"
dist=$(cd "$DIST" && pwd)
artifacts=()
for arch in amd64 arm64; do
	for cmd in leaseapi leasectl cronreplica; do
		bin="${cmd}_${VERSION}_linux_${arch}"
		CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOFLAGS=-mod=readonly \
			$GO build -trimpath -buildvcs=true -ldflags "$ldflags" -o "$dist/$bin" "./cmd/$cmd"
		# bin mode reads the modules the binary links from its build
		# information: the SBOM describes exactly what ships. No serial
		# number and no timestamp, so that it is reproducible too.
		# Its log (a warning per module without a license file) is shown
		# only when it fails.
		if ! log=$($GO tool -C release/sbom cyclonedx-gomod bin -json -noserial -notimestamp -licenses \
			-version "v$VERSION" -output "$dist/$bin.cdx.json" "$dist/$bin" 2>&1); then
			echo "$log" >&2
			echo "release: the SBOM of $bin failed" >&2
			exit 1
		fi
		artifacts+=("$bin" "$bin.cdx.json")
	done
done
(cd "$dist" && sha256sum "${artifacts[@]}" > SHA256SUMS)
echo "release: $VERSION ($commit, $commit_time) in $DIST:"
cat "$dist/SHA256SUMS"

image="leaseapi:$VERSION"
if ! docker info >/dev/null 2>&1; then
	echo "release: no Docker engine answers (docker info failed): skipped the image $image"
	exit 0
fi
docker build \
	--build-arg VERSION="$VERSION" --build-arg COMMIT="$commit" --build-arg COMMIT_TIME="$commit_time" \
	--build-arg SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
	--label org.opencontainers.image.version="$VERSION" \
	--label org.opencontainers.image.revision="$commit" \
	--label org.opencontainers.image.created="$commit_time" \
	-t "$image" .
echo "release: built the image $image"
