from __future__ import annotations

import threading

import pytest

from minisched.informer import (
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    DeltaType,
    FIFOClosedError,
    Store,
    strip_managed_fields,
)
from tests.informer.fakes import pod

A, U, D, R, S = DeltaType.ADDED, DeltaType.UPDATED, DeltaType.DELETED, DeltaType.REPLACED, DeltaType.SYNC


def pop_all(fifo: DeltaFIFO) -> list[tuple[str, list[tuple[DeltaType, str]], bool]]:
    """[(key, [(type, rv-or-tombstone)], is_in_initial_list)] for everything queued."""
    out = []

    def process(deltas: list[Delta], initial: bool) -> None:
        summary = []
        for d in deltas:
            o = d.object
            summary.append((d.type, f"tombstone:{o.obj['metadata']['resourceVersion'] if o.obj else None}"
                            if isinstance(o, DeletedFinalStateUnknown) else o["metadata"]["resourceVersion"]))
        key = deltas[0].object.key if isinstance(deltas[0].object, DeletedFinalStateUnknown) else \
            f"{deltas[0].object['metadata']['namespace']}/{deltas[0].object['metadata']['name']}"
        out.append((key, summary, initial))

    while len(fifo):
        fifo.pop(process)
    return out


def test_changes_of_one_object_are_popped_together_in_order() -> None:
    fifo = DeltaFIFO()
    fifo.add(pod("a", 1))
    fifo.add(pod("b", 2))
    fifo.update(pod("a", 3))
    fifo.delete(pod("a", 4))
    assert pop_all(fifo) == [
        ("default/a", [(A, "1"), (U, "3"), (D, "4")], False),
        ("default/b", [(A, "2")], False),
    ]


@pytest.mark.parametrize(
    ("cached", "pending", "expected"),
    [
        (False, False, []),  # unknown and nothing pending: already reported, not again
        (True, False, [("default/a", [(D, "9")], False)]),
        (False, True, [("default/a", [(A, "1"), (D, "9")], False)]),
    ],
)
def test_delete_is_queued_only_for_something_known(cached: bool, pending: bool, expected: list) -> None:
    known = Store()
    if cached:
        known.add(pod("a", 1))
    fifo = DeltaFIFO(known_objects=known)
    if pending:
        fifo.add(pod("a", 1))
    fifo.delete(pod("a", 9))
    assert pop_all(fifo) == expected


def test_relist_queues_replaced_and_tombstones_for_vanished_objects() -> None:
    known = Store()
    known.add(pod("gone-cached", 3))
    known.add(pod("kept", 4))
    fifo = DeltaFIFO(known_objects=known)
    fifo.update(pod("gone-pending", 5))
    fifo.replace([pod("kept", 4), pod("new", 6)], "10")
    result = {key: deltas for key, deltas, _ in pop_all(fifo)}
    assert result == {
        "default/kept": [(R, "4")],
        "default/new": [(R, "6")],
        "default/gone-pending": [(U, "5"), (D, "tombstone:5")],  # last known: the pending state
        "default/gone-cached": [(D, "tombstone:3")],  # last known: the cache's
    }


def test_two_deletions_in_a_row_collapse_keeping_the_real_final_state() -> None:
    known = Store()
    known.add(pod("a", 1))
    fifo = DeltaFIFO(known_objects=known)
    fifo.delete(pod("a", 7))
    fifo.replace([], "8")  # the relist also finds it gone: a tombstone, deduplicated away
    assert pop_all(fifo) == [("default/a", [(D, "7")], False)]


def test_a_later_tombstone_is_dropped_but_an_earlier_one_is_replaced_by_the_real_state() -> None:
    fifo = DeltaFIFO()
    fifo.add(pod("a", 1))
    fifo.replace([], "2")  # tombstone
    fifo.delete(pod("a", 3))  # the real final state arrives after
    assert pop_all(fifo) == [("default/a", [(A, "1"), (D, "3")], False)]


def test_sync_is_dropped_when_the_last_delta_is_a_deletion() -> None:
    fifo = DeltaFIFO(emit_delta_type_replaced=False)  # relisted objects arrive as Sync
    fifo.add(pod("a", 1))
    fifo.delete(pod("a", 2))
    fifo.replace([pod("a", 1)], "3")
    assert pop_all(fifo) == [("default/a", [(A, "1"), (D, "2")], False)]


def test_resync_queues_sync_for_cached_objects_without_pending_changes() -> None:
    known = Store()
    known.add(pod("idle", 1))
    known.add(pod("busy", 2))
    fifo = DeltaFIFO(known_objects=known)
    fifo.update(pod("busy", 3))
    fifo.resync()
    result = {key: deltas for key, deltas, _ in pop_all(fifo)}
    assert result == {"default/busy": [(U, "3")], "default/idle": [(S, "1")]}


def test_has_synced_after_the_first_list_is_popped() -> None:
    fifo = DeltaFIFO(known_objects=Store())
    assert not fifo.has_synced()
    fifo.replace([pod("a", 1), pod("b", 2)], "2")
    fifo.add(pod("c", 3))  # after the list: not part of it
    assert not fifo.has_synced()
    flags = []
    fifo.pop(lambda d, initial: flags.append(initial))
    assert not fifo.has_synced()
    fifo.pop(lambda d, initial: flags.append(initial))
    assert fifo.has_synced()
    fifo.pop(lambda d, initial: flags.append(initial))
    assert flags == [True, True, False]


def test_an_empty_first_list_is_synced_at_once() -> None:
    fifo = DeltaFIFO()
    fifo.replace([], "1")
    assert fifo.has_synced()


def test_pop_blocks_until_something_arrives_and_close_ends_it() -> None:
    fifo = DeltaFIFO()
    got: list[list[Delta]] = []
    t = threading.Thread(target=lambda: got.append(fifo.pop(lambda d, i: None)))
    t.start()
    fifo.add(pod("a", 1))
    t.join(2)
    assert [d.type for d in got[0]] == [A]
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            fifo.pop(lambda d, i: None)
        except FIFOClosedError as err:
            errors.append(err)

    t = threading.Thread(target=blocked)
    t.start()
    fifo.close()
    t.join(2)
    assert len(errors) == 1 and fifo.is_closed()
    with pytest.raises(TimeoutError):
        DeltaFIFO().pop(lambda d, i: None, timeout=0.01)


def test_transform_applies_to_objects_but_not_tombstones() -> None:
    def strip(obj: dict) -> dict:
        return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "labels"}}

    fifo = DeltaFIFO(transform=strip)
    fifo.add(pod("a", 1, app="x"))
    fifo.replace([], "2")
    deltas = fifo.pop(lambda d, i: None)
    assert "labels" not in deltas[0].object["metadata"]  # type: ignore[index]
    assert isinstance(deltas[1].object, DeletedFinalStateUnknown)


def test_strip_managed_fields_copies_only_what_it_changes() -> None:
    with_fields = pod("a", 1)
    with_fields["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    stripped = strip_managed_fields(with_fields)
    assert "managedFields" not in stripped["metadata"]
    assert stripped["metadata"]["labels"] is with_fields["metadata"]["labels"] and stripped["kind"] == "Pod"
    assert "managedFields" in with_fields["metadata"]  # the caller's dict is left as it was
    plain = pod("b", 1)
    assert strip_managed_fields(plain) is plain
