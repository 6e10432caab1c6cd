"""What kube-apiserver 1.35 refuses in a pod's (anti-)affinity terms and topology spread constraints:
the same 422 causes (field path, reason, message, in order) on both backends, and the same pods let
through. The scheduler reads these fields; a term the real server refuses must not reach it from
the embedded one either."""

from __future__ import annotations

from typing import Any

import pytest

from minisched.cluster import Cluster
from minisched.errors import ApiError
from minisched.objects import make_pod
from minisched.resources import PODS, REPLICA_SETS

Object = dict[str, Any]

LABELS = {"app": "web", "tier": "fe"}
TERM: Object = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
NAME_PART = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
               "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
DNS_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
             "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")

ANTI = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
PREF = "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
TSC = "spec.topologySpreadConstraints[0]"


def anti(**term: Any) -> Object:
    """A required anti-affinity term: TERM with `term`'s fields replaced (None removes one)."""
    merged = {k: v for k, v in {**TERM, **term}.items() if v is not None}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [merged]}}}


def preferred(weight: Any, **term: Any) -> Object:
    merged = {k: v for k, v in {**TERM, **term}.items() if v is not None}
    return {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": merged}]}}}


def spread(*extra: Object, **constraint: Any) -> Object:
    """One topology spread constraint (valid unless `constraint` says otherwise), then `extra` ones."""
    base = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}
    merged = {k: v for k, v in {**base, **constraint}.items() if v is not None}
    return {"topologySpreadConstraints": [merged, *extra]}


def inv(field: str, shown: str, detail: str) -> tuple[str, str, str]:
    return (field, "FieldValueInvalid", f"Invalid value: {shown}: {detail}")


Causes = list[tuple[str, str, str]]

REFUSED: list[tuple[str, Object, Causes]] = [
    ("affinity-no-topology-key", anti(topologyKey=None), [
        (f"{ANTI}.topologyKey", "FieldValueRequired", "Required value: can not be empty"),
        inv(f"{ANTI}.topologyKey", '""', "name part must be non-empty"),
        inv(f"{ANTI}.topologyKey", '""', NAME_PART)]),
    ("affinity-bad-topology-key", anti(topologyKey="-zone"), [inv(f"{ANTI}.topologyKey", '"-zone"', NAME_PART)]),
    ("affinity-topology-key-bad-prefix", anti(topologyKey="Example.com/zone"), [
        inv(f"{ANTI}.topologyKey", '"Example.com/zone"', f"prefix part {SUBDOMAIN}")]),
    ("affinity-topology-key-two-slashes", anti(topologyKey="a/b/c"), [
        inv(f"{ANTI}.topologyKey", '"a/b/c"', "a valid label key " + NAME_PART[len("name part "):]
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]),
    ("affinity-selector-bad-operator", anti(labelSelector={"matchExpressions": [
        {"key": "app", "operator": "Equals", "values": ["web"]}]}), [
        inv(f"{ANTI}.labelSelector.matchExpressions[0].operator", '"Equals"', "not a valid selector operator")]),
    ("affinity-selector-in-without-values", anti(labelSelector={"matchExpressions": [
        {"key": "app", "operator": "In"}]}), [
        (f"{ANTI}.labelSelector.matchExpressions[0].values", "FieldValueRequired",
         "Required value: must be specified when `operator` is 'In' or 'NotIn'")]),
    ("affinity-selector-exists-with-values", anti(labelSelector={"matchExpressions": [
        {"key": "app", "operator": "Exists", "values": ["web"]}]}), [
        (f"{ANTI}.labelSelector.matchExpressions[0].values", "FieldValueForbidden",
         "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")]),
    ("affinity-selector-bad-value", anti(labelSelector={"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["-web"]}]}), [
        inv(f"{ANTI}.labelSelector.matchExpressions[0].values[0]", '"-web"', LABEL_VALUE)]),
    ("affinity-selector-bad-match-label", anti(labelSelector={"matchLabels": {"-app": "web"}}), [
        inv(f"{ANTI}.labelSelector.matchLabels", '"-app"', NAME_PART)]),
    ("affinity-namespace-selector-bad-key", anti(namespaceSelector={"matchExpressions": [
        {"key": "team/", "operator": "Exists"}]}), [
        inv(f"{ANTI}.namespaceSelector.matchExpressions[0].key", '"team/"', "name part must be non-empty"),
        inv(f"{ANTI}.namespaceSelector.matchExpressions[0].key", '"team/"', NAME_PART)]),
    ("affinity-bad-namespace-names", anti(namespaces=["Bad_NS", "a.b"]), [
        inv(f"{ANTI}.namespace", '"Bad_NS"', DNS_LABEL),
        inv(f"{ANTI}.namespace", '"a.b"', "must not contain dots")]),
    ("affinity-weight-zero", preferred(0), [inv(f"{PREF}.weight", "0", "must be in the range 1-100")]),
    ("affinity-weight-too-big", preferred(101), [inv(f"{PREF}.weight", "101", "must be in the range 1-100")]),
    ("affinity-preferred-term-checked", preferred(10, topologyKey="-zone"), [
        inv(f"{PREF}.podAffinityTerm.topologyKey", '"-zone"', NAME_PART)]),
    ("affinity-match-label-keys-without-selector", anti(labelSelector=None, matchLabelKeys=["app"],
                                                        mismatchLabelKeys=["tier"]), [
        (f"{ANTI}.matchLabelKeys", "FieldValueForbidden", "Forbidden: must not be specified when labelSelector is not set"),
        (f"{ANTI}.mismatchLabelKeys", "FieldValueForbidden",
         "Forbidden: must not be specified when labelSelector is not set")]),
    ("affinity-bad-mismatch-label-key", anti(mismatchLabelKeys=["-x"]), [
        inv(f"{ANTI}.mismatchLabelKeys[0]", '"-x"', NAME_PART)]),
    ("affinity-match-label-key-in-selector", anti(matchLabelKeys=["tier", "app"]), [
        inv(f"{ANTI}[1]", '"app"', "exists in both matchLabelKeys and labelSelector")]),
    ("affinity-key-matched-and-mismatched", anti(labelSelector={}, matchLabelKeys=["tier"], mismatchLabelKeys=["tier"]), [
        inv(f"{ANTI}[0]", '"tier"', "exists in both matchLabelKeys and labelSelector"),
        inv(f"{ANTI}.matchLabelKeys[0]", '"tier"', "exists in both matchLabelKeys and mismatchLabelKeys")]),
    ("spread-max-skew-zero", spread(maxSkew=0), [inv(f"{TSC}.maxSkew", "0", "must be greater than zero")]),
    ("spread-no-topology-key", spread(topologyKey=None), [
        (f"{TSC}.topologyKey", "FieldValueRequired", "Required value: can not be empty")]),
    ("spread-bad-when-unsatisfiable", spread(whenUnsatisfiable="Sometimes"), [
        (f"{TSC}.whenUnsatisfiable", "FieldValueNotSupported",
         'Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway"')]),
    ("spread-duplicate-pair", spread({"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                      "labelSelector": {"matchLabels": {"tier": "fe"}}}), [
        (f"{TSC}.{{topologyKey, whenUnsatisfiable}}", "FieldValueDuplicate",
         'Duplicate value: "{zone, DoNotSchedule}"')]),
    ("spread-min-domains-with-schedule-anyway", spread(whenUnsatisfiable="ScheduleAnyway", minDomains=2), [
        inv(f"{TSC}.minDomains", "2", "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway")]),
    ("spread-min-domains-zero", spread(minDomains=0), [inv(f"{TSC}.minDomains", "0", "must be greater than zero")]),
    ("spread-bad-node-policies", spread(nodeAffinityPolicy="Always", nodeTaintsPolicy="honor"), [
        (f"{TSC}.nodeAffinityPolicy", "FieldValueNotSupported",
         'Unsupported value: "Always": supported values: "Honor", "Ignore"'),
        (f"{TSC}.nodeTaintsPolicy", "FieldValueNotSupported",
         'Unsupported value: "honor": supported values: "Honor", "Ignore"')]),
    ("spread-match-label-keys-without-selector", spread(labelSelector=None, matchLabelKeys=["app"]), [
        (f"{TSC}.matchLabelKeys", "FieldValueForbidden", "Forbidden: must not be specified when labelSelector is not set")]),
    ("spread-bad-match-label-key", spread(matchLabelKeys=["-x"]), [inv(f"{TSC}.matchLabelKeys[0]", '"-x"', NAME_PART)]),
    ("spread-match-label-key-in-selector", spread(matchLabelKeys=["app"]), [
        inv(f"{TSC}[0]", '"app"', "exists in both matchLabelKeys and labelSelector")]),
    ("spread-selector-bad-operator", spread(labelSelector={"matchExpressions": [{"key": "app", "operator": "in",
                                                                                 "values": ["web"]}]}), [
        inv(f"{TSC}.labelSelector.matchExpressions[0].operator", '"in"', "not a valid selector operator")]),
]

ACCEPTED: list[tuple[str, Object]] = [
    ("affinity-everything-valid", {"affinity": {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
            **TERM, "namespaces": ["other"], "namespaceSelector": {"matchLabels": {"team": "a"}},
            "matchLabelKeys": ["tier"]}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]},
            "topologyKey": "topology.kubernetes.io/zone", "mismatchLabelKeys": ["app"]}]}}}),
    # the pod has no "release" label, so nothing is merged and the key is not repeated in the selector
    ("affinity-match-label-key-the-pod-lacks", anti(labelSelector={"matchLabels": {"release": "1"}},
                                                    matchLabelKeys=["release"])),
    ("spread-everything-valid", spread({"maxSkew": 3, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                                        "labelSelector": {"matchLabels": {"app": "web"}}},
                                       minDomains=2, nodeAffinityPolicy="Ignore", nodeTaintsPolicy="Honor",
                                       matchLabelKeys=["tier"])),
]


def _pod(spec: Object, ns: str) -> Object:
    pod = make_pod("x", namespace=ns, labels=dict(LABELS))
    pod["spec"].update(spec)
    return pod


@pytest.mark.parametrize(("case", "spec", "causes"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refused(cluster: Cluster, ns: str, case: str, spec: Object, causes: Causes) -> None:
    with pytest.raises(ApiError) as err:
        cluster.create(PODS, _pod(spec, ns))
    assert (err.value.status, err.value.reason) == (422, "Invalid"), err.value.message
    assert err.value.message.startswith('Pod "x" is invalid: '), err.value.message
    assert [(c.field, c.reason, c.message) for c in err.value.causes] == causes


@pytest.mark.parametrize(("case", "spec"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_accepted(cluster: Cluster, ns: str, case: str, spec: Object) -> None:
    created = cluster.create(PODS, _pod(spec, ns))
    assert created["metadata"]["name"] == "x"


def test_a_pod_template_is_checked_too(cluster: Cluster, ns: str) -> None:
    """A ReplicaSet whose pods the real server would refuse is refused itself (ValidatePodTemplateSpec)."""
    template = {"metadata": {"labels": dict(LABELS)},
                "spec": {"containers": [{"name": "c", "image": "pause"}], **anti(topologyKey="-zone")}}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}}
    with pytest.raises(ApiError) as err:
        cluster.create(REPLICA_SETS, rs, ns)
    assert err.value.status == 422, err.value.message
    assert [(c.field, c.reason, c.message) for c in err.value.causes] == [
        inv(f"spec.template.{ANTI}.topologyKey", '"-zone"', NAME_PART)]


def test_a_gated_pod_may_take_node_affinity_but_not_pod_affinity(cluster: Cluster, ns: str) -> None:
    """Mutable scheduling directives: while a pod is gated its node affinity may be set, its pod
    (anti-)affinity may not change (kube keeps it immutable because of matchLabelKeys)."""
    pod = make_pod("g", namespace=ns, labels=dict(LABELS), scheduling_gates=["example.com/wait"])
    cluster.create(PODS, pod)
    current = cluster.get(PODS, "g", ns)
    current["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    updated = cluster.update(PODS, current)
    assert "nodeAffinity" in updated["spec"]["affinity"]
    updated["spec"]["affinity"]["podAntiAffinity"] = anti()["affinity"]["podAntiAffinity"]
    with pytest.raises(ApiError) as err:
        cluster.update(PODS, updated)
    assert err.value.status == 422, err.value.message
    assert [(c.field, c.reason) for c in err.value.causes] == [("spec", "FieldValueForbidden")]
    assert err.value.causes[0].message.startswith("Forbidden: pod updates may not change fields other than ")
    assert "podAntiAffinity" not in cluster.get(PODS, "g", ns)["spec"]["affinity"]


NODE_TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def _zone_in(*zones: str) -> Object:
    return {"key": "zone", "operator": "In", "values": list(zones)}


def _required_node_affinity(*terms: list[Object]) -> Object:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}


GATED_UPDATES: list[tuple[str, Object, Causes]] = [
    ("selector-key-added", {"nodeSelector": {"disk": "ssd", "zone": "a"}}, []),
    ("selector-value-changed", {"nodeSelector": {"disk": "hdd"}}, [
        inv("spec.nodeSelector", '{"disk":"hdd"}', "only additions to spec.nodeSelector are allowed (no mutations or "
                                                  "deletions)")]),
    ("requirement-added", {"affinity": _required_node_affinity([_zone_in("a"), {"key": "rack", "operator": "Exists"}])},
     []),
    ("requirement-changed", {"affinity": _required_node_affinity([_zone_in("b")])}, [
        inv(f"{NODE_TERMS}[0]", '{"MatchExpressions":[{"Key":"zone","Operator":"In","Values":["b"]}],"MatchFields":null}',
            "only additions are allowed (no mutations or deletions)")]),
    ("term-added", {"affinity": _required_node_affinity([_zone_in("a")], [_zone_in("b")])}, [
        inv(NODE_TERMS, '[{"MatchExpressions":[{"Key":"zone","Operator":"In","Values":["a"]}],"MatchFields":null},'
                        '{"MatchExpressions":[{"Key":"zone","Operator":"In","Values":["b"]}],"MatchFields":null}]',
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed")]),
]


@pytest.mark.parametrize(("case", "change", "causes"), GATED_UPDATES, ids=[c[0] for c in GATED_UPDATES])
def test_what_a_gated_pod_may_change(cluster: Cluster, ns: str, case: str, change: Object, causes: Causes) -> None:
    """A gated pod's node selector takes new keys only, its required node affinity terms new
    requirements only (ValidatePodUpdate's mutation checks for scheduling directives)."""
    pod = make_pod("g", namespace=ns, node_selector={"disk": "ssd"}, scheduling_gates=["example.com/wait"],
                   affinity=_required_node_affinity([_zone_in("a")]))
    cluster.create(PODS, pod)
    current = cluster.get(PODS, "g", ns)
    current["spec"].update(change)
    if not causes:
        assert {k: cluster.update(PODS, current)["spec"][k] for k in change} == change
        return
    with pytest.raises(ApiError) as err:
        cluster.update(PODS, current)
    assert err.value.status == 422, err.value.message
    assert [(c.field, c.reason, c.message) for c in err.value.causes] == causes


LABEL_KEYS: list[tuple[str, Object, Causes]] = [
    ("label-key-bad-prefix", {"metadata": {"labels": {"Example.com/app": "web"}}}, [
        inv("metadata.labels", '"Example.com/app"', f"prefix part {SUBDOMAIN}")]),
    ("node-selector-key-two-slashes", {"spec": {"nodeSelector": {"a/b/c": "x"}}}, [
        inv("spec.nodeSelector", '"a/b/c"', "a valid label key " + NAME_PART[len("name part "):]
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")]),
    ("toleration-key-empty-name", {"spec": {"tolerations": [{"key": "example.com/", "operator": "Exists"}]}}, [
        inv("spec.tolerations[0].key", '"example.com/"', "name part must be non-empty"),
        inv("spec.tolerations[0].key", '"example.com/"', NAME_PART)]),
    ("required-node-affinity-bad-value", {"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["-a"]}]}]}}}}}, [
        inv(f"{NODE_TERMS}[0].matchExpressions[0].values[0]", '"-a"', LABEL_VALUE)]),
    # preferred node affinity may name any value: kube skips the value check for it
    ("preferred-node-affinity-any-value", {"spec": {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["-a"]}]}}]}}}}, []),
]


@pytest.mark.parametrize(("case", "change", "causes"), LABEL_KEYS, ids=[c[0] for c in LABEL_KEYS])
def test_label_keys_and_values_are_worded_as_kube_words_them(cluster: Cluster, ns: str, case: str, change: Object,
                                                             causes: Causes) -> None:
    pod = make_pod("x", namespace=ns)
    for part, fields in change.items():
        pod[part].update(fields)
    if not causes:
        assert cluster.create(PODS, pod)["metadata"]["name"] == "x"
        return
    with pytest.raises(ApiError) as err:
        cluster.create(PODS, pod)
    assert err.value.status == 422, err.value.message
    assert [(c.field, c.reason, c.message) for c in err.value.causes] == causes
