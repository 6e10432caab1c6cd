"""Checks that a submission wrote the lesson rather than borrowed minisched's answer.

Where minisched already holds a lab's answer (lab 15's transition table, lab 16's capacity ledger),
reading the name in the submission's source is easy to get past (`getattr(module, "QUEUE_" +
"TRANSITIONS")`, an import under another name, a copy). What cannot be got past: load the
submission again from its file while every minisched module's reference to the answer is replaced
by a stand-in, and see whether the submission changed or touched the stand-in.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from labs import harness


@contextmanager
def replaced(originals: Sequence[object], stand_in: Callable[[object], object],
             packages: Sequence[str] = ("minisched",)) -> Iterator[None]:
    """Every global of a loaded module of `packages` that *is* one of `originals` (the very object,
    however it was imported) replaced by `stand_in(original)` while the block runs."""
    swapped: list[tuple[ModuleType, str, object]] = []
    try:
        for name, mod in list(sys.modules.items()):
            if mod is None or not any(name == p or name.startswith(p + ".") for p in packages):
                continue
            for attr, value in list(vars(mod).items()):
                if any(value is original for original in originals):
                    swapped.append((mod, attr, value))
                    setattr(mod, attr, stand_in(value))
        yield
    finally:
        for mod, attr, value in swapped:
            setattr(mod, attr, value)


def reloaded_with(lab: str, module: ModuleType, originals: Sequence[object],
                  stand_in: Callable[[object], object]) -> ModuleType:
    """The submission loaded again from its own file while `originals` are replaced (see
    `replaced`); what it built at import from minisched's answer is built from the stand-in."""
    path = getattr(module, "__file__", None)
    if not path:
        raise AssertionError("the submission has no file to load again")
    with replaced(originals, stand_in):
        return harness.load_lab_module(lab, str(path))


def holds(module: ModuleType, originals: Sequence[object]) -> list[str]:
    """The submission's globals that are one of `originals` (imported by name, under any name)."""
    return [name for name, value in vars(module).items() if any(value is o for o in originals)]


def describe(value: Any) -> str:
    return getattr(value, "__qualname__", None) or type(value).__name__


class Tripwire:
    """Stands in for a minisched object a submission must not use: calling it, or reading any of
    its attributes, records the touch in `touched` and fails."""

    def __init__(self, original: object, touched: list[str]) -> None:
        object.__setattr__(self, "_name", describe(original))
        object.__setattr__(self, "_touched", touched)

    def _trip(self, how: str) -> AssertionError:
        self._touched.append(f"{self._name}{how}")
        return AssertionError(f"used minisched's {self._name}{how}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._trip("()")

    def __getattr__(self, attr: str) -> Any:
        raise self._trip(f".{attr}")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:  # subclassed
        raise self._trip(" (as a base class)")


@contextmanager
def tripwires(lab: str, module: ModuleType, originals: Sequence[object],
              packages: Sequence[str] = ("minisched",)) -> Iterator[tuple[ModuleType, list[str]]]:
    """The submission loaded again with `originals` replaced by tripwires, and the list of touches;
    run it inside the block (a lookup at call time hits the tripwire too). A submission that does
    not load without the originals yields itself, its touches recorded."""
    touched: list[str] = []
    with replaced(originals, lambda original: Tripwire(original, touched), packages):
        try:
            again = harness.load_lab_module(lab, str(getattr(module, "__file__", "")))
        except Exception:
            if not touched:
                raise
            again = module
        yield again, touched
