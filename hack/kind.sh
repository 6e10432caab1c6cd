#!/usr/bin/env bash
# Create or delete the workbook's kind cluster, saying exactly what is missing when it can't.
#
# `up` (make cluster-up) installs, in this order:
#   1. the kind cluster "minisched" from deploy/kind.yaml (a control-plane node, three workers);
#   2. KWOK ${KWOK_VERSION}, from its release manifests kwok.yaml (CRDs, RBAC, the kwok-controller
#      Deployment in kube-system) and stage-fast.yaml (the Stages that make nodes Ready and pods Running),
#      with kwok-controller set to manage only nodes with the label key minisched.dev/chapter: the
#      nodes the chapters create, which no kubelet would otherwise keep alive (the node lifecycle
#      controller marks a node unreachable 50 s after its last heartbeat);
#   3. a node affinity that keeps kwok-controller itself and kind's DaemonSets kindnet and kube-proxy
#      off those chapter nodes (a kwok-controller placed on a node it fakes would never run; each
#      DaemonSet would put a pod on every chapter node, kindnet's requesting 100m CPU and 50Mi, so
#      what fits on a chapter's nodes would differ from the embedded cluster);
#   4. deploy/rbac.yaml (the minisched ClusterRole and its binding).
# Every step is idempotent: `up` on an existing cluster re-applies 2-4.
set -euo pipefail
action=${1:?usage: hack/kind.sh up|down}
case "$action" in up|down) ;; *) echo "usage: hack/kind.sh up|down" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."

CLUSTER=minisched
CONTEXT="kind-${CLUSTER}"
# Keep in step with KWOK_VERSION in minisched/controlplane/binaries.py (tests/test_kind_script.py checks).
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
KWOK_RELEASE="https://github.com/kubernetes-sigs/kwok/releases/download/${KWOK_VERSION}"
CHAPTER_NODE_LABEL="minisched.dev/chapter"

missing=()
command -v kind >/dev/null 2>&1 || missing+=("kind (https://kind.sigs.k8s.io: 'go install sigs.k8s.io/kind@latest')")
command -v docker >/dev/null 2>&1 || missing+=("docker (the Docker CLI)")
if command -v docker >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  missing+=("a running Docker engine ('docker info' fails: start Docker Desktop or the docker service)")
fi
if [[ "$action" == up ]]; then
  command -v kubectl >/dev/null 2>&1 \
    || missing+=("kubectl (https://kubernetes.io/docs/tasks/tools/: installs KWOK and the RBAC into the cluster)")
fi
if ((${#missing[@]})); then
  echo "cannot $action the kind cluster; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  echo "without them, use the embedded cluster (the default) or 'make cluster-local'." >&2
  exit 1
fi

kube() { kubectl --context "$CONTEXT" "$@"; }

# A pod template's node affinity: never on a chapter node (strategic merge patch of a workload).
NOT_ON_CHAPTER_NODES="{\"spec\": {\"template\": {\"spec\": {\"affinity\": {\"nodeAffinity\": {
  \"requiredDuringSchedulingIgnoredDuringExecution\": {\"nodeSelectorTerms\": [{\"matchExpressions\": [
    {\"key\": \"${CHAPTER_NODE_LABEL}\", \"operator\": \"DoesNotExist\"}]}]}}}}}}}"

install_kwok() {
  echo "installing KWOK ${KWOK_VERSION} (${KWOK_RELEASE}/kwok.yaml, stage-fast.yaml)"
  kube apply -f "${KWOK_RELEASE}/kwok.yaml"
  kube apply -f "${KWOK_RELEASE}/stage-fast.yaml"
  # The release's config selects nodes annotated kwok.x-k8s.io/node=fake; KWOK ANDs that with a label
  # selector, so the annotation selector is emptied and the chapter label alone selects.
  kube -n kube-system patch deployment kwok-controller --type=json -p "[{\"op\": \"replace\",
    \"path\": \"/spec/template/spec/containers/0/args\", \"value\": [
      \"--config=/root/.kwok/kwok.yaml\", \"--node-ip=\$(POD_IP)\", \"--manage-all-nodes=false\",
      \"--manage-nodes-with-annotation-selector=\",
      \"--manage-nodes-with-label-selector=${CHAPTER_NODE_LABEL}\"]}]"
  kube -n kube-system patch deployment kwok-controller --type=strategic -p "$NOT_ON_CHAPTER_NODES"
  kube -n kube-system rollout status deployment/kwok-controller --timeout=180s
}

keep_daemonsets_off_chapter_nodes() {
  for daemonset in kindnet kube-proxy; do
    kube -n kube-system patch daemonset "$daemonset" --type=strategic -p "$NOT_ON_CHAPTER_NODES"
  done
}

case "$action" in
  up)
    if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
      echo "kind cluster '$CLUSTER' already exists"
    else
      kind create cluster --config deploy/kind.yaml --wait 120s
    fi
    install_kwok
    keep_daemonsets_off_chapter_nodes
    kube apply -f deploy/rbac.yaml
    echo "ready: MINISCHED_BACKEND=context:${CONTEXT} make lab"
    ;;
  down) kind delete cluster --name "$CLUSTER" ;;
esac
