"""Shared helpers for the featurizer/distill/codegen/emit tests: a seeded synthetic ticket corpus
and a minimal wasmtime harness for the artifact ABI (independent of auto_runtime)."""

from __future__ import annotations

import random

import wasmtime

TOPICS = {
    "billing": ["invoice", "refund", "charged twice", "payment", "credit card", "billing address",
                "subscription fee", "receipt", "VAT", "overdue balance"],
    "bug": ["crash", "error 500", "stack trace", "freezes", "broken button", "blank page",
            "exception", "regression", "does not load", "wrong totals"],
    "feature": ["please add", "dark mode", "export to CSV", "integration with Slack",
                "would love", "feature request", "keyboard shortcuts", "bulk edit", "API access",
                "custom fields"],
    "account": ["password reset", "locked out", "two-factor", "change my email", "delete account",
                "username", "login", "sso", "profile", "merge accounts"],
    "security": ["phishing", "suspicious login", "data breach", "vulnerability", "leaked token",
                 "malware", "unauthorized access", "encryption", "CVE", "XSS"],
}
FILLER = ["hello team,", "hi,", "thanks!", "urgent:", "as soon as possible", "on my iPhone",
          "since yesterday", "again", "Grüße —", "merci 🙏", "日本語のサポート", "from Chrome"]


def tickets(n: int, seed: int = 0, topics=TOPICS) -> list[tuple[str, str]]:
    """``n`` (text, topic) pairs, topics round-robin, deterministic for ``seed``."""
    rng = random.Random(seed)
    names = sorted(topics)
    out = []
    for i in range(n):
        t = names[i % len(names)]
        words = rng.sample(topics[t], 3) + rng.sample(FILLER, 2)
        rng.shuffle(words)
        out.append((" ".join(words) + f" #{rng.randrange(10000)}", t))
    return out


def witnesses(n: int, seed: int = 0, field: str = "ticket", topics=TOPICS, label=lambda t: t):
    """``(input, label, weight)`` triples for :func:`auto.models.specialist.train.distill`."""
    return [({field: text}, label(t), 1.0) for text, t in tickets(n, seed, topics)]


_ENGINES: dict[bool, wasmtime.Engine] = {}


def _engine(fuel: bool) -> wasmtime.Engine:
    """One engine per fuel setting, shared by every artifact of the test session."""
    if fuel not in _ENGINES:
        cfg = wasmtime.Config()
        cfg.consume_fuel = fuel
        _ENGINES[fuel] = wasmtime.Engine(cfg)
    return _ENGINES[fuel]


class Artifact:
    """An instantiated artifact: ``run(bytes) -> bytes`` and ``run_batch(bytes) -> bytes``.

    ``fuel``: False (unmetered), True (10**12 units) or a number of units.
    """

    def __init__(self, wasm: bytes, fuel: bool | int = False, memory_limit: int | None = None):
        metered = fuel is not False
        self.engine = _engine(metered)
        self.module = wasmtime.Module(self.engine, wasm)
        self.store = wasmtime.Store(self.engine)
        if metered:
            self.store.set_fuel(10**12 if fuel is True else fuel)
        if memory_limit is not None:
            self.store.set_limits(memory_size=memory_limit)
        self.instance = wasmtime.Instance(self.store, self.module, [])
        ex = self.instance.exports(self.store)
        self.memory, self.alloc = ex["memory"], ex["alloc"]
        self._run, self._batch = ex["run"], ex["run_batch"]

    def _call(self, f, data: bytes) -> bytes:
        p = self.alloc(self.store, len(data))
        assert p != 0
        self.memory.write(self.store, data, p)
        r = f(self.store, p, len(data))
        ptr, n = (r >> 32) & 0xFFFFFFFF, r & 0xFFFFFFFF
        return bytes(self.memory.read(self.store, ptr, ptr + n))

    def run(self, data: bytes) -> bytes:
        return self._call(self._run, data)

    def run_batch(self, data: bytes) -> bytes:
        return self._call(self._batch, data)

    def raw(self, name: str, *args):
        ex = self.instance.exports(self.store)
        return ex[name](self.store, *args)
