"""Acting on the chosen candidate (kube's prepareCandidate, prepareCandidateAsync and PreemptPod):
each victim gets condition DisruptionTarget (reason PreemptionByScheduler) and is deleted (or
evicted through the Eviction API); lower-priority pods nominated to the same node lose their
nomination.

As in kube since 1.33 (SchedulerAsyncPreemption), those API calls run on worker threads, not in
the scheduling cycle (the victims but the last in parallel, then the last), and the preemptor is
held in the queue until its last victim's deletion has started (`running_preemption`, kube's
IsPodRunningPreemption). The condition goes out as a strategic merge patch computed from the
cached copy, as kube's PatchPodStatus: no GET of the victim."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minisched.clock import rfc3339
from minisched.errors import ApiError, NotFound
from minisched.resources import PODS
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.default_preemption.candidate import Candidate
from minisched.scheduler.plugins.default_preemption.names import NAME

Object = dict[str, Any]

log = logging.getLogger(__name__)

MARKING = "marking DisruptionTarget on"
DELETING = "deleting"
EVICTING = "evicting"


class VictimPreemptionFailed(Exception):
    """One victim's API call failed: says which call, which victim, for which preemptor and node."""

    def __init__(self, step: str, victim: PodInfo, preemptor: PodInfo, node_name: str, cause: BaseException) -> None:
        super().__init__(f"{step} victim {victim.key} (preempting for {preemptor.key} on node {node_name}): {cause}")
        self.step, self.victim, self.preemptor, self.node_name, self.cause = step, victim, preemptor, node_name, cause


@dataclass
class _Run:
    """One preemptor's victims' calls under way: how many of the victims before the last are not
    done yet, and whether any call failed."""

    candidate: Candidate
    pod: PodInfo
    victims: list[PodInfo]
    pending: int = 0
    failed: bool = False


class Executor:
    """Makes the victims' API calls for one plugin, through its handle: `cluster`, the
    `event_recorder` (the Preempted event, cleared nominations), the `clock`, `pod_object` (the
    informer's copy of the last victim), the `nominator` (lower nominations on the node go) and
    `activate` (a preemptor whose calls failed is tried again now). Wired by the scheduler:
    `submit(job, arg)` (a preemption worker runs it)."""

    def __init__(self, handle: Handle, *, scheduler_name: str, use_eviction: bool,
                 victim_grace_period: int | None) -> None:
        self.handle = handle
        self.scheduler_name = scheduler_name
        self.use_eviction = use_eviction
        self.victim_grace_period = victim_grace_period
        self.submit: Callable[[Callable[[Any], None], Any], None] | None = None
        self._lock = threading.Lock()
        self._preempting: set[str] = set()  # preemptor uids whose victims' calls are under way
        self._last_victim: dict[str, tuple[str, str]] = {}  # preemptor uid -> (namespace, name)
        self._held_back: set[str] = set()  # preemptor uids a queue move or pop was refused for

    def prepare_candidate(self, candidate: Candidate, pod: PodInfo) -> VictimPreemptionFailed | None:
        """Mark and delete the victims, clear lower-priority nominations on the node (kube's
        prepareCandidate), in the cycle. Returns the first failed call, which stops it, if any."""
        for victim in candidate.victims:
            err = self.preempt_pod(candidate, pod, victim)
            if err is not None:
                return err
        self.clear_lower_nominations(pod, candidate.node_name)
        return None

    def prepare_candidate_async(self, candidate: Candidate, pod: PodInfo) -> None:
        """kube's prepareCandidateAsync: the same calls as prepare_candidate on a worker thread, so
        the scheduling loop goes on to the next pod at once. Victims already being deleted need no
        call. Until the last victim's deletion has started, hold() holds the
        preemptor back from another attempt; on an API error the preemptor is activated, so it is
        not left waiting for deletions that will never come."""
        victims = [v for v in candidate.victims if not (v.pod.get("metadata") or {}).get("deletionTimestamp")]
        if not victims:
            return
        if self.submit is None:
            raise RuntimeError("asynchronous preemption needs the scheduler's preemption workers (submit is not set)")
        with self._lock:
            self._preempting.add(pod.uid)
        self.submit(self._preempt, (candidate, pod, victims))

    def _preempt(self, job: tuple[Candidate, PodInfo, list[PodInfo]]) -> None:
        """One preemptor's calls, on a preemption worker. As kube's prepareCandidateAsync: every
        victim but the last at once (here: each a job of its own on the same workers, so idle
        workers take them in parallel), then the last one, once all the others are done."""
        candidate, pod, victims = job
        run = _Run(candidate, pod, victims)
        try:
            self.clear_lower_nominations(pod, candidate.node_name)
        except Exception:  # a bug must not leave the preemptor held for ever
            log.exception("preemption for %s: clearing lower-priority nominations on node %s failed",
                          pod.key, candidate.node_name)
            run.failed = True
        others = victims[:-1]
        if not others:
            self._preempt_last(run)
            return
        run.pending = len(others)
        for victim in others[1:]:
            try:
                self._submit_victim(run, victim)
            except RuntimeError:  # the workers are shut down: make the call here
                self._preempt_victim((run, victim))
        self._preempt_victim((run, others[0]))

    def _submit_victim(self, run: _Run, victim: PodInfo) -> None:
        assert self.submit is not None  # prepare_candidate_async checked it
        self.submit(self._preempt_victim, (run, victim))

    def _preempt_victim(self, job: tuple[_Run, PodInfo]) -> None:
        """One victim that is not the last; the job that finishes the last of them goes on to the
        preemptor's last victim."""
        run, victim = job
        try:
            failed = self.preempt_pod(run.candidate, run.pod, victim) is not None
        except Exception:
            log.exception("preempting %s for %s on node %s failed", victim.key, run.pod.key, run.candidate.node_name)
            failed = True
        with self._lock:
            run.failed = run.failed or failed
            run.pending -= 1
            done = run.pending == 0
        if done:
            self._preempt_last(run)

    def _preempt_last(self, run: _Run) -> None:
        pod = run.pod
        failed = run.failed
        last = run.victims[-1]
        try:
            with self._lock:
                # registered before its deletion, so that the deletion's event finds it (kube's
                # lastVictimsPendingPreemption)
                self._last_victim[pod.uid] = (last.namespace, last.name)
            failed = self.preempt_pod(run.candidate, pod, last) is not None or failed
        except Exception:  # a bug must not leave the preemptor held for ever
            log.exception("preempting %s (the last victim) for %s on node %s failed",
                          last.key, pod.key, run.candidate.node_name)
            failed = True
        finally:
            with self._lock:
                self._preempting.discard(pod.uid)
                self._last_victim.pop(pod.uid, None)
                held_back = pod.uid in self._held_back
                self._held_back.discard(pod.uid)
        if failed or held_back:
            # An API error: the victims may never go, nothing else would wake the preemptor (kube).
            # A move refused while this run held the preemptor: the event it carried is not coming
            # again. Usually that is a victim's deletion before the last (the last one's event comes
            # after its deletion has started, and is let through), but a victim can be gone before
            # its call (deleted for an earlier attempt while the cache still showed it) or rejected
            # at Permit, and then its event may come while the run still holds the pod. kube drops
            # such events and leaves the pod parked until the 5-minute flush (scheduler_perf's
            # PreemptionBasic hit it in about 1 run in 3 here).
            self.handle.activate(pod.pod)

    def preempt_pod(self, candidate: Candidate, pod: PodInfo, victim: PodInfo) -> VictimPreemptionFailed | None:
        """kube's PreemptPod: mark, then delete (or evict) one victim, and record Preempted on it.
        A victim already gone is no failure (the room is free anyway); any other API error is
        logged and returned, naming the call that failed."""
        waiting = self.handle.get_waiting_pod(victim.uid)
        if waiting is not None:
            # A victim held at Permit is not bound yet: rejecting it frees its reservation and sends
            # it back to the queue, where deleting it would lose the pod (kube's PreemptPod).
            waiting.reject(NAME, "preempted")
            self._record_preempted(candidate, pod, victim)
            return None
        cluster = self.handle.cluster
        if cluster is None:
            raise RuntimeError("preemption needs the API to evict through; this handle has no cluster")
        step = MARKING
        try:
            self.mark_disruption_target(cluster, victim)
            if self.use_eviction:
                step = EVICTING
                cluster.evict(victim.namespace, victim.name, grace_period_seconds=self.victim_grace_period)
            else:
                step = DELETING
                cluster.delete(PODS, victim.name, victim.namespace, grace_period_seconds=self.victim_grace_period)
        except NotFound:
            return None
        except ApiError as err:
            failed = VictimPreemptionFailed(step, victim, pod, candidate.node_name, err)
            log.warning("%s", failed)
            return failed
        self._record_preempted(candidate, pod, victim)
        return None

    def _record_preempted(self, candidate: Candidate, pod: PodInfo, victim: PodInfo) -> None:
        self.handle.event_recorder.event(victim.pod, "Normal", "Preempted",
                                         f"Preempted by pod {pod.uid} on node {candidate.node_name}")

    def running_preemption(self, uid: str) -> bool:
        """kube's IsPodRunningPreemption: the preemptor's victims are still being asked to go. Once
        the last victim is gone from the informer's store, or its deletion has started, it is not."""
        if uid not in self._preempting:  # the common case, asked on every queue move: no lock
            return False
        with self._lock:
            if uid not in self._preempting:
                return False
            last = self._last_victim.get(uid)
        if last is None:
            return True  # the calls have not reached the last victim yet
        victim = self.handle.pod_object(*last)
        return victim is not None and not (victim.get("metadata") or {}).get("deletionTimestamp")

    def hold(self, uid: str) -> bool:
        """running_preemption, asked by the queue before it moves or pops the preemptor: a pod held
        is remembered, and activated when the run ends (see _preempt_last)."""
        if not self.running_preemption(uid):
            return False
        with self._lock:
            if uid not in self._preempting:
                return False  # the run ended meanwhile: nothing would activate the pod now
            self._held_back.add(uid)
            return True

    def mark_disruption_target(self, cluster: Any, victim: PodInfo) -> None:
        """Set condition DisruptionTarget on the victim, as kube's PreemptPod: the new status is
        computed from the scheduler's cached copy (kube's UpdatePodCondition: no call when the
        condition is already there as wanted; the transition time kept when only the reason or
        message changes) and sent as a strategic merge patch (kube's util.PatchPodStatus), which the
        server merges by condition type into the conditions it has now. No GET of the victim, and
        no lost update of a condition another writer set since the cache saw the pod."""
        message = f"{self.scheduler_name}: preempting to accommodate a higher priority pod"
        cached = [c for c in (victim.pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        old = next((c for c in cached if c.get("type") == "DisruptionTarget"), None)
        if old is not None and old.get("status") == "True" and old.get("reason") == "PreemptionByScheduler" \
                and old.get("message") == message:
            return  # already marked: kube's UpdatePodCondition reports no change and sends nothing
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                     "message": message}
        if old is not None and old.get("status") == "True" and old.get("lastTransitionTime"):
            condition["lastTransitionTime"] = old["lastTransitionTime"]
        else:
            condition["lastTransitionTime"] = rfc3339(self.handle.clock.now())
        # The element order of the cached copy, a new condition last, as kube's two-way patch says
        # it ($setElementOrder); conditions the cache has not seen keep their place.
        order = [{"type": c["type"]} for c in cached if c.get("type")]
        if old is None:
            order.append({"type": "DisruptionTarget"})
        status: Object = {"conditions": [condition]}
        if len(order) > 1:
            status["$setElementOrder/conditions"] = order
        cluster.patch(PODS, victim.name, {"status": status}, victim.namespace, subresource="status",
                      patch_type="strategic")

    def clear_lower_nominations(self, pod: PodInfo, node_name: str) -> None:
        """Lower-priority pods nominated to the node may no longer fit there: their nomination goes
        (kube's getLowerPriorityNominatedPods and clearNominatedNodeName)."""
        nominator = self.handle.nominator
        for other in nominator.nominated_pods().get(node_name, []):
            priority = int((other.get("spec") or {}).get("priority") or 0)
            meta = other.get("metadata") or {}
            if priority < pod.priority and f"{meta.get('namespace')}/{meta.get('name')}" != pod.key:
                nominator.delete_nominated(other)
                self.handle.event_recorder.set_nominated_node(other, "")
