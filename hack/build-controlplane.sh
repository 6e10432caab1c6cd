#!/usr/bin/env bash
# Build a real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# KWOK) from Go modules.
#
# This machine (and CI) has no Docker and cannot download release binaries, but it reaches the Go
# module proxy, so we build the components the way envtest-style setups need them:
#   - etcd and k8s.io/kubernetes carry replace directives in their go.mod, which `go install pkg@v`
#     refuses; we build them as dependencies of small wrapper modules instead.
#   - For k8s.io/kubernetes the wrapper must replace every staging module k8s.io/X (which upstream
#     points at ./staging/src/k8s.io/X) with the published k8s.io/X v0.N.M. The list is derived from
#     the target's own go.mod, so a version bump needs no edit here.
#
# Output: ${MINISCHED_CACHE:-$HOME/.cache/minisched}/controlplane/<key>/{bin/,stages.yaml,STAMP}
# where <key> names all pinned versions, so a second run only checks the stamp and `--version`s.
# A cache that is complete but for a binary added since (or one deleted) builds only what is missing:
# the Go build cache then holds everything else, so that costs that binary's own packages and linking.
#
# Environment:
#   MINISCHED_CACHE          cache root (default ~/.cache/minisched)
#   ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION   override the pins
#   MINISCHED_BUILD_JOBS     go build -p (default 2: the machine has 2 cores and others run tests)
#   MINISCHED_FORCE_BUILD=1  ignore the stamp and rebuild
# Prints the bin directory on the last line of stdout.
set -euo pipefail

ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.35.4}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
BUILD_JOBS="${MINISCHED_BUILD_JOBS:-2}"

# What the cache holds (minisched/controlplane/binaries.py's BINARY_NAMES: a test keeps them in step).
KUBE_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler)
BINARIES=(etcd "${KUBE_COMMANDS[@]}" kwok)

CACHE_ROOT="${MINISCHED_CACHE:-$HOME/.cache/minisched}"
KEY="etcd-${ETCD_VERSION}_k8s-${KUBERNETES_VERSION}_kwok-${KWOK_VERSION}"
OUT="${CACHE_ROOT}/controlplane/${KEY}"
BIN="${OUT}/bin"
STAMP="${OUT}/STAMP"
WORK="${OUT}/work"

log() { printf '[build-controlplane %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf '[build-controlplane] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "the Go toolchain ('go') is not on PATH. Install Go >= 1.25 (e.g. apt-get install golang-go, or https://go.dev/dl) and re-run 'make controlplane'."

# Run go at low priority: the build takes minutes on 2 cores and must not starve other test runs.
gorun() { nice -n 10 go "$@"; }

# Each binary must exist and answer --version with the pinned version. (Capture, then match: a
# `bin --version | grep -q` pipeline fails at random under pipefail when grep exits first.)
reports_version() {
  local out
  out=$("$1" --version 2>&1) || return 1
  [[ "$out" == *"$2"* ]]
}
binary_ok() {
  case "$1" in
    etcd) reports_version "${BIN}/etcd" "etcd Version: ${ETCD_VERSION#v}" ;;
    kwok) reports_version "${BIN}/kwok" "${KWOK_VERSION#v}" ;;
    *) reports_version "${BIN}/$1" "Kubernetes ${KUBERNETES_VERSION}" ;;
  esac
}
# A completed build of this key: the stamp and KWOK's stages (binaries are checked one by one).
stamp_ok() {
  [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$KEY" ]] && [[ -s "${OUT}/stages.yaml" ]]
}
# The binaries that are absent or report another version, one per line.
missing_binaries() {
  local b
  for b in "${BINARIES[@]}"; do binary_ok "$b" || echo "$b"; done
}
binaries_ok() {
  stamp_ok || return 1
  [[ -z "$(missing_binaries)" ]]
}

if [[ "${MINISCHED_FORCE_BUILD:-0}" != "1" ]] && binaries_ok; then
  log "up to date: ${BIN}"
  echo "$BIN"
  exit 0
fi

# One build at a time per version key (two test runs may both find the cache empty).
mkdir -p "$OUT"
if command -v flock >/dev/null 2>&1; then
  exec 9>"${OUT}.lock"
  if ! flock -n 9; then
    log "another build of ${KEY} is running; waiting for it"
    flock 9
  fi
  if [[ "${MINISCHED_FORCE_BUILD:-0}" != "1" ]] && binaries_ok; then
    log "up to date: ${BIN}"
    echo "$BIN"
    exit 0
  fi
fi

# A completed cache missing only some binaries (one added to the build since, or deleted) builds just
# those; anything else (no stamp, MINISCHED_FORCE_BUILD=1) builds everything.
if [[ "${MINISCHED_FORCE_BUILD:-0}" != "1" ]] && stamp_ok; then
  mapfile -t TO_BUILD < <(missing_binaries)
  log "cache for ${KEY} is complete but for: ${TO_BUILD[*]}; building only those"
else
  TO_BUILD=("${BINARIES[@]}")
  rm -f "$STAMP"
fi
wanted() { local b; for b in "${TO_BUILD[@]}"; do [[ "$b" == "$1" ]] && return 0; done; return 1; }

# Binaries are built into STAGE and renamed into BIN at the end: a process running an old binary
# keeps its inode, and nobody ever executes a half-written file.
STAGE="${WORK}/bin"
rm -rf "$WORK"
mkdir -p "$BIN" "$STAGE"
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"
# Go module proxy only; fail fast with a readable message rather than a wall of resolver output.
modfetch_fail() { die "fetching Go module $1 failed (is the Go module proxy reachable? GOPROXY=$(go env GOPROXY)). See the output above."; }

START=$(date +%s)

# ---------------------------------------------------------------------------------------------- etcd
build_etcd() {
  local dir="${WORK}/etcd"
  rm -rf "$dir" && mkdir -p "$dir"
  log "etcd ${ETCD_VERSION}: resolving modules"
  cat >"${dir}/go.mod" <<EOF
module minisched.local/etcdwrapper

go 1.25

tool go.etcd.io/etcd/server/v3
EOF
  (cd "$dir" && gorun get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}") || modfetch_fail "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  log "etcd ${ETCD_VERSION}: compiling"
  (cd "$dir" && gorun build -p "$BUILD_JOBS" -trimpath -ldflags "-s -w" -o "${STAGE}/etcd" go.etcd.io/etcd/server/v3) \
    || die "building etcd failed"
  log "etcd ${ETCD_VERSION}: done ($(( $(date +%s) - START ))s elapsed)"
}

# ------------------------------------ kube-apiserver, kube-controller-manager, kube-scheduler
# Arguments: the commands to compile (the wrapper module names all three, so its go.sum serves any).
build_kubernetes() {
  local dir="${WORK}/kubernetes"
  rm -rf "$dir" && mkdir -p "$dir"
  log "kubernetes ${KUBERNETES_VERSION}: downloading k8s.io/kubernetes go.mod"
  local info gomod
  info=$(cd "$dir" && GOFLAGS=-mod=mod gorun mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}") \
    || modfetch_fail "k8s.io/kubernetes@${KUBERNETES_VERSION}"
  gomod=$(printf '%s' "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [[ -f "$gomod" ]] || die "could not find go.mod of k8s.io/kubernetes@${KUBERNETES_VERSION} in: $info"

  # Staging modules: lines such as `k8s.io/api => ./staging/src/k8s.io/api` in the target's go.mod.
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  local staging
  staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._/-]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod" | sort -u)
  [[ -n "$staging" ]] || die "no './staging/' replace lines found in $gomod"
  log "kubernetes ${KUBERNETES_VERSION}: $(wc -l <<<"$staging") staging modules -> ${staging_version}"
  local godebug
  godebug=$(grep -E '^godebug[[:space:]]' "$gomod" || true)

  {
    echo "module minisched.local/kuberneteswrapper"
    echo
    echo "go $(sed -n 's/^go[[:space:]]\+\([0-9.]*\).*/\1/p' "$gomod" | head -1)"
    [[ -n "$godebug" ]] && { echo; echo "$godebug"; }
    echo
    echo "tool ("
    for cmd in "${KUBE_COMMANDS[@]}"; do echo "	k8s.io/kubernetes/cmd/${cmd}"; done
    echo ")"
    echo
    echo "replace ("
    while read -r mod; do echo "	${mod} => ${mod} ${staging_version}"; done <<<"$staging"
    echo ")"
  } >"${dir}/go.mod"

  log "kubernetes ${KUBERNETES_VERSION}: resolving modules (go get)"
  (cd "$dir" && gorun get "k8s.io/kubernetes@${KUBERNETES_VERSION}") || modfetch_fail "k8s.io/kubernetes@${KUBERNETES_VERSION}"
  (cd "$dir" && gorun mod tidy) || modfetch_fail "dependencies of k8s.io/kubernetes@${KUBERNETES_VERSION}"

  # The version reported by --version comes from these ldflags (hack/lib/version.sh upstream).
  local vpkg="k8s.io/component-base/version"
  local ldflags="-s -w -X ${vpkg}.gitVersion=${KUBERNETES_VERSION} -X ${vpkg}.gitTreeState=clean"
  ldflags+=" -X ${vpkg}.gitMajor=1 -X ${vpkg}.gitMinor=$(cut -d. -f2 <<<"${KUBERNETES_VERSION}")"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES_VERSION}"
  for cmd in "$@"; do
    log "kubernetes ${KUBERNETES_VERSION}: compiling ${cmd} (slow on 2 cores)"
    (cd "$dir" && gorun build -p "$BUILD_JOBS" -tags selinux,notest -trimpath -ldflags "$ldflags" \
        -o "${STAGE}/${cmd}" "k8s.io/kubernetes/cmd/${cmd}") || die "building ${cmd} failed"
    log "kubernetes ${KUBERNETES_VERSION}: ${cmd} done ($(( $(date +%s) - START ))s elapsed)"
  done
}

# ------------------------------------------------------------------------------------------- KWOK
build_kwok() {
  local dir="${WORK}/kwok"
  rm -rf "$dir" && mkdir -p "$dir"
  log "kwok ${KWOK_VERSION}: compiling"
  # kwok reports its version from these ldflags (its Makefile sets them the same way).
  local ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION} -X sigs.k8s.io/kwok/pkg/consts.BinaryName=kwok"
  (cd "$dir" && GOBIN="$STAGE" gorun install -p "$BUILD_JOBS" -trimpath -ldflags "$ldflags" \
      "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}") || modfetch_fail "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"

  # KWOK exits with "no stages found" unless it is given Stage objects; ship the upstream ones.
  local moddir
  moddir=$(cd "$dir" && GOFLAGS=-mod=mod gorun mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [[ -d "$moddir" ]] || modfetch_fail "sigs.k8s.io/kwok@${KWOK_VERSION} (module source)"
  local stages=(
    kustomize/stage/node/fast/node-initialize.yaml
    kustomize/stage/node/heartbeat/node-heartbeat.yaml
    kustomize/stage/pod/fast/pod-ready.yaml
    kustomize/stage/pod/fast/pod-complete.yaml
    kustomize/stage/pod/fast/pod-delete.yaml
  )
  local tmp="${OUT}/stages.yaml.tmp"
  : >"$tmp"
  for f in "${stages[@]}"; do
    [[ -f "${moddir}/${f}" ]] || die "stage manifest ${f} not found in ${moddir}"
    { echo "---"; echo "# from sigs.k8s.io/kwok@${KWOK_VERSION}/${f}"; grep -v '^---[[:space:]]*$' "${moddir}/${f}"; } >>"$tmp"
  done
  mv "$tmp" "${OUT}/stages.yaml"
  log "kwok ${KWOK_VERSION}: done; stages in ${OUT}/stages.yaml"
}

log "building into ${BIN} (go $(go env GOVERSION), -p ${BUILD_JOBS}, nice 10)"
wanted kwok && build_kwok
wanted etcd && build_etcd
kube_wanted=()
for cmd in "${KUBE_COMMANDS[@]}"; do wanted "$cmd" && kube_wanted+=("$cmd"); done
((${#kube_wanted[@]})) && build_kubernetes "${kube_wanted[@]}"

for b in "${TO_BUILD[@]}"; do
  log "$b: $("${STAGE}/${b}" --version 2>&1 | head -1)"
  mv -f "${STAGE}/${b}" "${BIN}/${b}"
done
echo "$KEY" >"$STAMP"
binaries_ok || die "built binaries do not report the pinned versions (see --version output above)"
rm -rf "$WORK"
log "done in $(( $(date +%s) - START ))s: ${BIN}"
echo "$BIN"
