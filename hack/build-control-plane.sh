#!/usr/bin/env bash
# Build (once, cached) the local Kubernetes control plane used by tests, benchmarks and
# `make run`: kube-apiserver, kube-controller-manager and kubectl from k8s.io/kubernetes,
# and etcd from go.etcd.io/etcd/server/v3, all from the Go module proxy.
#
# Prints the directory holding the binaries on its last line of stdout.
#
# Existing binaries are accepted instead of a build:
#   ORKSYNC_CONTROL_PLANE_BIN=/dir  (must contain etcd, kube-apiserver; kube-controller-manager
#                                    and kubectl are optional)
#   KUBEBUILDER_ASSETS=/dir         (the setup-envtest convention)
#
# Cache: ${ORKSYNC_CACHE:-$HOME/.cache/orksync}/control-plane/<key>/ where key hashes
# (k8s version, etcd version, go version, arch, recipe revision). A marker file is written only
# after every binary answers --version; a flock serialises concurrent builds.
set -euo pipefail

K8S_VERSION="${ORKSYNC_K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ORKSYNC_ETCD_VERSION:-v3.6.8}"

log() { printf '[control-plane] %s\n' "$*" >&2; }

for var in ORKSYNC_CONTROL_PLANE_BIN KUBEBUILDER_ASSETS; do
  dir="${!var:-}"
  if [ -n "$dir" ]; then
    if [ -x "$dir/etcd" ] && [ -x "$dir/kube-apiserver" ]; then
      log "using existing binaries from \$$var=$dir"
      echo "$dir"
      exit 0
    fi
    log "\$$var=$dir has no executable etcd and kube-apiserver; building instead"
  fi
done

command -v go >/dev/null || { log "go is required to build the control plane"; exit 1; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

# Bump RECIPE when a change to this script changes the binaries it produces; comments and
# logging do not (a key on the whole script's hash would force a 25-minute rebuild for those).
RECIPE=r1
go_version=$(go env GOVERSION)
arch="$(go env GOOS)-$(go env GOARCH)"
key="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_${go_version}_${arch}_${RECIPE}"
cache_root="${ORKSYNC_CACHE:-$HOME/.cache/orksync}/control-plane"
out="$cache_root/$key"
mkdir -p "$cache_root"

if [ -f "$out/.complete" ]; then
  echo "$out/bin"
  exit 0
fi

exec 9>"$cache_root/.lock"
log "waiting for the build lock $cache_root/.lock"
flock 9
if [ -f "$out/.complete" ]; then
  echo "$out/bin"
  exit 0
fi

free_kb=$(df -Pk "$cache_root" | awk 'NR==2 {print $4}')
if [ "$free_kb" -lt $((5 * 1024 * 1024)) ]; then
  log "need about 5 GB free under $cache_root to build; only $((free_kb / 1024)) MB free"
  exit 1
fi

start=$(date +%s)
rm -rf "$out"
mkdir -p "$out/bin.partial"
work=$(mktemp -d "$cache_root/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

minor=$(echo "$K8S_VERSION" | cut -d. -f2)
staging_version="v0.${minor}.$(echo "$K8S_VERSION" | cut -d. -f3)"
pkg=k8s.io/component-base/version
cgo=k8s.io/client-go/pkg/version
ldflags="-s -w"
for p in $pkg $cgo; do
  ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

log "building kube-apiserver, kube-controller-manager, kubectl $K8S_VERSION (staging $staging_version)"
mkdir -p "$work/k8s" && cd "$work/k8s"
go mod init scratch/k8s >/dev/null 2>&1
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
replaces=()
while read -r name; do
  replaces+=("-replace=$name=$name@$staging_version")
done < <(grep -E '^\s*k8s.io/[A-Za-z0-9._-]+ => ./staging/' "$gomod" | awk '{print $1}' | sort -u)
[ "${#replaces[@]}" -gt 10 ] || { log "found only ${#replaces[@]} staging modules in $gomod"; exit 1; }
go mod edit "${replaces[@]}"
go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
  "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
  "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" >&2
for cmd in kube-apiserver kube-controller-manager kubectl; do
  log "go build $cmd"
  go build -trimpath -ldflags "$ldflags" -o "$out/bin.partial/$cmd" "k8s.io/kubernetes/cmd/$cmd" >&2
done

log "building etcd $ETCD_VERSION"
mkdir -p "$work/etcd" && cd "$work/etcd"
go mod init scratch/etcd >/dev/null 2>&1
go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
go build -trimpath -ldflags "-s -w" -o "$out/bin.partial/etcd" go.etcd.io/etcd/server/v3 >&2

for b in etcd kube-apiserver kube-controller-manager; do
  "$out/bin.partial/$b" --version >&2
done
"$out/bin.partial/kubectl" version --client >&2
mv "$out/bin.partial" "$out/bin"
elapsed=$(( $(date +%s) - start ))
printf 'built in %ss on %s cores (%s)\n' "$elapsed" "$(nproc)" "$(date -u +%FT%TZ)" > "$out/.complete"
log "built in ${elapsed}s into $out/bin"
echo "$out/bin"
