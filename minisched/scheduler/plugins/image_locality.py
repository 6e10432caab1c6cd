"""ImageLocality (Score): prefer nodes that already hold the pod's images, weighted by image size
and by how widely the image is spread (an image on every node says nothing about any one of them).

kube's formula (imagelocality/image_locality.go): each image present on the node adds
size * (nodes having it / all nodes); the sum is clamped to [23 MiB, 1000 MiB * containers] and
mapped linearly onto 0..100.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.helpers import take
from minisched.scheduler.snapshot import NodeTable

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB

Object = dict[str, Any]
IntArray = npt.NDArray[np.int64]


def scaled_image_score(size: int, nodes_with_image: int, total_nodes: int) -> int:
    spread = nodes_with_image / total_nodes
    return int(size * spread)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def _images_of(node: Object) -> dict[str, int]:
    """Image name -> size as the node reports it (a name listed twice: its first entry)."""
    out: dict[str, int] = {}
    for img in (node.get("status") or {}).get("images") or []:
        for name in img.get("names") or []:
            out.setdefault(str(name), int(img.get("sizeBytes") or 0))
    return out


def node_score(pod: PodInfo, node: Object, all_nodes: Sequence[Object]) -> int:
    """The pure score for one node, given every node of the snapshot in the order they were added
    (for the spread, and the size: kube's cache keeps the one the image's first holder reported)."""
    if not pod.images:
        return 0
    here = _images_of(node)
    everywhere = [_images_of(n) for n in all_nodes]
    total = 0
    for image in pod.images:
        if image in here:
            holders = [imgs[image] for imgs in everywhere if image in imgs]
            total += scaled_image_score(holders[0], len(holders), len(all_nodes))
    return calculate_priority(total, len(pod.images))


class ImageLocality:
    name = NAME
    reads_pods = False  # results depend only on the pod and the node objects

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        # kube signs the set of names; the score counts every container's image, so the list
        return [(signature.IMAGE_NAMES, tuple(sorted(pod.images)))], Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        if not pod.images:
            return np.zeros(len(rows), np.int64)
        ids = [nodes.image_id(image) for image in pod.images]
        known = [i for i in ids if i is not None]
        sums = np.zeros(len(rows), np.int64)
        if known:
            presence = take(nodes.image_presence, rows, len(nodes))
            counts = nodes.image_node_counts()
            total = len(nodes)
            for i in known:  # a pod has few images: a loop over them, each a column over all nodes
                scaled = scaled_image_score(nodes.image_size(i), int(counts[i]), total)
                sums += presence[:, i] * scaled
        max_threshold = MAX_CONTAINER_THRESHOLD * len(pod.images)
        clamped = np.minimum(np.maximum(sums, MIN_THRESHOLD), max_threshold)
        return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> ImageLocality:
    return ImageLocality()
