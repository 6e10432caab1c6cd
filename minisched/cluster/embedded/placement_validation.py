"""Validation of where a pod asks to go: pod (anti-)affinity terms and topology spread constraints.

Ported from kube-apiserver 1.35 (pkg/apis/core/validation: validatePodAffinityTerm,
validateWeightedPodAffinityTerms, validateTopologySpreadConstraints,
ValidateMatchLabelKeysAndMismatchLabelKeys; apimachinery's ValidateLabelSelector and IsQualifiedName),
in the same order and with the same field paths, quirks included: a bad namespace name is reported
under `...namespace` (singular), and a matchLabelKeys entry that repeats a labelSelector key under
the term's own path indexed by the entry (`...requiredDuringSchedulingIgnoredDuringExecution[0][1]`).

Runs after the pod's matchLabelKeys / mismatchLabelKeys were merged into its selectors
(admission.merge_match_label_keys, merge_spread_match_label_keys), as kube's PrepareForCreate
runs before its validation: the duplicate-key rule relies on that.
"""

from __future__ import annotations

import json
import re
from typing import Any

from minisched.errors import Cause

from .statuses import forbidden_field, invalid_value, not_supported, required

Object = dict[str, Any]

_LABEL_KEY_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _regex_error(msg: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError, double spaces and all."""
    if not examples:
        return f"{msg} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{pattern}')"


_NAME_PART = _regex_error("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                          "alphanumeric character", _LABEL_KEY_NAME.pattern, "MyName", "my.name", "123-abc")
_SUBDOMAIN = _regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character", _DNS1123_SUBDOMAIN.pattern,
                          "example.com")
_LABEL = _regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                      "must start and end with an alphanumeric character", _DNS1123_LABEL.pattern, "my-name",
                      "123-abc")
_VALUE = _regex_error("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                      "and must start and end with an alphanumeric character", _LABEL_VALUE.pattern, "MyValue",
                      "my_value", "12345")


def qualified_name_errors(value: str) -> list[str]:
    """IsQualifiedName (content.IsLabelKey): every problem with a label key, worded as kube words it."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a valid label key {_NAME_PART} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                errors.append(f"prefix part {_SUBDOMAIN}")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _LABEL_KEY_NAME.fullmatch(name):
        errors.append(f"name part {_NAME_PART}")
    return errors


def label_value_errors(value: str) -> list[str]:
    """IsValidLabelValue."""
    errors = ["must be no more than 63 characters"] if len(value) > 63 else []
    return errors + ([] if _LABEL_VALUE.fullmatch(value) else [_VALUE])


def _namespace_name_errors(value: str) -> list[str]:
    """ValidateNamespaceName (IsDNS1123Label)."""
    errors = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _DNS1123_LABEL.fullmatch(value):
        errors.append("must not contain dots" if _DNS1123_SUBDOMAIN.fullmatch(value) else _LABEL)
    return errors


def label_name_causes(path: str, key: Any) -> list[Cause]:
    """ValidateLabelName: one cause per problem, each naming the key."""
    key = key if isinstance(key, str) else ""
    return [invalid_value(path, key, msg) for msg in qualified_name_errors(key)]


def set_operator_causes(where: str, operator: str, values: list[Any]) -> list[Cause] | None:
    """The values an In, NotIn, Exists or DoesNotExist requirement must (not) have; None for another
    operator (label and node selectors differ on those)."""
    if operator in ("In", "NotIn"):
        return [] if values else [required(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'")]
    if operator in ("Exists", "DoesNotExist"):
        return [forbidden_field(f"{where}.values", "may not be specified when `operator` is 'Exists' or "
                                                   "'DoesNotExist'")] if values else []
    return None


def label_map_causes(path: str, labels: Any) -> list[Cause]:
    """ValidateLabels: each key a qualified name, each value a label value (a value that is not a
    string, which the real server refuses when decoding, is refused here too)."""
    causes: list[Cause] = []
    for key, value in (labels.items() if isinstance(labels, dict) else ()):
        causes += label_name_causes(path, str(key))
        problems = label_value_errors(value) if isinstance(value, str) else ["must be a string"]
        causes += [invalid_value(path, value, msg) for msg in problems]
    return causes


def label_selector_causes(path: str, selector: Any) -> list[Cause]:
    """metav1 ValidateLabelSelector (invalid label values not allowed); a null selector is valid."""
    if not isinstance(selector, dict):
        return []
    causes = label_map_causes(f"{path}.matchLabels", selector.get("matchLabels"))
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        if not isinstance(expr, dict):
            continue
        where = f"{path}.matchExpressions[{i}]"
        operator, values = expr.get("operator") or "", expr.get("values") or []
        known = set_operator_causes(where, operator, values)
        causes += [invalid_value(f"{where}.operator", operator, "not a valid selector operator")] if known is None else known
        causes += label_name_causes(f"{where}.key", expr.get("key") or "")
        for k, value in enumerate(values):
            text = value if isinstance(value, str) else ""
            causes += [invalid_value(f"{where}.values[{k}]", text, msg) for msg in label_value_errors(text)]
    return causes


def match_label_keys_causes(path: str, match_keys: list[str], mismatch_keys: list[str], selector: Any) -> list[Cause]:
    """ValidateMatchLabelKeysAndMismatchLabelKeys, on the selector the keys were merged into."""
    causes: list[Cause] = []
    for field, keys in (("matchLabelKeys", match_keys), ("mismatchLabelKeys", mismatch_keys)):
        if not keys:
            continue
        if selector is None:
            causes.append(forbidden_field(f"{path}.{field}", "must not be specified when labelSelector is not set"))
            continue
        for i, key in enumerate(keys):
            causes += label_name_causes(f"{path}.{field}[{i}]", key)
    if isinstance(selector, dict):
        index = {key: i for i, key in enumerate(match_keys)}
        seen = set(selector.get("matchLabels") or {})
        for expr in selector.get("matchExpressions") or []:
            key = str(expr.get("key") or "") if isinstance(expr, dict) else ""
            if key in index and key in seen:  # the term's path, indexed by the key's place (kube's own path)
                causes.append(invalid_value(f"{path}[{index[key]}]", key, "exists in both matchLabelKeys and labelSelector"))
            seen.add(key)
    mismatched = set(mismatch_keys)
    for i, key in enumerate(match_keys):
        if key in mismatched:
            causes.append(invalid_value(f"{path}.matchLabelKeys[{i}]", key,
                                        "exists in both matchLabelKeys and mismatchLabelKeys"))
    return causes


def _keys(value: Any) -> list[str]:
    return [k if isinstance(k, str) else "" for k in value] if isinstance(value, list) else []


def pod_affinity_term_causes(path: str, term: Any) -> list[Cause]:
    """validatePodAffinityTerm."""
    if not isinstance(term, dict):
        term = {}
    causes = label_selector_causes(f"{path}.labelSelector", term.get("labelSelector"))
    causes += label_selector_causes(f"{path}.namespaceSelector", term.get("namespaceSelector"))
    for name in term.get("namespaces") or []:
        text = name if isinstance(name, str) else ""
        causes += [invalid_value(f"{path}.namespace", text, msg) for msg in _namespace_name_errors(text)]
    causes += match_label_keys_causes(path, _keys(term.get("matchLabelKeys")), _keys(term.get("mismatchLabelKeys")),
                                      term.get("labelSelector"))
    topology_key = term.get("topologyKey") or ""
    if not topology_key:
        causes.append(required(f"{path}.topologyKey", "can not be empty"))
    return causes + label_name_causes(f"{path}.topologyKey", topology_key)


def _weight(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def pod_affinity_causes(path: str, affinity: Any) -> list[Cause]:
    """validatePodAffinity / validatePodAntiAffinity: the required terms, then the weighted ones."""
    if not isinstance(affinity, dict):
        return []
    causes: list[Cause] = []
    for i, term in enumerate(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
        causes += pod_affinity_term_causes(f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", term)
    for i, weighted in enumerate(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        where = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weighted = weighted if isinstance(weighted, dict) else {}
        weight = _weight(weighted.get("weight"))
        if not 1 <= weight <= 100:
            causes.append(invalid_value(f"{where}.weight", weight, "must be in the range 1-100"))
        causes += pod_affinity_term_causes(f"{where}.podAffinityTerm", weighted.get("podAffinityTerm"))
    return causes


SCHEDULE_ACTIONS = ["DoNotSchedule", "ScheduleAnyway"]
NODE_INCLUSION_POLICIES = ["Honor", "Ignore"]


def topology_spread_causes(path: str, constraints: Any) -> list[Cause]:
    """validateTopologySpreadConstraints, as a create sees it (MatchLabelKeysInPodTopologySpread and
    its SelectorMerge gate on: the matchLabelKeys rules are ValidateMatchLabelKeysAndMismatchLabelKeys)."""
    if not isinstance(constraints, list):
        return []
    items = [c if isinstance(c, dict) else {} for c in constraints]
    causes: list[Cause] = []
    for i, c in enumerate(items):
        where = f"{path}[{i}]"
        max_skew = _weight(c.get("maxSkew"))
        if max_skew <= 0:
            causes.append(invalid_value(f"{where}.maxSkew", max_skew, "must be greater than zero"))
        topology_key = c.get("topologyKey") or ""
        if not topology_key:
            causes.append(required(f"{where}.topologyKey", "can not be empty"))
        action = c.get("whenUnsatisfiable") or ""
        if action not in SCHEDULE_ACTIONS:
            causes.append(not_supported(f"{where}.whenUnsatisfiable", action, SCHEDULE_ACTIONS))
        if any((o.get("topologyKey") or "") == topology_key and (o.get("whenUnsatisfiable") or "") == action
               for o in items[i + 1:]):
            causes.append(Cause(f"{where}.{{topologyKey, whenUnsatisfiable}}",
                                f'Duplicate value: "{{{topology_key}, {action}}}"', "FieldValueDuplicate"))
        if c.get("minDomains") is not None:
            min_domains = _weight(c.get("minDomains"))
            if min_domains <= 0:
                causes.append(invalid_value(f"{where}.minDomains", min_domains, "must be greater than zero"))
            if action != "DoNotSchedule":
                causes.append(invalid_value(f"{where}.minDomains", min_domains,
                                            f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"))
        for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = c.get(field)
            if policy is not None and policy not in NODE_INCLUSION_POLICIES:
                causes.append(not_supported(f"{where}.{field}", policy, NODE_INCLUSION_POLICIES))
        causes += match_label_keys_causes(where, _keys(c.get("matchLabelKeys")), [], c.get("labelSelector"))
        causes += label_selector_causes(f"{where}.labelSelector", c.get("labelSelector"))
    return causes


def placement_causes(path: str, spec: Object) -> list[Cause]:
    """A pod spec's (or pod template's) pod affinity, anti-affinity and spread constraints, `path`
    naming the spec ("spec", "spec.template.spec")."""
    affinity = spec.get("affinity")
    affinity = affinity if isinstance(affinity, dict) else {}
    causes = pod_affinity_causes(f"{path}.affinity.podAffinity", affinity.get("podAffinity"))
    causes += pod_affinity_causes(f"{path}.affinity.podAntiAffinity", affinity.get("podAntiAffinity"))
    return causes + topology_spread_causes(f"{path}.topologySpreadConstraints", spec.get("topologySpreadConstraints"))


def _go_json(value: Any) -> str:
    """How field.Invalid shows a map or slice value: Go's json.Marshal (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _internal_requirements(reqs: Any) -> list[Object] | None:
    """NodeSelectorRequirements as the internal (untagged) Go type marshals them."""
    if not reqs:
        return None
    return [{"Key": r.get("key") or "", "Operator": r.get("operator") or "", "Values": r.get("values")}
            for r in reqs if isinstance(r, dict)]


def _required_terms(affinity: Any) -> list[Object] | None:
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required_selector = node.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node, dict) else None
    if not isinstance(required_selector, dict):
        return None
    return [t if isinstance(t, dict) else {} for t in required_selector.get("nodeSelectorTerms") or []]


def _only_additions(new: Object, old: Object) -> bool:
    """validateNodeSelectorTermHasOnlyAdditions: each old requirement list is a prefix of the new one."""
    old_exprs, old_fields = old.get("matchExpressions") or [], old.get("matchFields") or []
    if not old_exprs and not old_fields and (new.get("matchExpressions") or new.get("matchFields")):
        return False
    return all((new.get(key) or [])[:len(kept)] == kept and len(new.get(key) or []) >= len(kept)
               for key, kept in (("matchExpressions", old_exprs), ("matchFields", old_fields)))


def gated_update_causes(old_spec: Object, new_spec: Object) -> list[Cause]:
    """What a gated pod's update may do to its node selector (add keys) and required node affinity
    (add requirements to the terms it has): ValidatePodUpdate's validateNodeSelectorMutation and
    validateNodeAffinityMutation. The caller masks both fields out of the immutable-spec comparison."""
    if not old_spec.get("schedulingGates"):
        return []
    causes: list[Cause] = []
    old_selector, new_selector = old_spec.get("nodeSelector") or {}, new_spec.get("nodeSelector") or {}
    if any(new_selector.get(k) != v for k, v in old_selector.items()):
        causes.append(Cause("spec.nodeSelector", f"Invalid value: {_go_json(new_selector)}: only additions to "
                                                 "spec.nodeSelector are allowed (no mutations or deletions)"))
    old_terms, new_terms = _required_terms(old_spec.get("affinity")), _required_terms(new_spec.get("affinity")) or []
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    if not old_terms or old_terms == new_terms:
        return causes
    shown = [{"MatchExpressions": _internal_requirements(t.get("matchExpressions")),
              "MatchFields": _internal_requirements(t.get("matchFields"))} for t in new_terms]
    if len(old_terms) != len(new_terms):
        return causes + [Cause(path, f"Invalid value: {_go_json(shown or None)}: no additions/deletions to non-empty "
                                     "NodeSelectorTerms list are allowed")]
    for i, (new, old) in enumerate(zip(new_terms, old_terms, strict=True)):
        if not _only_additions(new, old):
            causes.append(Cause(f"{path}[{i}]", f"Invalid value: {_go_json(shown[i])}: only additions are allowed "
                                                "(no mutations or deletions)"))
    return causes
