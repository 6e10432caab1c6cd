"""Strategic merge patch, as kube-apiserver applies it to built-in kinds.

A JSON merge patch (RFC 7386) replaces every list it names. A strategic merge patch knows, from the
Go types' `patchStrategy` / `patchMergeKey` tags, which lists hold keyed elements: a pod's
`status.conditions` merge by `type`, its `spec.containers` by `name`. So a client can send only the
condition it sets, and the server merges it into the conditions it has now: no GET first, and no
lost update of another writer's conditions. This is how kube-scheduler marks a victim
(`util.PatchPodStatus`: a two-way strategic patch from its cached copy).

The semantics follow k8s.io/apimachinery/pkg/util/strategicpatch (patch.go, `mergeMap` and
`mergeSlice`) for what a server applies:

- maps merge key by key; `null` deletes a key;
- a list with strategy "merge" and a merge key: each patch element is merged into the element with
  the same key, or appended; elements the patch does not name stay; the result keeps the server's
  order for its own elements and the patch's order for the patch's (`$setElementOrder/<list>` sets
  it explicitly); a list of scalars with strategy "merge" is a union (`$deleteFromPrimitiveList/<list>`
  removes values);
- any other list is replaced, as in a JSON merge patch;
- directives: `$patch: replace` / `$patch: delete` in a map, `{"<key>": ..., "$patch": "delete"}`
  and `{"$patch": "replace"}` as list elements, `$retainKeys`.

Only the fields minisched's built-in kinds carry tags for are listed in `SCHEMAS` (a field not
listed merges as a map or is replaced as a list). Custom resources have no Go type to read tags
from, so the API server refuses the patch type for them (415 UnsupportedMediaType), and so does
`EmbeddedCluster.patch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minisched.errors import ApiError, BadRequest, InternalError

from .jsonvalues import clone

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ELEMENT_ORDER = "$setElementOrder/"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"


@dataclass(frozen=True)
class Meta:
    """One field's patch metadata: its Go tags, and the fields of its (element) type."""

    strategies: frozenset[str] = frozenset()
    merge_key: str = ""
    fields: dict[str, Meta] = field(default_factory=dict)

    def child(self, key: str) -> Meta:
        return self.fields.get(key, _PLAIN)


_PLAIN = Meta()


def _merge(key: str = "", fields: dict[str, Meta] | None = None, *, retain_keys: bool = False) -> Meta:
    strategies = frozenset({"merge", "retainKeys"} if retain_keys else {"merge"})
    return Meta(strategies, key, fields or {})


def _struct(**fields: Meta) -> Meta:
    return Meta(fields=dict(fields))


# k8s.io/apimachinery meta/v1 ObjectMeta and k8s.io/api's types: the tagged fields, by path.
_OBJECT_META = _struct(ownerReferences=_merge("uid"), finalizers=_merge())
_CONTAINER = _struct(ports=_merge("containerPort"), env=_merge("name"), volumeMounts=_merge("mountPath"),
                     volumeDevices=_merge("devicePath"))
_POD_SPEC = _struct(
    volumes=_merge("name", retain_keys=True),
    initContainers=_merge("name", _CONTAINER.fields),
    containers=_merge("name", _CONTAINER.fields),
    ephemeralContainers=_merge("name", _CONTAINER.fields),
    imagePullSecrets=_merge("name"),
    hostAliases=_merge("ip"),
    topologySpreadConstraints=_merge("topologyKey"),
    schedulingGates=_merge("name"),
    resourceClaims=_merge("name", retain_keys=True),
)
_CONDITIONS_BY_TYPE = _struct(conditions=_merge("type"))
_POD_TEMPLATE = _struct(metadata=_OBJECT_META, spec=_POD_SPEC)
_WORKLOAD = _struct(metadata=_OBJECT_META, spec=_struct(template=_POD_TEMPLATE), status=_CONDITIONS_BY_TYPE)

# (group, kind) -> the object's patch metadata
SCHEMAS: dict[tuple[str, str], Meta] = {
    ("", "Pod"): _struct(
        metadata=_OBJECT_META,
        spec=_POD_SPEC,
        status=_struct(conditions=_merge("type"), hostIPs=_merge("ip"), podIPs=_merge("ip"),
                       resourceClaimStatuses=_merge("name", retain_keys=True)),
    ),
    ("", "Node"): _struct(
        metadata=_OBJECT_META,
        spec=_struct(podCIDRs=_merge()),
        status=_struct(conditions=_merge("type"), addresses=_merge("type")),
    ),
    ("", "Namespace"): _struct(metadata=_OBJECT_META, status=_CONDITIONS_BY_TYPE),
    ("", "PersistentVolumeClaim"): _struct(metadata=_OBJECT_META, status=_CONDITIONS_BY_TYPE),
    ("", "Service"): _struct(metadata=_OBJECT_META, spec=_struct(ports=_merge("port"))),
    ("", "ReplicationController"): _WORKLOAD,
    ("apps", "ReplicaSet"): _WORKLOAD,
    ("apps", "StatefulSet"): _WORKLOAD,
    ("policy", "PodDisruptionBudget"): _struct(metadata=_OBJECT_META, status=_CONDITIONS_BY_TYPE),
    ("storage.k8s.io", "CSINode"): _struct(metadata=_OBJECT_META, spec=_struct(drivers=_merge("name"))),
}
_DEFAULT = _struct(metadata=_OBJECT_META)  # other built-in kinds: only ObjectMeta's tags


def schema_for(group: str, kind: str) -> Meta:
    return SCHEMAS.get((group, kind), _DEFAULT)


def strategic_merge_patch(original: dict[str, Any], patch: dict[str, Any], schema: Meta) -> dict[str, Any]:
    """`original` with `patch` applied. Both are read only (the merge works on copies).

    Raises BadRequest for a malformed directive (as the API server does) and InternalError where
    the server's merge fails otherwise (a list element without its merge key, mixed element types)."""
    try:
        return _merge_map(clone(original), clone(patch), schema)
    except ApiError:
        raise
    except (TypeError, ValueError, KeyError) as err:  # a shape the merge cannot handle
        raise InternalError(str(err)) from err


def _kind(value: Any) -> str:
    """The Go reflect kind that the merge branches on."""
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "slice"
    return "scalar"


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: Meta) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if directive == "replace":
            del patch[DIRECTIVE]
            return patch
        if directive == "delete":
            return {}
        raise InternalError(f"unknown patch type: {_go(directive)} in map: {_go(patch)}")
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, schema)
    # Removals from a scalar list first, then additions (kube goes in Go's random map order, so a
    # value both removed and added may come out either way there; here the addition wins).
    items = sorted(patch.items(), key=lambda kv: not kv[0].startswith(DELETE_FROM_PRIMITIVE_LIST))
    for key, patch_value in items:
        delete_list = key.startswith(DELETE_FROM_PRIMITIVE_LIST)
        if delete_list:
            key = key[len(DELETE_FROM_PRIMITIVE_LIST):]
        if patch_value is None:
            original.pop(key, None)
            continue
        if key not in original or _kind(original[key]) != _kind(patch_value):
            if not delete_list:
                _discard_nulls(patch_value)
                value, keep = _remove_directives(patch_value)
                if keep:
                    original[key] = value
                else:
                    original.pop(key, None)
            continue
        meta = schema.child(key)
        kind = _kind(patch_value)
        if kind == "map":
            if "replace" in meta.strategies:
                original[key] = patch_value
            else:
                original[key] = _merge_map(original[key], patch_value, meta)
        elif kind == "slice":
            if "merge" in meta.strategies or delete_list:
                original[key] = _merge_slice(original[key], patch_value, meta, delete_list)
            else:
                original[key] = patch_value
        else:
            original[key] = patch_value
    return original


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if RETAIN_KEYS not in patch:
        return
    keys = patch.pop(RETAIN_KEYS)
    if not isinstance(keys, list):
        raise BadRequest("invalid patch format of retainKeys")
    retained = set(k for k in keys if isinstance(k, str))
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in retained:
            raise BadRequest("invalid patch format of retainKeys")
    for key in [k for k in original if k not in retained]:
        del original[key]


def _merge_ordered_lists(original: dict[str, Any], patch: dict[str, Any], schema: Meta) -> None:
    """`$setElementOrder/<list>`: merge that list, then order it as the directive says (kube's
    mergePatchIntoOriginal)."""
    for directive in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(directive)
        if not isinstance(order, list):
            raise InternalError(f"expected a []interface {{}}, but received a {_go_type(order)}")
        key = directive[len(SET_ELEMENT_ORDER):]
        if not key or "/" in directive[:len(SET_ELEMENT_ORDER) - 1]:
            raise BadRequest("invalid patch format of setElementOrder list")
        meta = schema.child(key)
        merge_key = meta.merge_key
        found_original, found_patch = key in original, key in patch
        original_list: list[Any] = original.get(key) or []
        patch_list: list[Any] = patch.get(key) or []
        if not isinstance(original_list, list) or not isinstance(patch_list, list):
            raise InternalError(f"expected a []interface {{}} for {key}")
        _check_order_matches(patch_list, order, merge_key)
        merged: Any
        if found_original and not found_patch:
            merged = original_list
        elif found_patch and not found_original:
            merged, _ = _remove_directives(patch_list)
        elif found_original and found_patch:
            if "merge" in meta.strategies:
                merged = _merge_slice(original_list, patch_list, meta, False)
            else:
                merged = patch_list
        else:
            continue
        assert isinstance(merged, list)
        in_order = [x for x in merged if _index(order, x, merge_key) >= 0]
        server_only = [x for x in merged if _index(order, x, merge_key) < 0]
        original[key] = _normalize_order(in_order, server_only, order, original_list, merge_key)
        patch.pop(key, None)


def _check_order_matches(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """kube's validatePatchWithSetOrderList: the patch's elements appear in the directive's order."""
    items = [x for x in patch_list if not (merge_key and isinstance(x, dict) and x.get(DIRECTIVE) == "delete")]
    p = o = 0
    while p < len(items) and o < len(order):
        if isinstance(items[p], dict) and DIRECTIVE in items[p]:
            p += 1
            continue
        if _key_of(items[p], merge_key) == _key_of(order[o], merge_key):
            p += 1
        o += 1
    if p < len(items):
        raise InternalError(f"The order in patch list:\n{patch_list}\n doesn't match $setElementOrder list:\n{order}\n")


def _key_of(item: Any, merge_key: str) -> Any:
    if not merge_key:
        return item
    if not isinstance(item, dict) or merge_key not in item:
        raise InternalError(f"map: {item} does not contain declared merge key: {merge_key}")
    return item[merge_key]


def _merge_slice(original: list[Any], patch: list[Any], meta: Meta, delete_list: bool) -> list[Any]:
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    merge_key = meta.merge_key
    if kind != "map":
        if delete_list:
            drop = set(patch)
            return [v for v in original if v not in drop]
        merged: list[Any] = []
        for v in original + patch:  # kube's deduplicateScalars keeps the first of each
            if v not in merged:
                merged.append(v)
        in_patch = [v for v in merged if v in patch]
        server_only = [v for v in merged if v not in patch]
        return _normalize_order(in_patch, server_only, patch, original, "")
    if not merge_key:
        raise InternalError("cannot merge lists without merge key")
    original, patch = _special_elements(list(original), patch, merge_key)
    server_order = list(original)  # before the patch's new elements are appended
    for element in patch:
        value = _key_of(element, merge_key)
        at = next((i for i, x in enumerate(original) if _key_of(x, merge_key) == value), -1)
        if at >= 0:
            original[at] = _merge_map(original[at], element, meta)
        else:
            original.append(element)
    in_patch = [x for x in original if _index(patch, x, merge_key) >= 0]
    server_only = [x for x in original if _index(patch, x, merge_key) < 0]
    return _normalize_order(in_patch, server_only, patch, server_order, merge_key)


def _element_kind(*lists: list[Any]) -> str:
    kinds = {_kind(v) if not isinstance(v, bool) else "bool" for lst in lists for v in lst}
    if "slice" in kinds:
        raise ApiError("lists of lists are not supported", status=422, reason="")
    if len(kinds) > 1:
        raise InternalError(f"list element types are not identical: {list(lists)}")
    return kinds.pop() if kinds else "scalar"


def _special_elements(original: list[Any], patch: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    """`$patch` elements of a keyed list: delete the element with that key, or replace the list."""
    plain: list[Any] = []
    replace = False
    for element in patch:
        if not isinstance(element, dict):
            raise InternalError(f"expected a map, but received a {type(element).__name__}")
        if DIRECTIVE not in element:
            plain.append(element)
            continue
        directive = element[DIRECTIVE]
        if directive == "delete":
            if merge_key not in element:
                raise InternalError(f"map: {element} does not contain declared merge key: {merge_key}")
            original = [x for x in original if _key_of(x, merge_key) != element[merge_key]]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise InternalError("merging lists cannot yet be specified in the patch")
        else:
            raise InternalError(f"unknown patch type: {_go(directive)} in map: {_go(element)}")
    if replace:
        return plain, []
    return original, plain


def _index(items: list[Any], item: Any, merge_key: str) -> int:
    wanted = item.get(merge_key) if merge_key and isinstance(item, dict) else item
    for i, x in enumerate(items):
        if (x.get(merge_key) if merge_key and isinstance(x, dict) else x) == wanted:
            return i
    return -1


def _normalize_order(patch_items: list[Any], server_only: list[Any], patch_order: list[Any],
                     server_order: list[Any], merge_key: str) -> list[Any]:
    """kube's normalizeElementOrder: the patch's elements in the patch's order, the server's own in
    the server's order, then the two interleaved by the server's order."""

    def sort(items: list[Any], order: list[Any]) -> list[Any]:
        deleted = [x for x in items if merge_key and isinstance(x, dict) and x.get(DIRECTIVE) == "delete"]
        kept = [x for x in items if not (merge_key and isinstance(x, dict) and x.get(DIRECTIVE) == "delete")]
        known = sorted((x for x in kept if _index(order, x, merge_key) >= 0), key=lambda x: _index(order, x, merge_key))
        # kube's sort.SliceStable with "unknown is less": an element absent from `order` goes first
        unknown = [x for x in kept if _index(order, x, merge_key) < 0]
        return unknown + known + deleted

    left, right = sort(server_only, server_order), sort(patch_items, patch_order)
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li, ri = _index(server_order, left[i], merge_key), _index(server_order, right[j], merge_key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _go(value: Any) -> str:
    """A JSON value as Go's fmt prints the decoded value (the server's error messages quote it so)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _go_type(value: Any) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "float64"
    return "string" if isinstance(value, str) else "interface {}"


def _discard_nulls(value: Any) -> None:
    if isinstance(value, dict):
        for k in [k for k, v in value.items() if v is None]:
            del value[k]
        for v in value.values():
            _discard_nulls(v)
    elif isinstance(value, list):
        for v in value:
            _discard_nulls(v)


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """kube's removeDirectives: a map holding `$patch` is dropped; directives inside are removed."""
    if isinstance(value, dict):
        if DIRECTIVE in value:
            return None, False
        out = {}
        for k, v in value.items():
            cleaned, keep = _remove_directives(v)
            if keep:
                out[k] = cleaned
        return out, True
    if isinstance(value, list):
        return [c for c, keep in (_remove_directives(v) for v in value) if keep], True
    return value, True
