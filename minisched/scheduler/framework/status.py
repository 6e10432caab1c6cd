"""What an extension point says back: a code, the reasons, and which plugin said it; and the
error that carries a plugin's exception up to the point that turns it into a Status."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Code(enum.IntEnum):
    """kube-scheduler's status codes (framework/interface.go), in its order."""

    SUCCESS = 0
    ERROR = 1  # an internal failure: the pod backs off and is retried
    UNSCHEDULABLE = 2  # does not fit now; preemption might help
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3  # does not fit, and preempting pods would not change that
    WAIT = 4  # Permit: hold the pod until allowed or timed out
    SKIP = 5  # PreFilter/PreScore: this plugin has nothing to do for this pod

    @property
    def label(self) -> str:
        """kube's name for the code: "Success", "UnschedulableAndUnresolvable", ..."""
        # read at every extension point's metric (~10 a pod): looked up, not rebuilt (~1.5 µs each)
        return _CODE_LABELS[self]


_CODE_LABELS = {code: "".join(part.capitalize() for part in code.name.split("_")) for code in Code}


@dataclass(frozen=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    error: BaseException | None = field(default=None, compare=False)

    @classmethod
    def success(cls) -> Status:
        return _SUCCESS

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "", unresolvable: bool = False) -> Status:
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return cls(code, tuple(reasons), plugin)

    @classmethod
    def from_error(cls, error: BaseException, plugin: str = "") -> Status:
        return cls(Code.ERROR, (str(error),), plugin, error)

    @classmethod
    def skip(cls, plugin: str = "") -> Status:
        # several plugins say it every cycle; a Status never changes, so one per plugin name
        status = _SKIPS.get(plugin)
        if status is None:
            status = _SKIPS[plugin] = cls(Code.SKIP, (), plugin)
        return status

    @classmethod
    def wait(cls, plugin: str = "") -> Status:
        return cls(Code.WAIT, (), plugin)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin, self.error)

    @property
    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_rejected(self) -> bool:
        """The pod does not fit (as opposed to an error): kube's IsRejected."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @property
    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    @property
    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    @property
    def is_error(self) -> bool:
        return self.code == Code.ERROR

    def message(self) -> str:
        """The reasons joined as kube's Status.Message() joins them."""
        return ", ".join(self.reasons)

    def __str__(self) -> str:
        who = f" from {self.plugin}" if self.plugin else ""
        text = f": {self.message()}" if self.reasons else ""
        return f"{self.code.label}{who}{text}"


_SUCCESS = Status()
_SKIPS: dict[str, Status] = {}


class PluginError(RuntimeError):
    """A plugin raised: carries which one, so the error status can name it (kube's
    `running <Point> plugin "<name>": <error>`)."""

    def __init__(self, plugin: str, error: BaseException, point: str = "") -> None:
        super().__init__(plugin_error_message(point, plugin, error))
        self.plugin = plugin
        self.error = error
        self.point = point

    def status(self) -> Status:
        return Status(Code.ERROR, (str(self),), self.plugin, self.error)


def plugin_error_message(point: str, plugin: str, error: object) -> str:
    """kube's wrapping of a plugin's error at every extension point: `running Reserve plugin
    "Foo": <error>` (the point named when known)."""
    where = f"{point} plugin" if point else "plugin"
    return f'running {where} "{plugin}": {error}'
