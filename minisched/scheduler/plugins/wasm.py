"""WasmPlugin (Filter and/or Score): a plugin whose logic is a WebAssembly module, run in a sandbox
with a hard budget (Part II §4.2).

    profiles:
    - schedulerName: minisched
      plugins:
        multiPoint: {enabled: [{name: WasmPlugin, weight: 2}]}
      pluginConfig:
      - name: WasmPlugin
        args: {path: labs/my_scorer.wat, fuel: 2000000, timeoutSeconds: 0.05, memoryLimitBytes: 4194304}

The sandbox (wasmtime, one Store per plugin):
- fuel: every call gets `fuel` units (about one per wasm instruction) and traps with OUT_OF_FUEL
  when they run out; the fuel a call used is kept (`last_fuel`), so a guest's cost is a number;
- an epoch watchdog: a thread ticks the engine's epoch every TICK seconds, and a call may last
  `timeoutSeconds` worth of ticks before it traps with INTERRUPT (wall-clock, whatever the fuel);
- a memory limit on the store: memory.grow past it returns -1 (a guest that writes there anyway
  traps with MEMORY_OUT_OF_BOUNDS).
A trap is an error for that plugin in that cycle: the framework turns the exception into an Error
status naming the plugin, the pod backs off and is retried, and the scheduler carries on. The
instance is rebuilt after a trap (a guest stopped mid-way may have left its memory half-written).

The ABI: the guest exports `memory`, `input_offset() -> i32`, and `score` and/or `filter`, each
`(n: i32, pod_cpu: i64, pod_memory: i64) -> i32` (0 = ok, anything else an error code). Before the
call the host writes COLUMNS, each n little-endian i64s, at input_offset(); the guest writes n i64s
right after them: scores (0..100) or filter reason bits (0 = the node passes; bit i = reason i,
`reasons` in the args name them). One call per cycle over all nodes: each crossing into wasm
converts its arguments and result through wasmtime's C API, which costs far more than the
guest's work on one node, so a call per node (`calls: per-node`, which needs the guest's
`score_one` export) pays that cost n times; bench/wasm_bench.py and chapter p2_ch04_2 measure both.

Guests ship in wasm_guests/ (`guest_path("least_allocated")`): a well-behaved least-allocated scorer
and fit filter, a runaway loop, and a memory hog, all in WebAssembly text.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import wasmtime

from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import CPU, MEMORY, PODS, PodInfo
from minisched.scheduler.snapshot import NodeTable

NAME = "WasmPlugin"
COLUMNS = ("cpu_allocatable", "cpu_requested", "memory_allocatable", "memory_requested",
           "pods_allocatable", "pods_requested")
TICK = 0.005  # the watchdog's epoch period, seconds
DEFAULT_FUEL = 10_000_000
DEFAULT_TIMEOUT = 0.1
DEFAULT_MEMORY_LIMIT = 16 * 1024 * 1024
PAGE = 65536
GUESTS = Path(__file__).with_name("wasm_guests")
_ARGS = {"path", "fuel", "timeoutSeconds", "memoryLimitBytes", "calls", "reasons"}

IntArray = npt.NDArray[np.int64]


def guest_path(name: str) -> Path:
    """A guest shipped with minisched: least_allocated, runaway, memory_hog."""
    path = GUESTS / f"{name}.wat"
    if not path.exists():
        raise FileNotFoundError(f"no bundled wasm guest {name!r} (have: {sorted(p.stem for p in GUESTS.glob('*.wat'))})")
    return path


class WasmTrap(RuntimeError):
    """The guest trapped (out of fuel, interrupted, out-of-bounds memory, ...)."""

    def __init__(self, plugin: str, export: str, trap_code: wasmtime.TrapCode | None, limits: Limits) -> None:
        code = trap_code.name if trap_code is not None else "UNKNOWN"
        why = {
            "OUT_OF_FUEL": f"ran out of fuel (budget {limits.fuel} per call)",
            "INTERRUPT": f"ran past its time limit ({limits.timeout:g}s, epoch watchdog)",
            "MEMORY_OUT_OF_BOUNDS": f"accessed memory out of bounds (limit {limits.memory_bytes} bytes)",
        }.get(code, "trapped")
        super().__init__(f"wasm guest of {plugin} {why} in {export}: trap {code}")
        self.trap_code = trap_code


class WasmGuestError(RuntimeError):
    """The guest returned a non-zero code, or the node table does not fit its memory limit."""


_engine: wasmtime.Engine | None = None
_engine_lock = threading.Lock()
_watchdog: threading.Thread | None = None


def engine() -> wasmtime.Engine:
    """The process's engine, with fuel and epoch interruption on (modules belong to one engine)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            config = wasmtime.Config()
            config.consume_fuel = True
            config.epoch_interruption = True
            _engine = wasmtime.Engine(config)
        return _engine


def _start_watchdog(eng: wasmtime.Engine) -> None:
    global _watchdog
    with _engine_lock:
        if _watchdog is not None:
            return

        def tick() -> None:
            while True:
                time.sleep(TICK)
                eng.increment_epoch()

        _watchdog = threading.Thread(target=tick, name="wasm-epoch-watchdog", daemon=True)
        _watchdog.start()


@dataclass(frozen=True)
class Limits:
    fuel: int = DEFAULT_FUEL
    timeout: float = DEFAULT_TIMEOUT
    memory_bytes: int = DEFAULT_MEMORY_LIMIT

    @property
    def epoch_ticks(self) -> int:
        # +1: the tick now running may end at once
        return max(1, math.ceil(self.timeout / TICK)) + 1


class Sandbox:
    """One module, instantiated in a store of its own with the limits; calls run under them."""

    def __init__(self, source: str | Path | bytes, limits: Limits | None = None, *, name: str = NAME) -> None:
        self.name = name
        self.limits = limits or Limits()
        self.engine = engine()
        if isinstance(source, bytes):
            self.module = wasmtime.Module(self.engine, source)
        else:
            path = Path(source)
            if not path.exists():
                raise FileNotFoundError(f"{name}: wasm module {str(path)!r} does not exist")
            self.module = (wasmtime.Module(self.engine, path.read_text()) if path.suffix == ".wat"
                           else wasmtime.Module.from_file(self.engine, str(path)))
        exported = {e.name for e in self.module.exports}
        missing = {"memory", "input_offset"} - exported
        if missing:
            raise ValueError(f"{name}: the wasm module does not export {sorted(missing)}")
        self.exported = exported
        self.calls = 0
        self.traps = 0
        self.last_fuel = 0
        self.last_trap: wasmtime.TrapCode | None = None
        self._instantiate()

    def _instantiate(self) -> None:
        self.store = wasmtime.Store(self.engine)
        self.store.set_limits(memory_size=self.limits.memory_bytes)
        self.store.set_fuel(self.limits.fuel)
        self.store.set_epoch_deadline(self.limits.epoch_ticks)
        instance = wasmtime.Instance(self.store, self.module, [])
        exports = instance.exports(self.store)
        memory = exports["memory"]
        if not isinstance(memory, wasmtime.Memory):
            raise ValueError(f"{self.name}: export 'memory' is not a memory")
        self.memory = memory
        self.funcs: dict[str, wasmtime.Func] = {n: f for n in self.exported if isinstance(f := exports[n], wasmtime.Func)}
        self.base = int(self.funcs["input_offset"](self.store))

    def _arm(self) -> None:
        self.store.set_fuel(self.limits.fuel)
        self.store.set_epoch_deadline(self.limits.epoch_ticks)
        _start_watchdog(self.engine)

    def _trapped(self, export: str, trap: wasmtime.Trap) -> WasmTrap:
        self.traps += 1
        self.last_trap = trap.trap_code
        self.last_fuel = self.limits.fuel - self.store.get_fuel()
        error = WasmTrap(self.name, export, trap.trap_code, self.limits)
        self._instantiate()
        return error

    def _view(self, need: int) -> npt.NDArray[np.uint8]:
        """The guest's linear memory as a numpy array (no copy), at least `need` bytes long."""
        size = self.memory.data_len(self.store)
        if size < need:
            pages = (need - size + PAGE - 1) // PAGE
            try:
                self.memory.grow(self.store, pages)
            except wasmtime.WasmtimeError as err:
                raise WasmGuestError(f"{self.name}: {need} bytes of node table do not fit the memory limit "
                                     f"({self.limits.memory_bytes} bytes): {err}") from err
            size = self.memory.data_len(self.store)
        view: npt.NDArray[np.uint8] = np.ctypeslib.as_array(self.memory.data_ptr(self.store), shape=(size,))
        return view

    def run_columns(self, export: str, columns: IntArray, pod_cpu: int, pod_memory: int) -> IntArray:
        """Write `columns` (k x n) at input_offset, call export(n, pod_cpu, pod_memory) once, read n results."""
        k, n = columns.shape
        start = self.base
        out = start + k * n * 8
        memory = self._view(out + n * 8)
        memory[start:out].view(np.int64)[:] = columns.ravel()
        self._arm()
        self.calls += 1
        try:
            code = self.funcs[export](self.store, n, pod_cpu, pod_memory)
        except wasmtime.Trap as trap:
            raise self._trapped(export, trap) from None
        self.last_fuel = self.limits.fuel - self.store.get_fuel()
        if code != 0:
            raise WasmGuestError(f"{self.name}: {export} returned error code {code}")
        memory = self._view(out + n * 8)  # the guest may have grown (and moved) its memory
        return memory[out: out + n * 8].view(np.int64).copy()

    def run_per_node(self, export: str, columns: IntArray, pod_cpu: int, pod_memory: int) -> IntArray:
        """One call per node (columns 0..3 as arguments): the slow way, for comparison."""
        n = columns.shape[1]
        fn = self.funcs[export]
        rows = columns[:4].T.tolist()
        out = np.empty(n, np.int64)
        self._arm()  # one budget for the whole cycle, as the batched call has
        self.calls += n
        try:
            for i, (ca, cr, ma, mr) in enumerate(rows):
                out[i] = fn(self.store, ca, cr, ma, mr, pod_cpu, pod_memory)
        except wasmtime.Trap as trap:
            raise self._trapped(export, trap) from None
        self.last_fuel = self.limits.fuel - self.store.get_fuel()
        return out


def node_columns(nodes: NodeTable, rows: npt.NDArray[np.intp] | None = None) -> IntArray:
    """The ABI's COLUMNS for `rows` (all rows if None), as a (len(COLUMNS), n) int64 array."""
    table = np.stack([nodes.allocatable(CPU), nodes.requested(CPU), nodes.allocatable(MEMORY),
                      nodes.requested(MEMORY), nodes.allocatable(PODS), nodes.requested(PODS)])
    if rows is not None and len(rows) != len(nodes):
        table = table[:, rows]
    return np.ascontiguousarray(table, np.int64)


class WasmPlugin:
    """The part common to the Filter and Score forms (which one a module gets depends on its exports)."""

    reads_pods = True  # its verdicts read the requested resources, which pods change

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        """The pod's cpu and memory requests, part of its resources (NodeResourcesFit's signer)."""
        return [(signature.RESOURCES, signature.resources_signer(pod))], Status.success()

    def __init__(self, name: str, sandbox: Sandbox, *, per_node: bool = False,
                 reasons: tuple[str, ...] = ()) -> None:
        self.name = name
        self.sandbox = sandbox
        self.per_node = per_node
        self.reasons = reasons or tuple(f"node(s) rejected by {name} (reason {1 << i})" for i in range(8))


class WasmScorePlugin(WasmPlugin):
    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        columns = node_columns(nodes, rows)
        cpu, memory = pod.request(CPU), pod.request(MEMORY)
        if self.per_node:
            return self.sandbox.run_per_node("score_one", columns, cpu, memory)
        return self.sandbox.run_columns("score", columns, cpu, memory)


class WasmFilterPlugin(WasmPlugin):
    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        bits = self.sandbox.run_columns("filter", node_columns(nodes), pod.request(CPU), pod.request(MEMORY))
        if not bits.any():
            return FilterResult.all_pass(len(nodes))
        if bits.min() < 0 or bits.max() >= 1 << len(self.reasons):
            raise WasmGuestError(f"{self.name}: filter returned reason bits outside 0..{(1 << len(self.reasons)) - 1}")
        return FilterResult(bits == 0, bits.astype(np.uint8), self.reasons)


class WasmFilterScorePlugin(WasmScorePlugin, WasmFilterPlugin):
    pass


def _limits(name: str, args: Mapping[str, Any]) -> Limits:
    def number(key: str, default: float, kind: type) -> Any:
        value = args.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or (
                kind is int and not float(value).is_integer()):
            raise ValueError(f"{name} args: {key} must be a positive {kind.__name__}, got {value!r}")
        return kind(value)

    return Limits(number("fuel", DEFAULT_FUEL, int), number("timeoutSeconds", DEFAULT_TIMEOUT, float),
                  number("memoryLimitBytes", DEFAULT_MEMORY_LIMIT, int))


def build(name: str, args: Mapping[str, Any] | None) -> WasmPlugin:
    """The plugin `name` from its args (see the module docstring); errors name the bad arg."""
    args = dict(args or {})
    unknown = set(args) - _ARGS
    if unknown:
        raise ValueError(f"{name} args: unknown field(s) {sorted(unknown)} (known: {sorted(_ARGS)})")
    if not isinstance(args.get("path"), str) or not args["path"]:
        raise ValueError(f"{name} args: path (a .wat or .wasm file) is required")
    calls = args.get("calls", "batch")
    if calls not in ("batch", "per-node"):
        raise ValueError(f"{name} args: calls must be 'batch' or 'per-node', got {calls!r}")
    reasons = args.get("reasons", [])
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons) or len(reasons) > 8:
        raise ValueError(f"{name} args: reasons must be a list of at most 8 strings")
    sandbox = Sandbox(args["path"], _limits(name, args), name=name)
    has_score, has_filter = "score" in sandbox.exported, "filter" in sandbox.exported
    if calls == "per-node" and "score_one" not in sandbox.exported:
        raise ValueError(f"{name}: calls: per-node needs the module to export score_one")
    cls: type[WasmPlugin]
    if has_score and has_filter:
        cls = WasmFilterScorePlugin
    elif has_score:
        cls = WasmScorePlugin
    elif has_filter:
        cls = WasmFilterPlugin
    else:
        raise ValueError(f"{name}: the wasm module exports neither score nor filter")
    return cls(name, sandbox, per_node=calls == "per-node", reasons=tuple(reasons))


def factory(name: str) -> Any:
    """A registry factory for a wasm plugin registered under `name` (several may coexist)."""
    return lambda args, _handle: build(name, args)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> WasmPlugin:
    return build(NAME, args)
