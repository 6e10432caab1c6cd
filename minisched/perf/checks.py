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

from collections.abc import Iterable, Mapping
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


def _matching(term: Mapping[str, Any], pod: Object, pods: Iterable[Object]) -> list[Object]:
    selector = from_label_selector_json(term.get("labelSelector"))
    namespaces = _term_namespaces(term, pod["metadata"].get("namespace", ""))
    return [q for q in pods if (namespaces is None or q["metadata"].get("namespace") in namespaces)
            and selector.matches(_labels(q))]


def placement_violations(pods: list[Object], nodes: list[Object], *, check_spread: bool = True) -> list[str]:
    """Every hard constraint broken by the bound pods' placement, as "ns/name: what" lines."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")]
    found: list[str] = []

    def domain(pod: Object, key: str) -> str | None:
        node = by_name.get(pod["spec"]["nodeName"])
        return None if node is None else _labels(node).get(key)

    for pod in bound:
        key = f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
        node = by_name.get(pod["spec"]["nodeName"])
        if node is None:
            continue
        problem = node_affinity_violation(pod, node)
        if problem:
            found.append(f"{key}: on {node['metadata']['name']} against its {problem}")
        affinity = (pod.get("spec") or {}).get("affinity") or {}
        for term in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            mine = domain(pod, term["topologyKey"])
            if mine is None:
                continue
            clash = [q for q in _matching(term, pod, bound) if q is not pod and domain(q, term["topologyKey"]) == mine]
            if clash:
                found.append(f"{key}: anti-affinity broken by {clash[0]['metadata']['name']} in "
                             f"{term['topologyKey']}={mine}")
        for term in (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            mine = domain(pod, term["topologyKey"])
            matching = _matching(term, pod, bound)
            if mine is None or not any(domain(q, term["topologyKey"]) == mine for q in matching):
                found.append(f"{key}: no pod its required affinity asks for in {term['topologyKey']}={mine}")
        if not check_spread:
            continue
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []:
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            tkey = c["topologyKey"]
            counts = {_labels(n)[tkey]: 0 for n in nodes if tkey in _labels(n)}
            selector = from_label_selector_json(c.get("labelSelector"))
            for q in bound:
                if q["metadata"].get("namespace") == pod["metadata"].get("namespace") and selector.matches(_labels(q)):
                    d = domain(q, tkey)
                    if d is not None:
                        counts[d] = counts.get(d, 0) + 1
            if counts and max(counts.values()) - min(counts.values()) > int(c.get("maxSkew", 1)):
                found.append(f"{key}: {tkey} skew {max(counts.values()) - min(counts.values())} > maxSkew "
                             f"{c.get('maxSkew')} ({counts})")
    return sorted(set(found))
