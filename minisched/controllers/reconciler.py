"""The reconciler contract (controller-runtime's Reconciler, typed).

A reconciler gets a `Request` that names an object — not what changed — and drives the world
toward that object's desired state from what it reads *now*. That is what "level-based" means:
missed, merged or repeated events do not matter, because each call looks at the whole state.

The protocol is Generic over the object types it handles, as the book's `Reconciler[O, R]`:
`O` for the primary object (the one with the desired state) and `R` for the objects it owns (what
it creates to realize that state). The types are carried by `Kind[T]`, which says which API
resource serves them and how to decode the API's JSON into T, so a reconciler works with typed
objects while the cluster speaks JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from minisched.meta import key_of, split_key
from minisched.resources import Resource

Object = dict[str, Any]
T = TypeVar("T")
O = TypeVar("O")  # noqa: E741  # the primary object type, as in the book's Reconciler[O, R]
R = TypeVar("R")


@dataclass(frozen=True, order=True)
class Request:
    """Which object to reconcile: its namespace ("" if cluster-scoped) and name."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def from_key(cls, key: str) -> Request:
        namespace, name = split_key(key)
        return cls(namespace, name)

    @classmethod
    def for_object(cls, obj: Object) -> Request:
        return cls.from_key(key_of(obj))

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class Result:
    """What to do with the request afterwards.

    - Result() — done; forget its failures.
    - Result(requeue_after=s) — look again in s seconds (polling something no event reports).
    - Result(requeue=True) — look again after the rate limiter's back-off.
    Raising an exception also requeues with back-off (and is counted as an error).
    """

    requeue: bool = False
    requeue_after: float = 0.0

    def __post_init__(self) -> None:
        if self.requeue_after < 0:
            raise ValueError(f"requeue_after must not be negative, got {self.requeue_after}")


@dataclass(frozen=True)
class Kind(Generic[T]):
    """A typed view of an API resource: where it is served and how JSON becomes T and back."""

    resource: Resource
    decode: Callable[[Object], T]
    encode: Callable[[T], Object]

    def __str__(self) -> str:
        return self.resource.group_resource


def raw_kind(resource: Resource) -> Kind[Object]:
    """A Kind whose objects stay the API's JSON dicts (for kinds without a typed model)."""
    return Kind(resource, dict, dict)


class Reconciler(Protocol[O, R]):
    """Reconcile the primary object named by a request; `owned` says what it creates (or None)."""

    @property
    def primary(self) -> Kind[O]: ...

    @property
    def owned(self) -> Kind[R] | None: ...

    def reconcile(self, request: Request) -> Result: ...
