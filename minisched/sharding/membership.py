"""Ring membership: one coordination.k8s.io/v1 Lease per replica, no leader.

Leader election (minisched.controllers.leaderelection) makes one replica act and the rest wait; it
scales nothing, and it fences nothing either: a leader paused past its lease (GC, SIGSTOP, a frozen
VM) resumes still believing it leads and sends the writes it had queued. Only a check on the
*server* side can stop such a write. For sharding the lease is not a lock at all, just a heartbeat:
every replica renews `<prefix><identity>`, and every replica lists the leases with that prefix to
learn who is alive. A replica that stops renewing drops out of the ring once its lease expires, and
its keys move to the runners-up (see ring.py); safety never rests on everyone agreeing on the ring
at the same instant (the 409 on pods/binding and the capacity ledger in fence.py do that).

Liveness is judged as client-go judges a leader's lease: a member is live while the lease record
it wrote has *changed* within leaseDurationSeconds of when this replica last saw it change, by this
replica's own monotonic clock. Comparing renewTime with the local wall clock would let two machines
with skewed clocks disagree about who is alive. A lease seen for the first time counts as just
renewed, so a new observer treats a dead member as live for at most one lease duration: its pods
then wait a little longer, which is safe. A lease with an empty holderIdentity was released and is
gone at once.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from dataclasses import dataclass

from minisched.clock import Clock, RealClock, parse_rfc3339, rfc3339_micro
from minisched.cluster.base import Cluster, Object
from minisched.errors import Conflict, NotFound
from minisched.resources import LEASES

__all__ = ["Member", "Membership", "lease_suffix"]

log = logging.getLogger(__name__)


def lease_suffix(identity: str) -> str:
    """The part of a lease name that stands for `identity`. A Lease's name must be a DNS subdomain
    (lowercase letters, digits, '-' and '.'), and identities are often not ("host_8c1f...", as
    kube-scheduler makes them): such an identity is lowercased, its other characters become '-',
    and 8 hex digits of its hash keep two identities that map alike apart."""
    safe = re.sub(r"[^a-z0-9.-]", "-", identity.lower()).strip("-.")
    if safe == identity:
        return safe
    digest = hashlib.blake2b(identity.encode(), digest_size=4).hexdigest()
    return f"{safe}-{digest}" if safe else digest


@dataclass(frozen=True)
class Member:
    """One replica's lease as last read."""

    identity: str
    lease_name: str
    lease_duration_seconds: int
    renew_time: float | None


class Membership:
    """This replica's heartbeat lease, and the live members as seen from here.

    `renew()` every `renew_period` (a third of the lease, as node leases do); `members()` when the
    ring is needed. Both are plain calls, so a driver (a thread, or a test on a VirtualClock) decides
    when they happen."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        identity: str,
        namespace: str = "kube-system",
        prefix: str = "minisched-shard-",
        clock: Clock | None = None,
        lease_duration: float = 15.0,
    ) -> None:
        if not identity:
            raise ValueError("a ring member needs a non-empty identity (hostname_uuid, as kube-scheduler uses)")
        if not prefix:
            raise ValueError("membership needs a lease name prefix, so it lists only its own ring's leases")
        if lease_duration < 1:
            raise ValueError(f"lease_duration must be at least 1 s (a Lease stores whole seconds), got {lease_duration}")
        self.cluster = cluster
        self.identity, self.namespace, self.prefix = identity, namespace, prefix
        self.lease_name = f"{prefix}{lease_suffix(identity)}"
        self.clock: Clock = clock or RealClock()
        self.lease_duration = lease_duration
        self._lock = threading.Lock()
        self._own: Object | None = None  # our lease as last written (with its resourceVersion)
        # lease name -> (the spec last seen, monotonic time it last changed)
        self._seen: dict[str, tuple[Object, float]] = {}

    @property
    def renew_period(self) -> float:
        return self.lease_duration / 3

    def renew(self) -> None:
        """Write a fresh renewTime on our lease, creating it if needed. Raises the API's error if
        the write fails; a 409 (our cached resourceVersion is stale, e.g. after a timed-out write
        that landed) is answered by one re-read and retry."""
        now = self.clock.now()
        with self._lock:
            own = self._own
        for attempt in range(2):
            if own is None:
                try:
                    own = self.cluster.get(LEASES, self.lease_name, self.namespace)
                except NotFound:
                    created = self.cluster.create(LEASES, self._lease(now, acquired=now), self.namespace)
                    with self._lock:
                        self._own = created
                    return
            lease = dict(own)
            spec = dict(lease.get("spec") or {})
            acquired = spec.get("acquireTime") if spec.get("holderIdentity") == self.identity else None
            lease["spec"] = self._spec(now, acquired=parse_rfc3339(acquired) if acquired else now)
            try:
                updated = self.cluster.update(LEASES, lease)
            except Conflict:
                if attempt:
                    raise
                own = None  # re-read and try once more
                continue
            with self._lock:
                self._own = updated
            return

    def release(self) -> None:
        """Leave the ring at once: empty holderIdentity, so others need not wait out the lease."""
        try:
            lease = self.cluster.get(LEASES, self.lease_name, self.namespace)
        except NotFound:
            return
        now = self.clock.now()
        lease = dict(lease)
        lease["spec"] = {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": rfc3339_micro(now)}
        try:
            self.cluster.update(LEASES, lease)
        except Conflict:
            log.info("lease %s/%s changed while releasing; it expires on its own", self.namespace, self.lease_name)
        with self._lock:
            self._own = None

    def members(self) -> list[Member]:
        """The live members, sorted by identity (this replica included only if its own lease is live)."""
        leases = self.cluster.list(LEASES, self.namespace)["items"]
        now = self.clock.monotonic()
        live: list[Member] = []
        with self._lock:
            present = set()
            for lease in leases:
                name = str(lease["metadata"]["name"])
                if not name.startswith(self.prefix):
                    continue
                present.add(name)
                spec = dict(lease.get("spec") or {})
                previous = self._seen.get(name)
                if previous is None or previous[0] != spec:
                    self._seen[name] = (spec, now)
                changed_at = self._seen[name][1]
                holder = str(spec.get("holderIdentity") or "")
                duration = int(spec.get("leaseDurationSeconds") or 0)
                if not holder or now - changed_at >= duration:
                    continue  # released, or not renewed within its duration by our clock
                if lease_suffix(holder) != name[len(self.prefix):]:
                    log.warning("lease %s/%s names holder %r, not its own suffix; ignored",
                                self.namespace, name, holder)
                    continue
                renew = spec.get("renewTime")
                live.append(Member(holder, name, duration, parse_rfc3339(renew) if renew else None))
            for gone in set(self._seen) - present:
                del self._seen[gone]  # deleted leases
        return sorted(live, key=lambda m: m.identity)

    def member_identities(self) -> list[str]:
        return [m.identity for m in self.members()]

    def _spec(self, now: float, *, acquired: float) -> Object:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self.lease_duration),
            "acquireTime": rfc3339_micro(acquired),
            "renewTime": rfc3339_micro(now),
        }

    def _lease(self, now: float, *, acquired: float) -> Object:
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.lease_name, "namespace": self.namespace},
            "spec": self._spec(now, acquired=acquired),
        }

    def __repr__(self) -> str:
        return f"Membership({self.identity!r}, {self.namespace}/{self.prefix}*)"
