from __future__ import annotations

import pytest

from minisched.scheduler.framework.profile import default_profile, load_profiles
from minisched.scheduler.framework.runtime import Framework

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def test_default_profile_matches_kube_defaults() -> None:
    fw = Framework(default_profile())
    assert fw.profile_name == "minisched"
    # kube's default_plugins.go order and weights (PodTopologySpread since it joined the defaults)
    assert fw.plugin_names("filter") == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
        "InterPodAffinity"]
    assert fw.plugin_names("preFilter")[-2:] == ["InterPodAffinity", "DynamicResources"]
    assert fw.weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
                          "InterPodAffinity": 2,
                          "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
    assert fw.plugin_names("queueSort") == ["PrioritySort"]
    assert fw.plugin_names("preEnqueue") == ["SchedulingGates"]
    assert fw.plugin_names("bind") == ["DefaultBinder"]
    # kube 1.35: DynamicResources' PostFilter runs first (it would free idle claims before evicting)
    assert fw.plugin_names("postFilter") == ["DynamicResources", "DefaultPreemption"]
    assert fw.percentage_of_nodes_to_score == 0


def test_disable_override_weight_and_args() -> None:
    (p,) = load_profiles(HEADER + """
percentageOfNodesToScore: 40
profiles:
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: ImageLocality}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
    filter:
      disabled: [{name: NodePorts}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
""")
    fw = Framework(p)
    assert fw.profile_name == "packer" and fw.percentage_of_nodes_to_score == 40
    assert "ImageLocality" not in fw.plugin_names("score")
    assert "NodePorts" not in fw.plugin_names("filter")
    # a plugin enabled at the point itself comes first there (kube's override ordering)
    assert fw.plugin_names("score")[0] == "NodeResourcesFit" and fw.weights["NodeResourcesFit"] == 5
    assert fw.plugins["NodeResourcesFit"].args.strategy == "MostAllocated"  # type: ignore[attr-defined]


def test_multipoint_replacement_keeps_position_and_zero_weight_means_one() -> None:
    (p,) = load_profiles(HEADER + """
profiles:
- plugins:
    multiPoint:
      enabled: [{name: TaintToleration}]
      disabled: [{name: DefaultPreemption}]
""")
    fw = Framework(p)
    assert fw.weights["TaintToleration"] == 1
    assert fw.plugin_names("filter").index("TaintToleration") == 2
    assert fw.plugin_names("postFilter") == ["DynamicResources"]


def test_star_disables_every_default_at_a_point() -> None:
    (p,) = load_profiles(HEADER + """
profiles:
- plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: ImageLocality, weight: 2}]
""")
    fw = Framework(p)
    assert fw.plugin_names("score") == ["ImageLocality"] and fw.weights == {"ImageLocality": 2}


def test_two_profiles() -> None:
    profiles = load_profiles(HEADER + "profiles:\n- schedulerName: a\n- schedulerName: b\n  percentageOfNodesToScore: 100\n")
    assert [p.scheduler_name for p in profiles] == ["a", "b"]
    assert profiles[1].percentage_of_nodes_to_score == 100


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("apiVersion: v1\nkind: Pod\n", "expected apiVersion kubescheduler.config.k8s.io/v1"),
        (HEADER + "profiles:\n- schedulerName: a\n- schedulerName: a\n", "used by two profiles"),
        (HEADER + "percentageOfNodesToScore: 120\n", "0..100"),
        (HEADER + "profiles:\n- plugins:\n    filtre: {}\n", "unknown extension point"),
        (HEADER + "profiles:\n- plugins:\n    score:\n      enabled: [{weight: 2}]\n", "needs a name"),
    ],
)
def test_bad_configuration(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        load_profiles(text)


def test_bad_plugin_setup_is_reported_when_the_framework_is_built() -> None:
    (unknown,) = load_profiles(HEADER + "profiles:\n- plugins:\n    filter:\n      enabled: [{name: Nope}]\n")
    with pytest.raises(ValueError, match="plugin 'Nope' is not registered"):
        Framework(unknown)
    (wrong_point,) = load_profiles(HEADER + "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodePorts}]\n")
    with pytest.raises(ValueError, match="'NodePorts' does not implement the score extension point"):
        Framework(wrong_point)
    (no_sort,) = load_profiles(HEADER + "profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: PrioritySort}]\n")
    with pytest.raises(ValueError, match="exactly one queueSort"):
        Framework(no_sort)


def test_load_from_a_file_and_a_missing_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "sched.yaml"
    path.write_text(HEADER + "profiles:\n- schedulerName: from-file\n")
    assert load_profiles(path)[0].scheduler_name == "from-file"
    assert load_profiles(str(path))[0].scheduler_name == "from-file"
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_profiles(str(tmp_path / "nope.yaml"))
