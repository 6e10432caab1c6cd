#!/usr/bin/env bash
# Create or delete the workbook's kind cluster, saying exactly what is missing when it can't.
set -euo pipefail
action=${1:?usage: hack/kind.sh up|down}
case "$action" in up|down) ;; *) echo "usage: hack/kind.sh up|down" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
missing=()
command -v kind >/dev/null 2>&1 || missing+=("kind (https://kind.sigs.k8s.io: 'go install sigs.k8s.io/kind@latest')")
command -v docker >/dev/null 2>&1 || missing+=("docker (the Docker CLI)")
if command -v docker >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  missing+=("a running Docker engine ('docker info' fails: start Docker Desktop or the docker service)")
fi
if ((${#missing[@]})); then
  echo "cannot $action the kind cluster; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  echo "without them, use the embedded cluster (the default) or 'make cluster-local'." >&2
  exit 1
fi
case "$action" in
  up)
    if kind get clusters 2>/dev/null | grep -qx minisched; then
      echo "kind cluster 'minisched' already exists"
    else
      kind create cluster --config deploy/kind.yaml --wait 120s
    fi
    kubectl --context kind-minisched apply -f deploy/rbac.yaml
    echo "ready: MINISCHED_BACKEND=context:kind-minisched make lab"
    ;;
  down) kind delete cluster --name minisched ;;
  *) echo "usage: hack/kind.sh up|down" >&2; exit 2 ;;
esac
