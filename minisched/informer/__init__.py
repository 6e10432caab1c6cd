"""Informers, modelled on client-go's tools/cache: keep a local, indexed copy of API objects in
step with the server through list + watch, and tell handlers what changed.

- `ListWatch` (listwatch): what to list and watch, selectors pushed down to the server.
- `Reflector` (reflector): list, then watch from the list's resourceVersion; relist on 410.
- `DeltaFIFO` (delta_fifo): per-object change lists between the reflector and the cache.
- `Store` (store): the thread-safe, indexed cache.
- `SharedIndexInformer` (shared_informer): all of it, with handlers and resync.
- `SharedInformerFactory` (factory): one informer per resource, shared.

    from minisched.cluster import connect
    from minisched.informer import ResourceEventHandlerFuncs, SharedInformerFactory

    factory = SharedInformerFactory(connect())
    pods = factory.informer_for("pods")
    pods.add_event_handler(ResourceEventHandlerFuncs(add=lambda pod, initial: print(pod["metadata"]["name"])))
    factory.start()
    factory.wait_for_cache_sync(timeout=10)
    pods.store.list_keys()  # ["default/web-1", ...], read-only objects: deep-copy before changing
    factory.shutdown()
"""

from minisched.informer.backoff import ExponentialBackoff
from minisched.informer.delta_fifo import Delta, DeltaFIFO, DeltaType, FIFOClosedError, strip_managed_fields
from minisched.informer.factory import InformerKey, SharedInformerFactory
from minisched.informer.handlers import (
    FilteringResourceEventHandler,
    ResourceEventHandler,
    ResourceEventHandlerFuncs,
)
from minisched.informer.keys import (
    DeletedFinalStateUnknown,
    deletion_handling_key,
    meta_namespace_key,
    unwrap_tombstone,
)
from minisched.informer.listwatch import ListWatch
from minisched.informer.reflector import Reflector, ReflectorStats, ShortWatchError
from minisched.informer.shared_informer import HandlerRegistration, SharedIndexInformer, SharedInformer
from minisched.informer.store import NAMESPACE_INDEX, Indexers, IndexFunc, Store, meta_namespace_index

__all__ = [
    "NAMESPACE_INDEX",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "ExponentialBackoff",
    "FIFOClosedError",
    "strip_managed_fields",
    "FilteringResourceEventHandler",
    "HandlerRegistration",
    "IndexFunc",
    "Indexers",
    "InformerKey",
    "ListWatch",
    "Reflector",
    "ReflectorStats",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "SharedIndexInformer",
    "SharedInformer",
    "SharedInformerFactory",
    "ShortWatchError",
    "Store",
    "deletion_handling_key",
    "meta_namespace_index",
    "meta_namespace_key",
    "unwrap_tombstone",
]
