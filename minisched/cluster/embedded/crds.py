"""CustomResourceDefinitions: which custom resources the embedded cluster serves.

As on a real server, a custom resource is served (in each of its CRD's served versions) only once
its CRD exists, and stops being served when the CRD is deleted. Custom objects are stored once, in
the storage version, and served in whichever version is asked for (conversion strategy None: only
apiVersion changes). The server validates them against the version's openAPIV3Schema with
minisched.validation.openapi (pruning, defaults, 422 causes; the CEL subset it knows).
"""

from __future__ import annotations

from typing import Any

from minisched.resources import Resource

Object = dict[str, Any]


class CrdRegistry:
    def __init__(self) -> None:
        self._crds: dict[tuple[str, str], Object] = {}  # (group, plural) -> CRD

    def register(self, crd: Object) -> None:
        spec = crd["spec"]
        self._crds[(spec["group"], spec["names"]["plural"])] = crd

    def unregister(self, crd: Object) -> None:
        spec = crd["spec"]
        self._crds.pop((spec["group"], spec["names"]["plural"]), None)

    def served(self, resource: Resource) -> Resource | None:
        """The resource as the CRD serves it (scope and subresources from the CRD), or None."""
        crd = self._crds.get((resource.group, resource.plural))
        if crd is None:
            return None
        versions = {v["name"]: v for v in crd["spec"].get("versions") or [] if v.get("served", True)}
        if resource.version not in versions:
            return None
        return Resource.from_crd(crd, resource.version)

    def crd(self, resource: Resource) -> Object:
        return self._crds[(resource.group, resource.plural)]

    def storage_version(self, resource: Resource) -> str:
        crd = self._crds[(resource.group, resource.plural)]
        return Resource.from_crd(crd).version

    def find(self, name: str) -> Resource | None:
        """A served custom resource by kubectl-style name: plural, plural.group, kind or singular."""
        wanted = name.strip().lower()
        for (group, plural), crd in self._crds.items():
            names = crd["spec"]["names"]
            candidates = {plural, f"{plural}.{group}", names["kind"].lower(), (names.get("singular") or "").lower()}
            candidates.update(s.lower() for s in names.get("shortNames") or [])
            if wanted in candidates:
                return Resource.from_crd(crd)
        return None

    def all(self) -> list[Object]:
        return list(self._crds.values())
