"""SchedulingPolicy: a custom resource holding one §3.2 policy expression and the pods it applies to.

    apiVersion: scheduling.minisched.dev/v1alpha1
    kind: SchedulingPolicy
    metadata: {name: gpu-only}
    spec:
      selector: {matchLabels: {workload: training}}   # which pods; absent or {} = every pod
      expression: |
        and(hasLabel("node.kubernetes.io/instance-type", "g4dn.xlarge"), not(hasLabel("env", "staging")))

Cluster-scoped. The CRD schema (generated from the model, like Database's) can check the shape and
the length of `expression`, but not its grammar: the API server cannot parse minisched's language.
So the grammar is checked on the client (`validate_scheduling_policy`) and again when the scheduler
loads the policy (minisched.scheduler.plugins.policy_filter), which refuses a bad one and says why.
Enforcing it on the server would take a validating admission webhook: the book's "webhook" row.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from minisched.errors import Cause
from minisched.policy import PolicyError, compile_policy
from minisched.resources import Resource
from minisched.validation.crd import crd_for
from minisched.validation.model import ResourceModel, validate_object

GROUP = "scheduling.minisched.dev"
VERSION = "v1alpha1"
KIND = "SchedulingPolicy"
PLURAL = "schedulingpolicies"
MAX_EXPRESSION_LENGTH = 4096


class LabelSelectorRequirement(ResourceModel):
    key: str = Field(min_length=1, max_length=317)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = Field(None, max_length=64)


class LabelSelector(ResourceModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = Field(None, max_length=16)


class SchedulingPolicySpec(ResourceModel):
    expression: str = Field(min_length=1, max_length=MAX_EXPRESSION_LENGTH,
                            description="A minisched policy expression (chapter 3.2), e.g. hasLabel(\"gpu\", \"true\").")
    selector: LabelSelector | None = Field(None, description="The pods this policy applies to; absent: all pods.")


class SchedulingPolicy(ResourceModel):
    api_version: Literal["scheduling.minisched.dev/v1alpha1"]
    kind: Literal["SchedulingPolicy"]
    metadata: dict[str, Any]
    spec: SchedulingPolicySpec

    @field_validator("spec")
    @classmethod
    def _expression_compiles(cls, spec: SchedulingPolicySpec) -> SchedulingPolicySpec:
        compile_policy(spec.expression)  # PolicyError is a ValueError: pydantic reports it at spec
        return spec


SCHEDULING_POLICY_CRD: dict[str, Any] = crd_for(
    SchedulingPolicySpec,
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    short_names=["spol"],
    scope="Cluster",
    printer_columns=[{"name": "Expression", "type": "string", "jsonPath": ".spec.expression"}],
    description="A node filter for the pods its selector picks: minisched.scheduler.plugins.policy_filter.",
)
SCHEDULING_POLICIES = Resource.from_crd(SCHEDULING_POLICY_CRD)


def make_scheduling_policy(name: str, expression: str, *, match_labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"expression": expression}
    if match_labels is not None:
        spec["selector"] = {"matchLabels": dict(match_labels)}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name}, "spec": spec}


def validate_scheduling_policy(obj: dict[str, Any]) -> list[Cause]:
    """Client-side verdict: the schema's rules plus the expression's grammar and types, whose error
    (with its caret display) is reported at spec.expression."""
    causes = validate_object(SchedulingPolicy, obj)
    if causes:
        return [Cause("spec.expression", c.message.removeprefix("Value error, "), c.reason)
                if c.field == "spec" and "error at line" in c.message else c for c in causes]
    return []


def policy_error(obj: dict[str, Any]) -> PolicyError | None:
    """The PolicyError of the object's expression, or None when it compiles."""
    try:
        compile_policy(str((obj.get("spec") or {}).get("expression", "")))
    except PolicyError as err:
        return err
    return None
