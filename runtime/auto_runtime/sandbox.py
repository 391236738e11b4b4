"""The sandbox: one shared wasmtime engine, its epoch ticker, limits, and a per-instance caller.

Engine configuration (one process-wide :func:`shared_engine`):

- ``consume_fuel=True``: every call gets a fuel budget (roughly one unit per wasm instruction);
  running out traps with ``OUT_OF_FUEL`` -> :class:`~auto_runtime.errors.FuelExhausted`.
  Fuel is deterministic: the same input always stops at the same point.
- ``epoch_interruption=True`` plus a daemon ticker thread that increments the engine's epoch
  every :data:`EPOCH_TICK_MS` ms; each call sets its deadline ``ceil(timeout_ms / tick) + 1``
  ticks ahead, so a call is interrupted between ``timeout_ms`` and ``timeout_ms + tick`` after
  it starts -> :class:`~auto_runtime.errors.CallTimeout`. This is the wall-clock backstop for
  code that burns time without burning fuel (and for a fuel budget set very high). Epochs tick
  in wall time, also while the calling thread is descheduled, so the deadline is set from the
  artifact's measured fuel with a generous margin and a floor (:func:`deadline_ms`), never so
  tight that a loaded host's scheduler trips it; a timeout is a deopt, never a crash.
- ``memory_may_move=False``: a linear memory's base address never changes, so the fast path may
  cache it (it re-reads it anyway whenever the memory's size changes).
- threads / shared memory, memory64 and multi-memory are disabled: the ABI needs none of them.

Per instance (:class:`Sandbox`): a fresh ``wasmtime.Store`` with ``set_limits(memory_size=...)``
(``memory.grow`` past the limit returns -1; instantiation needing more fails), one instance, and
the ABI exports. A Sandbox that saw any failure must be discarded; :class:`~auto_runtime.artifact.Artifact`
does that, so no state leaks from a failed call into the next.

Fast path: ``Func.__call__`` costs 30-55 µs (it re-reads the function type and boxes every
value). :class:`Sandbox` instead calls ``wasmtime_func_call_unchecked`` through a ctypes
prototype built once, with a preallocated ``wasmtime_val_raw_t[2]`` argument/result buffer and
preallocated pointers; inputs are written into, and outputs copied out of, a byte view of the
linear memory at its base address (a slice assignment and a slice copy, no foreign call). The call is safe because the export's type was
checked against the ABI when the artifact was loaded (``(i32, i32) -> i64``, ``(i32) -> i32``)
and the function belongs to this store. The checked path (``Func.__call__``) is the fallback
when the raw symbols are unavailable, and can be forced with ``AUTO_RUNTIME_CALL_PATH=checked``.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import wasmtime

from auto_runtime.errors import (
    AutoError,
    CallTimeout,
    FuelExhausted,
    MalformedArtifact,
    MemoryLimitExceeded,
    OutputError,
    TrapError,
)

log = logging.getLogger("auto_runtime.sandbox")

DEFAULT_FUEL = 50_000_000
"""Default fuel per call (≈ wasm instructions). A compiled specialist (featurize a few KB of
text into n-gram buckets, a linear head, a novelty head over tens of prototypes) needs well
under 1M; 50M is ~50x headroom, and a runaway loop burns it in roughly 25-75 ms of CPU (about
70 ms measured on the development machine), inside the default timeout, so the deterministic
limit normally fires first and the timeout stays a backstop."""

DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024
"""Default linear-memory cap per instance, in bytes (64 MiB = 1024 pages). Weights of the
largest expected specialist (2^16 buckets x 32 classes of f32 = 8 MiB) plus input/output
buffers fit several times over; a cap this size still lets hundreds of artifacts share a host."""

DEADLINE_FLOOR_MS = 1000.0
"""The least wall-clock deadline per call a limit derived from the manifest gets, in ms. Source:
on a loaded 2-core host a 51 µs tier-1 call was descheduled past a fixed 100 ms deadline (the
extraction benchmark's warm loop); epochs count wall time, descheduled time included, so the
floor is ten times that. Runaway code is stopped first by its fuel (deterministic), not by this."""

DEFAULT_TIMEOUT_MS = DEADLINE_FLOOR_MS
"""Wall-clock deadline per call of an artifact whose manifest records no fuel, in ms
(:data:`DEADLINE_FLOOR_MS`)."""

DEADLINE_NS_PER_FUEL = 2.0
"""Wall time one fuel unit may take, in ns, for sizing deadlines. Measured: a runaway loop burns
the default 50M fuel in about 70 ms (1.4 ns per unit) on the development machine; rounded up."""

DEADLINE_MARGIN = 100
"""Deadline margin over the measured fuel of the costliest call: a call may take 100x the wall
time its measured fuel needs (contention, cold caches, a slower host) before it times out."""


def deadline_ms(fuel_max: int | None, fuel_budget: int = DEFAULT_FUEL) -> float:
    """The wall-clock deadline per call, in ms, for an artifact whose costliest measured call
    used ``fuel_max`` fuel units (the manifest's ``fuel_per_call.max``; None: not measured) and
    whose calls run under ``fuel_budget`` units:

        max(DEADLINE_FLOOR_MS, max(fuel_max * DEADLINE_MARGIN, fuel_budget) * DEADLINE_NS_PER_FUEL / 1e6)

    The ``fuel_budget`` term keeps the deadline above the time the whole budget takes to burn,
    so a runaway loop is stopped by its fuel (deterministic) rather than by the clock.
    """
    work = fuel_budget
    if fuel_max is not None and fuel_max > 0:
        work = max(work, fuel_max * DEADLINE_MARGIN)
    return max(DEADLINE_FLOOR_MS, work * DEADLINE_NS_PER_FUEL / 1e6)


def manifest_fuel_max(manifest: Any) -> int | None:
    """The manifest's ``fuel_per_call.max`` (fuel units) when it is a positive int, else None."""
    fpc = manifest.get("fuel_per_call") if isinstance(manifest, dict) else None
    m = fpc.get("max") if isinstance(fpc, dict) else None
    return m if isinstance(m, int) and not isinstance(m, bool) and m > 0 else None

EPOCH_TICK_MS = 2.0
"""Period of the epoch ticker thread, in ms (the timeout's granularity)."""

WASM_PAGE = 65536

MAX_FUEL = 2**63 - 1


BUDGET_BYTES = 256 * 1024
"""Input bytes one budget unit (``fuel``, ``timeout_ms``) covers. Measured: the specialist
prelude needs ~136 fuel per input byte, so the default 50M fuel covers ~360 KiB; every further
started 256 KiB of input adds one unit, so a 1 MiB input gets 4 units instead of running dry."""


def budget_units(nbytes: int, items: int = 1) -> int:
    """Budget units for a call of ``nbytes`` input bytes covering ``items`` inputs."""
    return max(1, items, -(-nbytes // BUDGET_BYTES))


@dataclass(frozen=True, slots=True)
class Limits:
    """Sandbox limits for one call.

    Attributes:
        fuel: fuel units per call (≈ wasm instructions), > 0. Batched calls get ``fuel * n``;
            inputs over :data:`BUDGET_BYTES` get one more unit per started 256 KiB.
        memory_bytes: cap on the instance's linear memory, in bytes (>= 64 KiB). Checked at load
            against the module's declared initial memory, and enforced on ``memory.grow``.
        timeout_ms: wall-clock deadline per call in milliseconds, > 0 (granularity
            :data:`EPOCH_TICK_MS`), or None (the default): set when an artifact is loaded from
            its manifest's measured fuel (:func:`deadline_ms`, :meth:`for_manifest`); a Sandbox
            given None uses :data:`DEFAULT_TIMEOUT_MS`. Batched calls get ``timeout_ms * n``.

    Raises:
        ValueError: a limit is not positive, or ``memory_bytes`` is below one page.
    """

    fuel: int = DEFAULT_FUEL
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    timeout_ms: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.fuel, bool) or not isinstance(self.fuel, int) or not 0 < self.fuel <= MAX_FUEL:
            raise ValueError(f"fuel must be an int in 1..2**63-1, got {self.fuel!r}")
        if (isinstance(self.memory_bytes, bool) or not isinstance(self.memory_bytes, int)
                or self.memory_bytes < WASM_PAGE):
            raise ValueError(f"memory_bytes must be an int >= {WASM_PAGE}, got {self.memory_bytes!r}")
        if self.timeout_ms is not None and (not isinstance(self.timeout_ms, (int, float))
                                             or isinstance(self.timeout_ms, bool)
                                             or not 0 < self.timeout_ms < math.inf):
            raise ValueError(f"timeout_ms must be a positive finite number, got {self.timeout_ms!r}")

    def for_manifest(self, manifest: Any) -> "Limits":
        """These limits with an unset ``timeout_ms`` filled in from ``manifest``'s measured fuel
        (:func:`deadline_ms` of :func:`manifest_fuel_max` and ``fuel``); unchanged when set."""
        if self.timeout_ms is not None:
            return self
        return Limits(self.fuel, self.memory_bytes, deadline_ms(manifest_fuel_max(manifest), self.fuel))

    @property
    def deadline(self) -> float:
        """``timeout_ms``, or :data:`DEFAULT_TIMEOUT_MS` when unset (ms)."""
        return DEFAULT_TIMEOUT_MS if self.timeout_ms is None else self.timeout_ms

    def fuel_for(self, items: int = 1) -> int:
        """Fuel for a call covering ``items`` inputs."""
        return min(MAX_FUEL, self.fuel * max(1, items))

    def epoch_ticks(self, items: int = 1) -> int:
        """Epoch deadline, in ticks beyond the current epoch, for ``items`` inputs."""
        return math.ceil(self.deadline * max(1, items) / EPOCH_TICK_MS) + 1


# --------------------------------------------------------------------------- engine + ticker

_engine_lock = threading.Lock()
_engine: wasmtime.Engine | None = None
_ticker: "_EpochTicker | None" = None


class _EpochTicker:
    """Daemon thread incrementing one engine's epoch every :data:`EPOCH_TICK_MS` ms."""

    def __init__(self, engine: wasmtime.Engine) -> None:
        self.engine = engine
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="auto-runtime-epoch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        period = EPOCH_TICK_MS / 1000.0
        inc = self.engine.increment_epoch
        sleep = time.sleep
        while True:
            sleep(period)
            inc()

    def alive(self) -> bool:
        return self.pid == os.getpid() and self.thread.is_alive()


def _make_config() -> wasmtime.Config:
    cfg = wasmtime.Config()
    cfg.consume_fuel = True
    cfg.epoch_interruption = True
    for name, value in (
        ("memory_may_move", False),
        ("wasm_threads", False),
        ("shared_memory", False),
        ("wasm_memory64", False),
        ("wasm_multi_memory", False),
    ):
        try:
            setattr(cfg, name, value)
        except Exception:  # pragma: no cover - older/newer wasmtime without the knob
            log.debug("wasmtime Config has no %s", name)
    return cfg


def _restart_ticker_after_fork() -> None:
    # threads do not survive fork(); without a ticker no call in the child could time out
    global _ticker, _engine_lock
    _engine_lock = threading.Lock()
    if _engine is not None:
        _ticker = _EpochTicker(_engine)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_restart_ticker_after_fork)


def shared_engine() -> wasmtime.Engine:
    """The process-wide engine (fuel + epoch interruption), with its ticker running.

    Safe to call often; restarts the ticker after ``os.fork``.
    """
    global _engine, _ticker
    eng = _engine
    tick = _ticker
    if eng is not None and tick is not None and tick.alive():
        return eng
    with _engine_lock:
        if _engine is None:
            _engine = wasmtime.Engine(_make_config())
        if _ticker is None or not _ticker.alive():
            _ticker = _EpochTicker(_engine)
        return _engine


# --------------------------------------------------------------------------- trap mapping

_TRAP_CODES = wasmtime.TrapCode


def short_trap_message(message: str) -> str:
    """The cause line of a wasmtime trap message, without the backtrace."""
    text = message.split("Caused by:", 1)[-1].strip()
    first = text.splitlines()[0].strip() if text else message.strip()
    if first.startswith("wasm trap: "):
        first = first[len("wasm trap: "):]
    return first[:300]


def _trap_error(what: str, detail: str) -> TrapError:
    err = TrapError(f"{what}: {detail}")
    err.trap_message = detail  # type: ignore[attr-defined]
    return err


class _Probe:
    """What failure classification needs from a sandbox: its store, memory and memory cap.

    Kept apart from :class:`Sandbox` so the fast-path closure does not reference the Sandbox
    (no reference cycle: a discarded Store is freed at once, not at the next GC)."""

    __slots__ = ("store", "memory", "memory_limit")

    def __init__(self, store: wasmtime.Store, memory_limit: int) -> None:
        self.store = store
        self.memory: Any = None
        self.memory_limit = memory_limit

    def memory_size(self) -> int:
        """Current linear-memory size in bytes (0 if there is no memory yet)."""
        if self.memory is None:
            return 0
        try:
            return int(self.memory.data_len(self.store))
        except Exception:  # pragma: no cover
            return 0


def _limit_or_trap(code: Any, message: str, sandbox: _Probe, fuel: int, ticks: int) -> AutoError:
    if code == _TRAP_CODES.OUT_OF_FUEL:
        return FuelExhausted(f"artifact call ran out of fuel ({fuel} units)")
    if code == _TRAP_CODES.INTERRUPT:
        ms = (ticks - 1) * EPOCH_TICK_MS
        return CallTimeout(f"artifact call exceeded its wall-clock deadline (~{ms:g} ms)")
    # memory.grow past the store limit returns -1 rather than trapping; the artifact then traps
    # (or returns garbage). Attribute the failure to the limit when memory is at the cap.
    message = short_trap_message(message)
    size = sandbox.memory_size()
    limit = sandbox.memory_limit
    if size + WASM_PAGE > limit:
        return MemoryLimitExceeded(
            f"artifact failed with its memory at the limit ({size} of {limit} bytes): {message}"
        )
    return _trap_error("artifact trapped", message)


def _instantiation_error(err: Exception, sandbox: _Probe, limits: Limits) -> AutoError:
    if isinstance(err, wasmtime.Trap):
        return _limit_or_trap(err.trap_code, err.message, sandbox, limits.fuel, limits.epoch_ticks())
    msg = str(err)
    if "memory" in msg and ("limit" in msg or "resource" in msg or "grow" in msg):
        return MemoryLimitExceeded(f"cannot instantiate within {limits.memory_bytes} bytes: {msg}")
    return MalformedArtifact(f"cannot instantiate the module: {short_trap_message(msg)}")


def _pop_host_exception() -> BaseException | None:
    try:
        from wasmtime import _func as wfunc  # wasmtime-py keeps a host callback's exception here
    except Exception:  # pragma: no cover
        return None
    exn = getattr(wfunc, "LAST_EXCEPTION", None)
    if exn is not None:
        wfunc.LAST_EXCEPTION = None
    return exn


# --------------------------------------------------------------------------- raw ctypes entry points


class _Raw:
    """ctypes entry points of the few wasmtime C functions the fast path uses (built once).

    They are declared with ``argtypes = None`` so that arguments prebuilt as ctypes objects of
    the exact C type (``c_void_p`` pointers, ``c_size_t`` / ``c_uint64`` counts) are passed
    without per-call conversion; callers must pass only such objects.
    """

    def __init__(self) -> None:
        from wasmtime import _ffi as ffi

        dll = ffi.dll
        vp, sz = ctypes.c_void_p, ctypes.c_size_t

        def fn(kind: Any, restype: Any, name: str) -> Any:
            f = kind(restype)((name, dll))
            f.argtypes = None
            return f

        # Calls into wasm release the GIL (CFUNCTYPE) so the epoch ticker can run meanwhile;
        # the bookkeeping calls keep it (PYFUNCTYPE, cheaper).
        self.call_unchecked = fn(ctypes.CFUNCTYPE, vp, "wasmtime_func_call_unchecked")
        self.set_fuel = fn(ctypes.PYFUNCTYPE, vp, "wasmtime_context_set_fuel")
        self.set_deadline = fn(ctypes.PYFUNCTYPE, None, "wasmtime_context_set_epoch_deadline")
        self.mem_size = fn(ctypes.PYFUNCTYPE, sz, "wasmtime_memory_data_size")
        self.mem_data = fn(ctypes.PYFUNCTYPE, vp, "wasmtime_memory_data")
        self.trap_ptr_type = ctypes.POINTER(ffi.wasm_trap_t)
        self.error_ptr_type = ctypes.POINTER(ffi.wasmtime_error_t)


_raw: _Raw | None = None
_raw_failed: str | None = None


def _get_raw() -> _Raw | None:
    global _raw, _raw_failed
    if _raw is None and _raw_failed is None:
        if sys.byteorder != "little":  # pragma: no cover - the val_raw layout assumes LE hosts
            _raw_failed = "big-endian host"
            return None
        try:
            _raw = _Raw()
        except Exception as e:  # pragma: no cover - depends on the wasmtime build
            _raw_failed = f"{type(e).__name__}: {e}"
            log.warning("fast call path unavailable, using Func.__call__: %s", _raw_failed)
    return _raw


def fast_path_available() -> bool:
    """Whether the raw ``wasmtime_func_call_unchecked`` path can be used in this process."""
    return _get_raw() is not None


def default_call_path() -> str:
    """``"fast"`` or ``"checked"``: the env var ``AUTO_RUNTIME_CALL_PATH`` or what is available."""
    env = os.environ.get("AUTO_RUNTIME_CALL_PATH", "").strip().lower()
    if env == "checked":
        return "checked"
    return "fast" if fast_path_available() else "checked"


# --------------------------------------------------------------------------- one instance

HostExterns = Callable[[wasmtime.Store], Sequence[Any]]


class Sandbox:
    """One Store + one instance of a module, with the ABI exports resolved.

    Not thread-safe (the caller serializes). Discard it after any exception from
    :meth:`invoke`.

    Args:
        engine: the engine the module was compiled with.
        module: the compiled module (its ABI exports already checked).
        limits: sandbox limits.
        externs: builds the import list (host functions) for a new store, in import order.
        call_path: ``"fast"`` (raw ctypes) or ``"checked"`` (``Func.__call__``).
        batch: whether to resolve ``run_batch``.

    Raises:
        FuelExhausted, CallTimeout, MemoryLimitExceeded, TrapError: the start function failed.
        MalformedArtifact: instantiation failed for another reason.
    """

    invoke: Callable[..., bytes]
    """``invoke(data, batch=False, items=1) -> bytes``: write ``data``, call ``run`` (or
    ``run_batch``), return the output bytes. Raises FuelExhausted, CallTimeout,
    MemoryLimitExceeded, TrapError, OutputError."""

    def __init__(self, engine: wasmtime.Engine, module: wasmtime.Module, limits: Limits,
                 externs: HostExterns, call_path: str = "fast", batch: bool = True) -> None:
        self.limits = limits
        self.memory_limit = limits.memory_bytes
        store = wasmtime.Store(engine)
        store.set_limits(memory_size=limits.memory_bytes, table_elements=1_000_000, instances=4,
                         tables=16, memories=1)
        store.set_fuel(limits.fuel)
        store.set_epoch_deadline(limits.epoch_ticks())
        self.store = store
        self._probe = probe = _Probe(store, limits.memory_bytes)
        try:
            instance = wasmtime.Instance(store, module, list(externs(store)))
        except Exception as e:  # noqa: BLE001
            host = _pop_host_exception()
            if host is not None:
                raise _trap_error("host function raised during instantiation", repr(host)) from None
            raise _instantiation_error(e, probe, limits) from None
        exports = instance.exports(store)
        self.memory = probe.memory = exports["memory"]
        self.alloc = exports["alloc"]
        self.run = exports["run"]
        self.run_batch = exports["run_batch"] if batch else None
        raw = _get_raw() if call_path == "fast" else None
        self.call_path = "fast" if raw is not None else "checked"
        if raw is not None:
            self._setup_fast(raw)
        else:
            self.invoke = self._invoke_checked

    # ------------------------------------------------------------------ shared helpers

    def memory_size(self) -> int:
        """Current linear-memory size in bytes."""
        return self._probe.memory_size()

    def _check_input_size(self, n: int) -> None:
        if n > self.memory_limit:
            raise _input_too_large(n, self.memory_limit)

    # ------------------------------------------------------------------ fast path

    def _setup_fast(self, raw: _Raw) -> None:
        """Build :meth:`invoke` as a closure over prebuilt ctypes arguments."""
        vp, sz, u64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64
        self._raw = raw
        limits = self.limits
        ctx = vp(ctypes.cast(self.store._context(), vp).value)
        vals = (ctypes.c_int64 * 4)()  # wasmtime_val_raw_t[2]: 16 bytes each, i64 at [0], [2]
        vals_p = vp(ctypes.addressof(vals))
        trap = self._trap = vp()
        trap_p = vp(ctypes.addressof(trap))
        mem_p = vp(ctypes.addressof(self.memory._memory))
        alloc_p = vp(ctypes.addressof(self.alloc._func))
        run_p = vp(ctypes.addressof(self.run._func))
        batch_p = vp(ctypes.addressof(self.run_batch._func)) if self.run_batch is not None else run_p
        one, two = sz(1), sz(2)
        fuel_1, ticks_1 = u64(limits.fuel), u64(limits.epoch_ticks())
        call, set_fuel, set_deadline = raw.call_unchecked, raw.set_fuel, raw.set_deadline
        mem_size, mem_data = raw.mem_size, raw.mem_data
        mem_limit = limits.memory_bytes
        fail = functools.partial(_fast_failure, raw, trap, self._probe)
        size = mem_size(ctx, mem_p)
        base = mem_data(ctx, mem_p) or 0
        mem = _memory_view(base, size)  # linear memory as bytes: copies in and out without a foreign call

        def refresh() -> int:
            nonlocal size, base, mem
            new = mem_size(ctx, mem_p)
            if new != size:
                size = new
                base = mem_data(ctx, mem_p) or 0
                mem = _memory_view(base, size)
            return new

        def invoke(data: bytes, batch: bool = False, items: int = 1) -> bytes:
            """Write ``data``, call ``run`` (or ``run_batch``), return the output bytes.

            Raises:
                FuelExhausted, CallTimeout, MemoryLimitExceeded, TrapError, OutputError.
            """
            n = len(data)
            if n > mem_limit:
                raise _input_too_large(n, mem_limit)
            if items == 1 and n <= BUDGET_BYTES:
                fuel, ticks = fuel_1, ticks_1
            else:
                k = budget_units(n, items)
                fuel, ticks = u64(limits.fuel_for(k)), u64(limits.epoch_ticks(k))
            if set_fuel(ctx, fuel):  # pragma: no cover - only if the engine lacks fuel
                raise TrapError("cannot set fuel on this store")
            set_deadline(ctx, ticks)
            vals[0] = n
            err = call(ctx, alloc_p, vals_p, one, trap_p)
            if err or trap.value:
                raise fail(err, fuel.value, ticks.value)
            ptr = vals[0] & 0xFFFFFFFF
            end = ptr + n
            if end > size and end > refresh():
                raise OutputError(f"alloc({n}) returned {ptr}, outside memory of {size} bytes")
            mem[ptr:end] = data
            vals[0] = ptr
            vals[2] = n
            err = call(ctx, batch_p if batch else run_p, vals_p, two, trap_p)
            if err or trap.value:
                raise fail(err, fuel.value, ticks.value)
            r = vals[0] & 0xFFFFFFFFFFFFFFFF
            optr = r >> 32
            end = optr + (r & 0xFFFFFFFF)
            if end > size and end > refresh():
                raise OutputError(f"output region [{optr}, {end}) is outside memory of {size} bytes")
            return mem[optr:end].tobytes()

        self.invoke = invoke

    # ------------------------------------------------------------------ checked path

    def _invoke_checked(self, data: bytes, batch: bool = False, items: int = 1) -> bytes:
        """Same contract as the fast path, through wasmtime-py's public API."""
        store = self.store
        n = len(data)
        self._check_input_size(n)
        k = budget_units(n, items)
        fuel = self.limits.fuel_for(k)
        ticks = self.limits.epoch_ticks(k)
        store.set_fuel(fuel)
        store.set_epoch_deadline(ticks)
        func = self.run_batch if batch else self.run
        try:
            ptr = self.alloc(store, n) & 0xFFFFFFFF
            size = self.memory.data_len(store)
            if ptr + n > size:
                raise OutputError(f"alloc({n}) returned {ptr}, outside memory of {size} bytes")
            base = ctypes.cast(self.memory.data_ptr(store), ctypes.c_void_p).value or 0
            ctypes.memmove(base + ptr, data, n)
            r = func(store, ptr, n) & 0xFFFFFFFFFFFFFFFF
        except wasmtime.Trap as t:
            _pop_host_exception()
            raise _limit_or_trap(t.trap_code, t.message, self._probe, fuel, ticks) from None
        except wasmtime.WasmtimeError as e:
            _pop_host_exception()
            raise _trap_error("artifact call failed", short_trap_message(str(e))) from None
        except AutoError:
            raise
        except Exception as e:  # noqa: BLE001 - a host function's exception, re-raised by wasmtime-py
            raise _trap_error("host function raised", repr(e)) from None
        optr, olen = r >> 32, r & 0xFFFFFFFF
        size = self.memory.data_len(store)
        if optr + olen > size:
            raise OutputError(f"output region [{optr}, {optr + olen}) is outside memory of {size} bytes")
        base = ctypes.cast(self.memory.data_ptr(store), ctypes.c_void_p).value or 0
        return ctypes.string_at(base + optr, olen)

    # ------------------------------------------------------------------ fuel measurement

    def fuel_used(self, data: bytes) -> int:
        """Fuel (≈ WebAssembly instructions) one ``run`` call on ``data`` consumes, ``alloc``
        and the input copy included, through the checked path.

        Deterministic for the same module and input on any machine (wasmtime fuel metering),
        unlike wall-clock latency; the compiler records it in the manifest (``fuel_per_call``).
        Measure on a fresh Sandbox: the count includes what ``alloc`` does on this instance's heap.

        Returns:
            Fuel units consumed.

        Raises:
            FuelExhausted, CallTimeout, MemoryLimitExceeded, TrapError, OutputError: as
            :meth:`invoke`.
        """
        self._invoke_checked(data)
        return self.limits.fuel_for(budget_units(len(data))) - self.store.get_fuel()


def _memory_view(base: int, size: int) -> memoryview:
    """The ``size`` bytes of linear memory at address ``base`` as a writable byte view (empty
    when there is no memory). Valid while the memory keeps this base and size: the engine is
    configured with ``memory_may_move=False``, and the fast path makes a new view whenever the
    size changes."""
    if not base or not size:
        return memoryview(bytearray(0))
    return memoryview((ctypes.c_ubyte * size).from_address(base)).cast("B")


def _input_too_large(n: int, limit: int) -> MemoryLimitExceeded:
    return MemoryLimitExceeded(
        f"input of {n} bytes cannot fit in the artifact's memory limit of {limit} bytes"
    )


def _fast_failure(raw: _Raw, trap: ctypes.c_void_p, probe: _Probe, err: int | None, fuel: int,
                  ticks: int) -> AutoError:
    """Classify a failed raw call: a trap (owned and freed here) or a wasmtime error."""
    host = _pop_host_exception()
    if trap.value:
        t = wasmtime.Trap._from_ptr(ctypes.cast(trap.value, raw.trap_ptr_type))
        trap.value = None
        code, message = t.trap_code, t.message
        if host is not None:
            return _trap_error("host function raised", repr(host))
        return _limit_or_trap(code, message, probe, fuel, ticks)
    error = wasmtime.WasmtimeError._from_ptr(ctypes.cast(err, raw.error_ptr_type))
    if host is not None:
        return _trap_error("host function raised", repr(host))
    return _trap_error("artifact call failed", short_trap_message(str(error)))
