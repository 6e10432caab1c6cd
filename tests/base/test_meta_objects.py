from __future__ import annotations

import pytest

from minisched import meta
from minisched.objects import make_node, make_pod, taint, toleration


def test_keys():
    pod = make_pod("web-1", namespace="shop")
    assert meta.key_of(pod) == "shop/web-1"
    assert meta.key_of(make_node("n1")) == "n1"
    assert meta.split_key("shop/web-1") == ("shop", "web-1")
    assert meta.split_key("n1") == ("", "n1")
    with pytest.raises(ValueError, match="unexpected key"):
        meta.split_key("a/b/c")
    with pytest.raises(ValueError, match="no metadata.name"):
        meta.key_of({"metadata": {}})


def test_builders_write_the_api_json():
    node = make_node("n1", cpu="8", taints=[taint("gpu", "true")], labels={"zone": "a"})
    assert node["status"]["allocatable"]["cpu"] == "8"
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "zone": "a"}
    pod = make_pod("p", cpu="250m", memory=None, priority=10, tolerations=[toleration("gpu", operator="Exists")])
    container = pod["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "250m"}
    assert pod["spec"]["schedulerName"] == "minisched"
    assert pod["spec"]["priority"] == 10
    assert pod["spec"]["tolerations"] == [{"operator": "Exists", "key": "gpu"}]
