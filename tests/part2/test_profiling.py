"""pyinstrument over a piece of our own code: the call tree and the hot spots name it."""

from __future__ import annotations

import numpy as np

from minisched.observability.profiling import call_tree, hot_spots, profile_calls, share_of
from minisched.scheduler.framework.strategies import Pipeline


class Slow:
    name = "Slow"

    def score(self, item: int) -> float:
        return float(np.sort(np.arange(2000) * item)[-1])


def test_hot_spots_name_our_functions_and_count_library_time_as_theirs() -> None:
    pipeline: Pipeline[int] = Pipeline([Slow()])
    calls = iter(range(300))
    session = profile_calls(lambda: next(calls, None) is not None and pipeline.choose([1, 2, 3]) is not None)
    spots = hot_spots(session, under="")  # the test's own Slow.score lives outside minisched
    names = [s.function for s in spots]
    assert "Slow.score" in names, names
    assert not any(s.location.startswith("profiling.py") for s in spots)
    ours = hot_spots(session)
    assert ours and all("minisched/" in s.location for s in ours)
    assert all(0 <= s.share <= 1 for s in spots)
    assert 0 < share_of(session, "score") <= 1 and share_of(session, "no-such-function") == 0
    tree = call_tree(session)
    assert "Pipeline.choose" in tree and "Slow.score" in tree


def test_stored_call_trees_name_no_path_of_the_machine() -> None:
    from minisched.observability.profiling import without_machine_paths

    tree = without_machine_paths(
        "Profile at /home/ann/src/minisched/observability/profiling.py:37\n"
        "1.0 profile_calls  ../minisched/observability/profiling.py:34\n"
        "└─ 1.0 step  /tmp/ipykernel_12154/4049003704.py:12\n"
        "   ├─ 0.5 arange  /opt/venv/lib/python3.11/site-packages/numpy/core/numeric.py:9\n"
        "   └─ 0.1 wait  /usr/lib/python3.11/threading.py:320\n"
    )
    assert tree.splitlines() == [
        "Profile at minisched/observability/profiling.py:37",
        "1.0 profile_calls  minisched/observability/profiling.py:34",
        "└─ 1.0 step  <cell>:12",
        "   ├─ 0.5 arange  numpy/core/numeric.py:9",
        "   └─ 0.1 wait  python3.11/threading.py:320",
    ]
