"""How fast the embedded cluster answers: creates, gets, lists (with selectors), binds, and watch
fan-out to several watchers. Prints figures; not a test.

    .venv/bin/python bench/embedded_cluster_bench.py [pods] [watchers]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS


def timed(label: str, count: int, fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    print(f"{label:<44} {count:>7} in {took:7.3f} s  = {count / took:>10,.0f} /s")
    return took


def main(pods: int = 10_000, watchers: int = 4) -> None:
    c = EmbeddedCluster()
    nodes = max(pods // 20, 1)
    timed("create nodes", nodes, lambda: [c.create(NODES, make_node(f"n{i}")) for i in range(nodes)])
    rv = c.list(PODS)["metadata"]["resourceVersion"]

    received = [0] * watchers
    ws = [c.watch(PODS, resource_version=rv) for _ in range(watchers)]

    def consume(i: int) -> None:
        for _ in ws[i]:
            received[i] += 1
            if received[i] == 2 * pods:
                break

    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(watchers)]
    for t in threads:
        t.start()
    start = time.perf_counter()
    timed(f"create pods ({watchers} watchers open)", pods,
          lambda: [c.create(PODS, make_pod(f"p{i}", labels={"app": f"a{i % 10}"})) for i in range(pods)])
    timed("bind pods", pods, lambda: [c.bind("default", f"p{i}", f"n{i % nodes}") for i in range(pods)])
    for t in threads:
        t.join(120)
    fanout = time.perf_counter() - start
    print(f"{'watch fan-out: events delivered':<44} {sum(received):>7} in {fanout:7.3f} s  = "
          f"{sum(received) / fanout:>10,.0f} /s (to {watchers} watchers, incl. the writes)")
    timed("get pod", pods, lambda: [c.get(PODS, f"p{i}", "default") for i in range(pods)])
    lists = []
    for _ in range(5):
        t0 = time.perf_counter()
        items = c.list(PODS)["items"]
        lists.append(time.perf_counter() - t0)
    print(f"{'list all pods (median of 5)':<44} {len(items):>7} in {statistics.median(lists):7.3f} s")
    t0 = time.perf_counter()
    sel = c.list(PODS, label_selector="app=a3")["items"]
    print(f"{'list pods, label selector app=a3':<44} {len(sel):>7} in {time.perf_counter() - t0:7.3f} s")
    t0 = time.perf_counter()
    sel = c.list(PODS, field_selector="spec.nodeName=n1")["items"]
    print(f"{'list pods, field selector spec.nodeName=n1':<44} {len(sel):>7} in {time.perf_counter() - t0:7.3f} s")
    t0 = time.perf_counter()
    pages, token = 0, None
    while True:
        page = c.list(PODS, limit=500, continue_token=token)
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
    print(f"{'list pods in pages of 500':<44} {pages:>7} pages in {time.perf_counter() - t0:7.3f} s")
    t0 = time.perf_counter()
    w = c.watch(PODS, resource_version="0")
    it = iter(w)
    for _ in range(pods):
        next(it)
    w.stop()
    print(f"{'watch from 0 (synthetic ADDED for all)':<44} {pods:>7} in {time.perf_counter() - t0:7.3f} s")
    c.close()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*args)
