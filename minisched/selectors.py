"""Label and field selectors, parsed and matched the way the API server does it.

A label selector ("app=web,tier in (a,b),!canary") is a list of requirements that must all hold.
The same requirements come from the LabelSelector JSON that PodDisruptionBudgets and affinity
terms carry (matchLabels / matchExpressions). A field selector ("spec.nodeName=,status.phase!=Failed")
compares a few server-known fields; each kind supports its own small set, and asking for another
field is a 400 BadRequest, exactly as kube-apiserver answers.

Semantics worth knowing (k8s.io/apimachinery/pkg/labels): `key!=v` and `key notin (...)` also
match objects that do not have the label at all; an empty selector matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from minisched.errors import BadRequest

# Operators, spelled as in selector strings.
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def validate_label_key(key: str) -> str | None:
    """Why `key` is not a valid (qualified) label key, or None if it is."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"prefix part of {key!r} must be a DNS subdomain (lowercase alphanumerics, '-' and '.')"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return f"name part of {key!r} must be no more than 63 characters"
    if not _NAME_PART.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    return None


def validate_label_value(value: str) -> str | None:
    """Why `value` is not a valid label value, or None if it is."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_VALUE.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
            "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )
    return None


@dataclass(frozen=True)
class Requirement:
    """One clause of a label selector: key, operator and (for =, !=, in, notin, gt, lt) values."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (EQUALS, DOUBLE_EQUALS, IN):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_EQUALS, NOT_IN):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except (KeyError, ValueError):
                return False
            return have > want if op == GREATER_THAN else have < want
        raise ValueError(f"unknown selector operator {op!r}")

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return f"!{self.key}"
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({','.join(sorted(self.values))})"
        if op == GREATER_THAN:
            return f"{self.key}>{self.values[0]}"
        if op == LESS_THAN:
            return f"{self.key}<{self.values[0]}"
        return f"{self.key}{op}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    """All requirements must hold. The empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


class Nothing(LabelSelector):
    """Matches no object: what a nil LabelSelector means in PDBs and affinity terms."""

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return False


def _bad(selector: str, problem: str) -> BadRequest:
    return BadRequest(f"unable to parse requirement: {problem} (in label selector {selector!r})")


def _checked(selector: str, req: Requirement) -> Requirement:
    problem = validate_label_key(req.key)
    if problem:
        raise _bad(selector, f"invalid label key {req.key!r}: {problem}")
    if req.operator in (GREATER_THAN, LESS_THAN):
        try:
            int(req.values[0])
        except ValueError:
            problem = f"for 'gt', 'lt' operators, the value must be an integer, not {req.values[0]!r}"
            raise _bad(selector, problem) from None
    else:
        for value in req.values:
            problem = validate_label_value(value)
            if problem:
                raise _bad(selector, f"invalid label value {value!r} for key {req.key!r}: {problem}")
    if req.operator in (IN, NOT_IN) and not req.values:
        raise _bad(selector, f"for 'in', 'notin' operators, values set can't be empty (key {req.key!r})")
    return req


_TOKEN = re.compile(r"\s*(\(|\)|,|==|!=|=|!|>|<|[^\s(),=!<>]+)")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:  # pragma: no cover - the pattern matches any non-blank character
            raise _bad(text, f"unexpected character {text[pos]!r} at position {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse "a=b,c!=d,e in (f,g),h notin (i),j,!k,n>3" into a LabelSelector.

    Raises BadRequest naming the problem for anything the API server would reject."""
    if text is None or not text.strip():
        return LabelSelector()
    toks = _tokens(text)
    reqs: list[Requirement] = []
    i = 0

    def peek(offset: int = 0) -> str | None:
        return toks[i + offset] if i + offset < len(toks) else None

    while i < len(toks):
        tok = toks[i]
        if tok == "!":
            key = peek(1)
            if key is None or key in "(),=!<>":
                raise _bad(text, f"found {key or 'end of string'!r}, expected: identifier after '!'")
            reqs.append(_checked(text, Requirement(key, DOES_NOT_EXIST)))
            i += 2
        elif tok in ("(", ")", ",", "=", "==", "!=", ">", "<"):
            raise _bad(text, f"found {tok!r}, expected: !, identifier, or 'end of string'")
        else:
            key = tok
            op = peek(1)
            if op is None or op == ",":
                reqs.append(_checked(text, Requirement(key, EXISTS)))
                i += 1
            elif op in ("=", "==", "!=", ">", "<"):
                value = peek(2)
                if value is None or value == ",":
                    value_tok = ""  # "a=" selects the empty value, as in the API server
                    i += 2
                elif value in ("(", ")", "=", "==", "!=", "!", ">", "<"):
                    raise _bad(text, f"found {value!r}, expected: identifier (a value after {op!r})")
                else:
                    value_tok = value
                    i += 3
                operator = {">": GREATER_THAN, "<": LESS_THAN}.get(op, op)
                reqs.append(_checked(text, Requirement(key, operator, (value_tok,))))
            elif op in (IN, NOT_IN):
                if peek(2) != "(":
                    raise _bad(text, f"found {peek(2) or 'end of string'!r}, expected: '(' after {op!r}")
                i += 3
                values: list[str] = []
                expect_value = True
                while True:
                    t = peek()
                    if t is None:
                        raise _bad(text, "found 'end of string', expected: ')'")
                    i += 1
                    if t == ")":
                        if expect_value:  # "()" and "(a,)" hold the empty value, as on the server
                            values.append("")
                        break
                    if t == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                        continue
                    if not expect_value or t in ("(", "=", "==", "!=", "!", ">", "<"):
                        raise _bad(text, f"found {t!r}, expected: ',' or ')'")
                    values.append(t)
                    expect_value = False
                reqs.append(_checked(text, Requirement(key, op, tuple(dict.fromkeys(values)))))
            else:
                raise _bad(text, f"found {op!r}, expected: in, notin, =, ==, !=, gt, lt (after key {key!r})")
        nxt = peek()
        if nxt is not None:
            if nxt != ",":
                raise _bad(text, f"found {nxt!r}, expected: ',' or 'end of string'")
            i += 1
            if peek() is None:
                raise _bad(text, "found 'end of string', expected: identifier after ','")
    return LabelSelector(tuple(reqs))


_EXPRESSION_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def from_label_selector_json(selector: Mapping[str, Any] | None) -> LabelSelector:
    """The requirements of a metav1.LabelSelector ({"matchLabels", "matchExpressions"}).

    As in metav1.LabelSelectorAsSelector: None selects nothing, {} selects everything."""
    if selector is None:
        return Nothing()
    reqs: list[Requirement] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        reqs.append(_checked(str(selector), Requirement(key, EQUALS, (str(value),))))
    for expr in selector.get("matchExpressions") or []:
        op = _EXPRESSION_OPERATORS.get(expr.get("operator", ""))
        key = expr.get("key", "")
        if op is None:
            raise BadRequest(f"{expr.get('operator')!r} is not a valid label selector operator (key {key!r})")
        values = tuple(str(v) for v in expr.get("values") or ())
        if op in (EXISTS, DOES_NOT_EXIST) and values:
            raise BadRequest(f"values must be empty for operator {expr['operator']} (key {key!r})")
        reqs.append(_checked(str(selector), Requirement(key, op, tuple(dict.fromkeys(values)))))
    return LabelSelector(tuple(reqs))


def to_label_selector_json(selector: LabelSelector) -> dict[str, Any]:
    """The metav1.LabelSelector JSON for a parsed selector (gt/lt have no JSON form)."""
    match_labels: dict[str, str] = {}
    exprs: list[dict[str, Any]] = []
    names = {IN: "In", NOT_IN: "NotIn", EXISTS: "Exists", DOES_NOT_EXIST: "DoesNotExist"}
    for r in selector.requirements:
        if r.operator in (EQUALS, DOUBLE_EQUALS) and r.key not in match_labels:
            match_labels[r.key] = r.values[0]
        elif r.operator in (EQUALS, DOUBLE_EQUALS):
            exprs.append({"key": r.key, "operator": "In", "values": list(r.values)})
        elif r.operator == NOT_EQUALS:
            exprs.append({"key": r.key, "operator": "NotIn", "values": list(r.values)})
        elif r.operator in names:
            expr: dict[str, Any] = {"key": r.key, "operator": names[r.operator]}
            if r.values:
                expr["values"] = list(r.values)
            exprs.append(expr)
        else:
            raise ValueError(f"requirement {r} has no LabelSelector JSON form")
    out: dict[str, Any] = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if exprs:
        out["matchExpressions"] = exprs
    return out


# ---------------------------------------------------------------------------------------------
# Field selectors


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    operator: str  # "=" or "!="
    value: str

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{_escape(self.value)}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        for r in self.requirements:
            have = fields.get(r.field, "")
            if (have == r.value) != (r.operator == EQUALS):
                return False
        return True

    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    buf: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            buf.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    if escaped:
        buf.append("\\")
    parts.append("".join(buf))
    return parts


def _unescape(text: str, selector: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in "\\,=":
                raise BadRequest(f"invalid field selector {selector!r}: invalid escape sequence in {text!r}")
            out.append(text[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise BadRequest(f"invalid field selector {selector!r}: unescaped {ch!r} in value {text!r}")
        out.append(ch)
        i += 1
    return "".join(out)


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse "spec.nodeName=,status.phase!=Failed" (operators =, ==, !=; values escaped with \\)."""
    if text is None or not text.strip():
        return FieldSelector()
    reqs: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            raise BadRequest(f"invalid field selector {text!r}: empty term")
        for op, canonical in (("!=", NOT_EQUALS), ("==", EQUALS), ("=", EQUALS)):
            at = term.find(op)
            if at != -1 and "\\" not in term[:at]:
                name, value = term[:at].strip(), term[at + len(op):]
                if not name:
                    raise BadRequest(f"invalid field selector {text!r}: no field name in {term!r}")
                reqs.append(FieldRequirement(name, canonical, _unescape(value, text)))
                break
        else:
            raise BadRequest(f"invalid selector: {text!r}; can't understand {term!r}")
    return FieldSelector(tuple(reqs))


# Fields each kind can be selected by, as registered by the API server's field label conversions
# (pkg/apis/core/v1/conversion.go and friends). A kind not listed supports only metadata.name and
# metadata.namespace, with the error message of runtime.DefaultMetaV1FieldSelectorConversion.
_POD_FIELDS = (
    "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
    "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
    "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
    "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent",
    "source", "type",
)
SUPPORTED_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): _POD_FIELDS,
    ("", "Node"): ("metadata.name", "spec.unschedulable"),
    ("", "Namespace"): ("metadata.name", "status.phase"),
    ("", "Event"): _EVENT_FIELDS,
}
_FIELD_ALIASES = {("", "Pod"): {"spec.host": "spec.nodeName"}}
_DEFAULT_FIELDS = ("metadata.name", "metadata.namespace")


def supported_fields(group: str, kind: str) -> tuple[str, ...]:
    return SUPPORTED_FIELDS.get((group, kind), _DEFAULT_FIELDS)


def check_field_selector(selector: FieldSelector, group: str, kind: str) -> FieldSelector:
    """The selector with aliases resolved, or BadRequest for a field the kind cannot be selected by."""
    known = SUPPORTED_FIELDS.get((group, kind))
    aliases = _FIELD_ALIASES.get((group, kind), {})
    out: list[FieldRequirement] = []
    for r in selector.requirements:
        name = aliases.get(r.field, r.field)
        if known is None and name not in _DEFAULT_FIELDS:
            raise BadRequest(f'"{name}" is not a known field selector: only "metadata.name", "metadata.namespace"')
        if known is not None and name not in known:
            raise BadRequest(f"field label not supported: {name}")
        out.append(FieldRequirement(name, r.operator, r.value))
    return FieldSelector(tuple(out))


def _get(obj: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _pod_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    ips = status.get("podIPs") or []
    return {
        "metadata.name": _text(meta.get("name")),
        "metadata.namespace": _text(meta.get("namespace")),
        "spec.nodeName": _text(spec.get("nodeName")),
        "spec.restartPolicy": _text(spec.get("restartPolicy")),
        "spec.schedulerName": _text(spec.get("schedulerName")),
        "spec.serviceAccountName": _text(spec.get("serviceAccountName")),
        "spec.hostNetwork": _text(bool(spec.get("hostNetwork"))),
        "status.phase": _text(status.get("phase")),
        "status.podIP": _text(status.get("podIP")),
        "status.podIPs": _text(ips[0].get("ip") if ips else ""),
        "status.nominatedNodeName": _text(status.get("nominatedNodeName")),
    }


def _event_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    out = {f: _text(_get(obj, f)) for f in _EVENT_FIELDS if f != "source"}
    # core/v1 "source" is the reporting controller when set, else source.component.
    out["source"] = _text(obj.get("reportingComponent") or _get(obj, "source.component"))
    out["reportingComponent"] = _text(obj.get("reportingComponent"))
    return out


def _node_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        "metadata.name": _text(_get(obj, "metadata.name")),
        "spec.unschedulable": _text(bool(_get(obj, "spec.unschedulable"))),
    }


_FIELD_EXTRACTORS: dict[tuple[str, str], Callable[[Mapping[str, Any]], dict[str, str]]] = {
    ("", "Pod"): _pod_fields,
    ("", "Event"): _event_fields,
    ("", "Node"): _node_fields,
}


def object_fields(obj: Mapping[str, Any], group: str, kind: str) -> dict[str, str]:
    """The selectable fields of `obj` as the API server computes them for field selectors."""
    extractor = _FIELD_EXTRACTORS.get((group, kind))
    if extractor is not None:
        return extractor(obj)
    return {name: _text(_get(obj, name)) for name in supported_fields(group, kind)}
