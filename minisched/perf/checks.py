"""After a workload: do the final placements keep the pods' hard constraints?

"Every pod scheduled" alone would pass a scheduler that ignores affinity, so the correctness runs
also check, over the bound pods at the end and independently of any scheduler code:

- required node affinity and nodeSelector: the pod's node matches;
- required pod anti-affinity: no other matching pod (in the term's namespaces) in the same domain;
- required pod affinity: a matching pod in the same domain (the pod itself counts when it matches
  its own term: kube lets the first pod of a group go anywhere);
- topology spread with DoNotSchedule: max - min of matching pods over the domains of nodes that
  have the key stays within maxSkew (each placement kept it then, and the minimum only grows when
  nothing is deleted, so it holds at the end too).

Only pods never deleted are in play here: a workload that deletes pods (preemption, churn) can
leave a spread legitimately above maxSkew, so the spread check is for workloads without deletions.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from minisched.selectors import from_label_selector_json

Object = dict[str, Any]


def _labels(obj: Object) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), [str(v) for v in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _node_term_matches(term: Mapping[str, Any], node: Object) -> bool:
    labels = _labels(node)
    fields = {"metadata.name": node["metadata"]["name"]}
    exprs = term.get("matchExpressions") or []
    field_exprs = term.get("matchFields") or []
    if not exprs and not field_exprs:
        return False  # an empty term matches nothing
    return (all(_expression_matches(e, labels) for e in exprs)
            and all(_expression_matches(e, fields) for e in field_exprs))


def node_affinity_violation(pod: Object, node: Object) -> str | None:
    spec = pod.get("spec") or {}
    labels = _labels(node)
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return f"nodeSelector {k}={v}"
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if terms and not any(_node_term_matches(t, node) for t in terms):
        return "required node affinity"
    return None


def _term_namespaces(term: Mapping[str, Any], pod_namespace: str) -> set[str] | None:
    """None: every namespace (an empty namespaceSelector)."""
    if term.get("namespaceSelector") is not None:
        if not term["namespaceSelector"]:
            return None
        # namespace labels are not tracked here; such terms are checked over all namespaces, which
        # only makes the anti-affinity check stricter and the affinity check looser.
        return None
    return set(term.get("namespaces") or []) or {pod_namespace}


def placement_violations(pods: list[Object], nodes: list[Object], *, check_spread: bool = True) -> list[str]:
    """Every hard constraint broken by the bound pods' placement, as "ns/name: what" lines.

    Pods sharing a term share its count of matching pods per domain (kube's workloads give
    thousands of pods the same term), so this stays linear in pods times distinct terms."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")
             and p["spec"]["nodeName"] in by_name]
    node_labels = {name: _labels(n) for name, n in by_name.items()}
    pod_labels = [_labels(p) for p in bound]
    found: list[str] = []
    counted: dict[str, Counter[str | None]] = {}

    def domain(pod: Object, key: str) -> str | None:
        return node_labels[pod["spec"]["nodeName"]].get(key)

    def counts(kind: str, selector_json: Any, namespaces: set[str] | None, key: str) -> Counter[str | None]:
        """How many bound pods match, per value of `key` on their nodes."""
        cache_key = json.dumps([kind, selector_json, sorted(namespaces) if namespaces is not None else None, key],
                               sort_keys=True)
        if cache_key not in counted:
            selector = from_label_selector_json(selector_json)
            counted[cache_key] = Counter(
                domain(q, key) for q, labels in zip(bound, pod_labels, strict=True)
                if (namespaces is None or q["metadata"].get("namespace") in namespaces) and selector.matches(labels))
        return counted[cache_key]

    for pod, labels in zip(bound, pod_labels, strict=True):
        namespace = pod["metadata"].get("namespace", "")
        key = f"{namespace}/{pod['metadata']['name']}"
        node = by_name[pod["spec"]["nodeName"]]
        problem = node_affinity_violation(pod, node)
        if problem:
            found.append(f"{key}: on {node['metadata']['name']} against its {problem}")
        affinity = (pod.get("spec") or {}).get("affinity") or {}
        for term in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            tkey = term["topologyKey"]
            mine = domain(pod, tkey)
            if mine is None:
                continue
            namespaces = _term_namespaces(term, namespace)
            itself = (namespaces is None or namespace in namespaces) and \
                from_label_selector_json(term.get("labelSelector")).matches(labels)
            others = counts("term", term.get("labelSelector"), namespaces, tkey)[mine] - (1 if itself else 0)
            if others > 0:
                found.append(f"{key}: anti-affinity broken by {others} matching pod(s) in {tkey}={mine}")
        for term in (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            tkey = term["topologyKey"]
            mine = domain(pod, tkey)
            namespaces = _term_namespaces(term, namespace)
            if mine is None or counts("term", term.get("labelSelector"), namespaces, tkey)[mine] == 0:
                found.append(f"{key}: no pod its required affinity asks for in {tkey}={mine}")
        if not check_spread:
            continue
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            tkey = c["topologyKey"]
            per_domain = {v: 0 for v in (node_labels[n].get(tkey) for n in node_labels) if v is not None}
            for d, n in counts("spread", c.get("labelSelector"), {namespace}, tkey).items():
                if d is not None:
                    per_domain[d] = n
            skew = max(per_domain.values()) - min(per_domain.values()) if per_domain else 0
            if skew > int(c.get("maxSkew", 1)):
                found.append(f"{key}: {tkey} skew {skew} > maxSkew {c.get('maxSkew')} ({per_domain})")
    return sorted(set(found))
