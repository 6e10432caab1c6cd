"""DefaultPreemption's pure parts: victim minimality, reprieve order, PDBs, the node tie-breakers."""

from __future__ import annotations

import random
import re

import pytest

from minisched.objects import make_pod
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption import (
    NO_VICTIMS,
    Candidate,
    Pdb,
    offset_and_num_candidates,
    pick_one_node,
    select_victims_on_node,
    split_by_pdb_violation,
)


def _pod(name: str, priority: int, cpu: str = "1", started: float | None = None,
         labels: dict[str, str] | None = None) -> PodInfo:
    pod = make_pod(name, cpu=cpu, memory=None, labels=labels)
    pod["spec"]["priority"] = priority
    info = PodInfo.from_pod(pod)
    if started is not None:
        object.__setattr__(info, "started", started)
    return info


def _cpu_fits(pod: PodInfo, node_pods: list[PodInfo], capacity: int):  # type: ignore[no-untyped-def]
    def fits(removed: list[PodInfo]) -> Status:
        gone = {p.key for p in removed}
        used = sum(p.request("cpu") for p in node_pods if p.key not in gone)
        if used + pod.request("cpu") <= capacity:
            return Status.success()
        return Status.unschedulable("Insufficient cpu")
    return fits


def test_only_as_many_victims_as_needed_and_the_least_important_go() -> None:
    node_pods = [_pod("a", 10, started=1), _pod("b", 5, started=2), _pod("c", 5, started=3), _pod("d", 1)]
    preemptor = _pod("p", 100, cpu="2")
    victims, violations, status = select_victims_on_node(preemptor, node_pods, _cpu_fits(preemptor, node_pods, 4000))
    assert status.is_success and violations == 0
    # 4 cpu used, 2 needed: reprieve a (10), then b (5, started earlier than c); c and d cannot come back
    assert [v.name for v in victims or []] == ["c", "d"]


def test_higher_or_equal_priority_pods_are_never_victims() -> None:
    node_pods = [_pod("same", 100), _pod("higher", 200)]
    preemptor = _pod("p", 100)
    victims, _, status = select_victims_on_node(preemptor, node_pods, _cpu_fits(preemptor, node_pods, 2000))
    assert victims is None and status.reasons == (NO_VICTIMS,)


def test_node_where_even_all_victims_are_not_enough_is_no_candidate() -> None:
    node_pods = [_pod("low", 1, cpu="1"), _pod("high", 500, cpu="3")]
    preemptor = _pod("p", 100, cpu="2")
    victims, _, status = select_victims_on_node(preemptor, node_pods, _cpu_fits(preemptor, node_pods, 4000))
    assert victims is None and status.reasons == ("Insufficient cpu",)


def test_pdb_protected_pods_are_reprieved_first() -> None:
    pdb = Pdb("default", "guard", _selector({"app": "guarded"}), disruptions_allowed=0, disrupted_pods=frozenset())
    guarded = _pod("guarded", 5, labels={"app": "guarded"})
    free = _pod("free", 5)
    node_pods = [free, guarded]
    preemptor = _pod("p", 100)
    victims, violations, _ = select_victims_on_node(preemptor, node_pods, _cpu_fits(preemptor, node_pods, 2000), [pdb])
    assert [v.name for v in victims or []] == ["free"] and violations == 0


def test_pdb_violation_counted_when_unavoidable() -> None:
    pdb = Pdb("default", "guard", _selector({"app": "g"}), disruptions_allowed=1, disrupted_pods=frozenset())
    pods = [_pod("g1", 5, labels={"app": "g"}), _pod("g2", 5, labels={"app": "g"})]
    violating, non_violating = split_by_pdb_violation(pods, [pdb])
    assert [p.name for p in non_violating] == ["g1"] and [p.name for p in violating] == ["g2"]
    preemptor = _pod("p", 100, cpu="2")
    victims, violations, _ = select_victims_on_node(preemptor, pods, _cpu_fits(preemptor, pods, 2000), [pdb])
    assert len(victims or []) == 2 and violations == 1


def test_pick_one_node_tie_breakers_in_kube_order() -> None:
    def cand(name: str, *victims: PodInfo, pdb: int = 0) -> Candidate:
        return Candidate(name, list(victims), pdb)

    # 1. fewest PDB violations
    assert pick_one_node([cand("a", _pod("x", 1), pdb=1), cand("b", _pod("y", 50))]).node_name == "b"  # type: ignore[union-attr]
    # 2. lowest highest-victim priority
    assert pick_one_node([cand("a", _pod("x", 9)), cand("b", _pod("y", 3), _pod("z", 3))]).node_name == "b"  # type: ignore[union-attr]
    # 3. lowest priority sum
    assert pick_one_node([cand("a", _pod("x", 3), _pod("y", 3)), cand("b", _pod("z", 3), _pod("w", 1))]).node_name == "b"  # type: ignore[union-attr]
    # 4. fewest victims
    assert pick_one_node([cand("a", _pod("x", 3), _pod("y", 0)), cand("b", _pod("z", 3))]).node_name == "b"  # type: ignore[union-attr]
    # 5. latest start time of the highest-priority victims
    early, late = _pod("x", 3, started=100), _pod("y", 3, started=200)
    assert pick_one_node([cand("a", early), cand("b", late)]).node_name == "b"  # type: ignore[union-attr]
    # all equal: the first
    assert pick_one_node([cand("a", _pod("x", 3, started=1)), cand("b", _pod("y", 3, started=1))]).node_name == "a"  # type: ignore[union-attr]
    assert pick_one_node([]) is None


def test_candidate_count_is_ten_percent_or_a_hundred() -> None:
    rng = random.Random(1)
    assert offset_and_num_candidates(50, rng)[1] == 50
    assert offset_and_num_candidates(500, rng)[1] == 100
    assert offset_and_num_candidates(5000, rng)[1] == 500
    assert all(0 <= offset_and_num_candidates(7, rng)[0] < 7 for _ in range(20))


def _selector(labels: dict[str, str]):  # type: ignore[no-untyped-def]
    from minisched.selectors import from_label_selector_json

    return from_label_selector_json({"matchLabels": labels})


def test_hopeless_shortcut_gives_the_same_answer_as_the_full_dry_run() -> None:
    """find_candidates skips the what-if filter run on nodes that cannot be helped; on random
    clusters the candidates and the failure message must be exactly those of the full dry run."""
    from minisched.clock import RealClock
    from minisched.objects import make_node
    from minisched.scheduler.cache import SchedulerCache
    from minisched.scheduler.framework.cycle_state import CycleState
    from minisched.scheduler.framework.runtime import Framework
    from minisched.scheduler.plugins.default_preemption import DefaultPreemption
    from minisched.scheduler.plugins.default_preemption.hopeless import hopeless_nodes
    from minisched.scheduler.scheduler import SchedulerHandle

    rng = random.Random(3)
    fired = found = fired_nominated = 0
    for trial in range(80):
        cache = SchedulerCache()
        for n in range(8):
            cache.add_node(make_node(f"n{n}", cpu=rng.choice(["1", "2", "4"]), memory="4Gi",
                                     pods=rng.choice(["3", "5", "110"])))
            for j in range(rng.randrange(0, 7)):
                p = make_pod(f"t{trial}-n{n}-{j}", cpu=rng.choice(["100m", "500m", "1"]),
                             memory=rng.choice(["128Mi", "1Gi"]), node_name=f"n{n}")
                p["spec"]["priority"] = rng.choice([0, 10, 10, 100])
                cache.add_pod(p)
        handle = SchedulerHandle(None, None, RealClock(), cache)  # type: ignore[arg-type]
        fwk = Framework(handle=handle, seed=1)
        pod = make_pod(f"pre-{trial}", cpu=rng.choice(["1", "2", "3", "8"]), memory=rng.choice(["1Gi", "2Gi", "8Gi"]))
        pod["spec"]["priority"] = rng.choice([10, 50, 1000, 1000])
        info = PodInfo.from_pod(pod)
        table = cache.snapshot()
        # earlier preemptors waiting on some nodes (of any priority: the cycle keeps those at least
        # the pod's), whose room the dry run and the shortcut must both count
        waiting = []
        for k in range(rng.choice([0, 0, 2, 5])):
            other = make_pod(f"nom{trial}-{k}", cpu=rng.choice(["100m", "500m", "1", "2"]), memory="128Mi")
            other["spec"]["priority"] = rng.choice([10, 50, 1000])
            waiting.append((f"n{rng.randrange(8)}", PodInfo.from_pod(other)))
        state = CycleState()  # preemption works on the cycle's state, with what PreFilter wrote
        result = fwk.schedule(info, table, state=state, nominated=waiting)
        if result.node is not None:
            continue
        statuses = result.diagnosis.statuses()  # type: ignore[union-attr]
        answers = []
        for shortcut in (True, False):
            plugin = DefaultPreemption({"seed": 5, "minCandidateNodesAbsolute": 100}, fwk.handle)
            if shortcut:
                check = hopeless_nodes(info, table, statuses, state.nominated)
                for n in table.names:
                    short = check(n)
                    if not short:
                        continue
                    fired += 1
                    fired_nominated += n in state.nominated
                    # node by node: the dry run on that node gives no victims, for the same reasons
                    nodes = plugin.evaluator.working_nodes
                    working = nodes.working_node(state, info, table, n, nodes.pod_blind_filters())
                    victims, _, why = select_victims_on_node(info, table.pods_on(n), working)
                    assert victims is None and list(why.reasons) == short, (trial, n, why, short)
            else:
                plugin.evaluator.shortcut = False
            cands, status = plugin.find_candidates(state, info, table, statuses)
            answers.append(([(c.node_name, [v.key for v in c.victims], c.num_pdb_violations) for c in cands],
                            status.message()))
        assert answers[0] == answers[1], trial
        found += bool(answers[0][0])
    assert fired > 10 and found > 3 and fired_nominated > 3, "the random clusters exercise every path"


def test_only_a_pod_terminating_by_preemption_makes_the_nominee_wait() -> None:
    """kube's PodEligibleToPreemptOthers asks podTerminatingByPreemption: deleted AND marked
    DisruptionTarget/PreemptionByScheduler. A lower-priority pod deleted for another reason on
    the nominated node does not stop the nominee from preempting again."""
    from minisched.scheduler.plugins.default_preemption import DefaultPreemption, terminating_by_preemption
    from tests.scheduler.plugins.randomcluster import table_of

    marked = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    deleted = make_pod("deleted", cpu="1", memory=None)
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deleted["spec"]["priority"] = 1
    preempted = {**deleted, "metadata": {**deleted["metadata"], "name": "preempted"},
                 "status": {"conditions": [marked]}}
    assert not terminating_by_preemption(deleted) and terminating_by_preemption(preempted)
    assert not terminating_by_preemption({**preempted, "metadata": {"name": "alive"}})
    from minisched.objects import make_node

    plugin = DefaultPreemption()
    nominee = _pod("nominee", 100)
    object.__setattr__(nominee, "nominated_node_name", "n1")
    for victim, eligible in ((deleted, True), (preempted, False)):
        table = table_of([make_node("n1")], {"n1": [victim]})
        assert plugin.pod_eligible_to_preempt_others(nominee, table, {})[0] is eligible, victim["metadata"]["name"]


class _Refusing:
    """A cluster whose call `refused` ("patch", "delete" or "evict") fails for every victim."""

    def __init__(self, refused: str) -> None:
        self.refused = refused

    def _maybe_refuse(self, verb: str, name: str) -> dict[str, object]:
        from minisched.errors import Forbidden

        if verb == self.refused:
            raise Forbidden(f'pods "{name}" is forbidden: {verb} refused')
        return {}

    def patch(self, resource: object, name: str, *a: object, **kw: object) -> dict[str, object]:
        return self._maybe_refuse("patch", name)

    def delete(self, resource: object, name: str, *a: object, **kw: object) -> dict[str, object]:
        return self._maybe_refuse("delete", name)

    def evict(self, namespace: str, name: str, **kw: object) -> dict[str, object]:
        return self._maybe_refuse("evict", name)


@pytest.mark.parametrize(("refused", "step"), [("patch", "marking DisruptionTarget on"),
                                               ("delete", "deleting"), ("evict", "evicting")])
def test_a_failed_victim_call_names_the_call_the_victim_the_preemptor_and_the_node(
        refused: str, step: str, caplog: pytest.LogCaptureFixture) -> None:
    from minisched.scheduler.framework.runtime import SimpleHandle
    from minisched.scheduler.plugins.default_preemption import DefaultPreemption, VictimPreemptionFailed

    plugin = DefaultPreemption({"useEviction": refused == "evict"}, SimpleHandle(cluster=_Refusing(refused)))
    victims = [_pod("low", 1), _pod("lower", 0)]
    with caplog.at_level("WARNING"):
        failed = plugin.executor.prepare_candidate(Candidate("n1", victims), _pod("vip", 100))
    assert isinstance(failed, VictimPreemptionFailed)
    expected = f'{step} victim default/low (preempting for default/vip on node n1): 403 Forbidden: pods "low" is forbidden: {refused} refused'
    assert str(failed) == expected
    assert expected in caplog.text


def test_args_name_what_is_wrong_with_them() -> None:
    from minisched.scheduler.plugins.default_preemption import DefaultPreemption

    assert DefaultPreemption({"kind": "DefaultPreemptionArgs", "minCandidateNodesAbsolute": "7"}).args \
        .min_candidate_nodes_absolute == 7
    for args, words in (({"minCandidateNodesPercentag": 5}, "unknown field(s) ['minCandidateNodesPercentag']"),
                        ({"minCandidateNodesPercentage": 101}, "must be 0..100"),
                        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "cannot both be zero"),
                        ({"victimGracePeriodSeconds": "soon"}, "victimGracePeriodSeconds must be an integer")):
        with pytest.raises(ValueError, match=re.escape(words)):
            DefaultPreemption(args)


def test_no_nodes_is_an_error_as_kube_s_find_candidates() -> None:
    from minisched.scheduler.framework.cycle_state import CycleState
    from minisched.scheduler.plugins.default_preemption import DefaultPreemption
    from tests.scheduler.plugins.randomcluster import table_of

    _, status = DefaultPreemption().find_candidates(CycleState(), _pod("vip", 100), table_of([], {}), {})
    assert status.is_error and status.message() == "no nodes available"
