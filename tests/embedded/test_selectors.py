"""minisched.selectors: parsing, matching, round trips, JSON selectors and field selectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minisched.errors import BadRequest
from minisched.selectors import (
    LabelSelector,
    Requirement,
    check_field_selector,
    from_label_selector_json,
    object_fields,
    parse_field_selector,
    parse_label_selector,
    to_label_selector_json,
)

LABELS = {"app": "web", "tier": "front", "n": "5"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("app notin (web)", False),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!tier", False),
        ("n>3", True),
        ("n<3", False),
        ("missing>3", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("  app = web ,  tier in ( front , back )  ", True),
        ("app=", False),
        ("empty=", False),
    ],
)
def test_matching(text: str, matches: bool) -> None:
    assert parse_label_selector(text).matches(LABELS) is matches


def test_empty_value_matches_empty_label() -> None:
    assert parse_label_selector("k=").matches({"k": ""})
    assert parse_label_selector("k in (a,)").matches({"k": ""})
    assert parse_label_selector("k in ()").matches({"k": ""})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("app in web", "expected: '('"),
        ("app in (web", "expected: ')'"),
        ("=web", "found '='"),
        ("app web", "found 'web'"),
        ("app=web,", "after ','"),
        ("app=web extra", "expected: ',' or 'end of string'"),
        ("Bad_Key!=1", None),
        ("-bad=1", "invalid label key"),
        ("k=-bad-", "invalid label value"),
        ("n>x", "must be an integer"),
        ("!", "identifier after '!'"),
        ("k notin (a b)", "expected: ',' or ')'"),
        ("a=(b)", "found '('"),
    ],
)
def test_malformed_selectors_say_what_is_wrong(text: str, problem: str | None) -> None:
    if problem is None:  # valid after all: underscores and capitals are allowed in the name part
        parse_label_selector(text)
        return
    with pytest.raises(BadRequest) as err:
        parse_label_selector(text)
    assert problem in err.value.message and repr(text) in err.value.message
    assert err.value.status == 400


@pytest.mark.parametrize(
    "text",
    ["app=web", "app!=web", "app in (a,b)", "app notin (a)", "app", "!app", "n>3", "n<3",
     "example.com/app=web,tier in (x,y),!canary"],
)
def test_str_round_trips(text: str) -> None:
    parsed = parse_label_selector(text)
    assert parse_label_selector(str(parsed)) == parsed


def test_str_is_canonical() -> None:
    assert str(parse_label_selector("app in (b, a)")) == "app in (a,b)"


_key = st.from_regex(r"\A[a-z]([a-z0-9.-]{0,8}[a-z0-9])?\Z")
_value = st.from_regex(r"\A([A-Za-z0-9]([A-Za-z0-9_.-]{0,6}[A-Za-z0-9])?)?\Z")
_requirement = st.one_of(
    st.builds(lambda k, v: Requirement(k, "=", (v,)), _key, _value),
    st.builds(lambda k, v: Requirement(k, "!=", (v,)), _key, _value),
    st.builds(lambda k, vs: Requirement(k, "in", tuple(sorted(set(vs)))), _key, st.lists(_value, min_size=1, max_size=3)),
    st.builds(lambda k, vs: Requirement(k, "notin", tuple(sorted(set(vs)))), _key,
              st.lists(_value, min_size=1, max_size=3)),
    st.builds(lambda k: Requirement(k, "exists"), _key),
    st.builds(lambda k: Requirement(k, "!"), _key),
)


@given(st.lists(_requirement, max_size=4), st.dictionaries(_key, _value, max_size=4))
def test_round_trip_preserves_meaning(reqs: list[Requirement], labels: dict[str, str]) -> None:
    selector = LabelSelector(tuple(reqs))
    reparsed = parse_label_selector(str(selector))
    assert reparsed.matches(labels) == selector.matches(labels)


def test_label_selector_json() -> None:
    sel = from_label_selector_json({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "NotIn", "values": ["a"]},
            {"key": "team", "operator": "Exists"},
        ],
    })
    assert sel == parse_label_selector("app=web,tier in (front,back),!canary,zone notin (a),team")
    assert sel.matches({"app": "web", "tier": "front", "team": "x"})
    assert not sel.matches({"app": "web", "tier": "front"})


def test_label_selector_json_edges() -> None:
    assert from_label_selector_json({}).matches({"any": "thing"})
    assert not from_label_selector_json(None).matches({"any": "thing"})
    with pytest.raises(BadRequest, match="not a valid label selector operator"):
        from_label_selector_json({"matchExpressions": [{"key": "a", "operator": "Like"}]})
    with pytest.raises(BadRequest, match="values must be empty"):
        from_label_selector_json({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})


def test_to_label_selector_json_round_trip() -> None:
    sel = parse_label_selector("app=web,tier in (a,b),!canary")
    assert from_label_selector_json(to_label_selector_json(sel)).matches({"app": "web", "tier": "a"})
    assert to_label_selector_json(sel) == {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                             {"key": "canary", "operator": "DoesNotExist"}],
    }


# --- field selectors --------------------------------------------------------------------------

POD = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "n1", "schedulerName": "minisched", "hostNetwork": True},
    "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}]},
}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("spec.nodeName=n1", True),
        ("spec.nodeName==n1", True),
        ("spec.nodeName!=n1", False),
        ("spec.nodeName=", False),
        ("status.phase=Running,metadata.namespace=ns", True),
        ("spec.hostNetwork=true", True),
        ("status.podIPs=10.0.0.5", True),
        ("status.nominatedNodeName=", True),
        ("spec.host=n1", True),
    ],
)
def test_pod_field_selectors(text: str, matches: bool) -> None:
    sel = check_field_selector(parse_field_selector(text), "", "Pod")
    assert sel.matches(object_fields(POD, "", "Pod")) is matches


def test_field_selector_escapes() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c")
    assert sel.requirements[0].value == "a,b=c"
    assert parse_field_selector(str(sel)) == sel


@pytest.mark.parametrize("text", ["spec.nodeName", "=x", "a=b,,c=d", r"a=b\q"])
def test_malformed_field_selectors(text: str) -> None:
    with pytest.raises(BadRequest):
        parse_field_selector(text)


def test_unknown_fields_are_rejected_as_the_server_words_it() -> None:
    with pytest.raises(BadRequest) as err:
        check_field_selector(parse_field_selector("foo=1"), "", "ConfigMap")
    assert err.value.message == '"foo" is not a known field selector: only "metadata.name", "metadata.namespace"'
    with pytest.raises(BadRequest) as err:
        check_field_selector(parse_field_selector("foo=1"), "", "Pod")
    assert err.value.message == "field label not supported: foo"


def test_node_and_event_fields() -> None:
    node = {"metadata": {"name": "n"}, "spec": {}}
    assert object_fields(node, "", "Node") == {"metadata.name": "n", "spec.unschedulable": "false"}
    event = {"metadata": {"name": "e", "namespace": "d"}, "involvedObject": {"kind": "Pod", "name": "p"},
             "reason": "Scheduled", "source": {"component": "sched"}, "type": "Normal"}
    fields = object_fields(event, "", "Event")
    assert fields["involvedObject.name"] == "p" and fields["source"] == "sched" and fields["reason"] == "Scheduled"
