"""Real artifacts for the fuzz targets, built by the compiler's own code from small seeded corpora.

* :func:`models` — ``name -> (model, wasm code)``: a record program and a regex program (the
  program backend), an exact-match table, a distilled specialist and a memo-first table (the
  specialist backend); each model is its artifact's Python reference.
* :func:`artifacts` — the same code emitted with a manifest, plus one generation compiled end to
  end by the ladder from a store of witnesses (a real manifest: guard stack, parity, provenance),
  cached under ``out/fuzz/seeds/`` (built once: the compile takes a few seconds).
"""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SEED_DIR = ROOT / "out" / "fuzz" / "seeds"

TOPICS = {
    "billing": ["invoice", "refund", "charged twice", "payment", "receipt"],
    "bug": ["crash", "error 500", "freezes", "blank page", "exception"],
    "account": ["password reset", "locked out", "two-factor", "login", "username"],
}
FILLER = ["hello,", "thanks!", "urgent:", "since yesterday", "again", "merci 🙏", "日本語"]


def tickets(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` seeded ``(ticket, topic)`` pairs, topics round-robin."""
    rng = random.Random(seed)
    names = sorted(TOPICS)
    out = []
    for i in range(n):
        t = names[i % len(names)]
        words = rng.sample(TOPICS[t], 2) + rng.sample(FILLER, 2)
        rng.shuffle(words)
        out.append((" ".join(words) + f" #{rng.randrange(1000)}", t))
    return out


def _programs() -> dict[str, Any]:
    from auto.models.program import ast as A

    t = A.Field("t")
    money = A.ParseMoney(A.Search(t, r"\$(\d+(?:,\d{3})*(?:\.\d+)?)", 1))
    return {
        "program_route": A.If(((A.Compare("ge", money, 20000), A.Const("reject")),
                               (A.Compare("lt", money, 500), A.Const("approve"))), A.Const("review")),
        "program_record": A.Record((("email", A.Search(A.Lower(t), r"(\w+)@(\w+)\.com", 0)),
                                    ("words", A.Split(A.Strip(t), " ")), ("n", A.ParseInt(A.Slice(t, 0, 3))),
                                    ("kind", A.Lookup(A.Index(A.Split(t, " "), -1), (("now", A.Const(1)),), A.Deopt())))),
    }


@functools.lru_cache(maxsize=1)
def models() -> dict[str, tuple[Any, bytes]]:
    """``name -> (model, wasm code)`` (a program AST, a ``TableModel`` or a ``CompiledModel``)."""
    from auto.codegen import TableModel, compile_model
    from auto.codegen.program_lower import compile_program
    from auto.models.specialist.train import distill

    out: dict[str, tuple[Any, bytes]] = {}
    for name, prog in _programs().items():
        out[name] = (prog, compile_program(prog))
    corpus = tickets(120, seed=1)
    table = TableModel([({"ticket": text}, topic) for text, topic in corpus[:40]])
    out["table"] = (table, compile_model(table))
    spec = distill([({"ticket": text}, topic, 1.0) for text, topic in corpus], seed=0).model
    out["specialist"] = (spec, compile_model(spec))
    memo_first = TableModel([({"ticket": text}, topic) for text, topic in corpus[:20]], fallback=spec)
    out["memo_first"] = (memo_first, compile_model(memo_first))
    return out


def _manifest(name: str, model: Any) -> dict[str, Any]:
    field = "t" if name.startswith("program") else "ticket"
    return {"format": "auto.artifact/1", "task": f"fuzz-{name}", "generation": 1,
            "compiled_as": "program" if name.startswith("program") else "specialist",
            "interface": {"input": {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}},
            "guard": {"method": "program" if name.startswith("program") else "none"}}


def _ladder_artifact() -> bytes:
    """One generation compiled end to end (program rung) from a store of seeded witnesses."""
    import tempfile

    from auto.compile import compile_task
    from auto.store import Store

    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "w.sqlite") as st:
            for i in range(240):
                amount = rng.choice([rng.randrange(10, 499), rng.randrange(500, 19999), rng.randrange(20000, 90000)])
                text = f"{rng.choice(['IT', 'Sales', 'Ops'])} needs ${amount:,} for {rng.choice(['cables', 'laptops', 'a booth'])}"
                label = "reject" if amount >= 20000 else "approve" if amount < 500 else "review"
                for _ in range(2):
                    st.add_witness("route", {"request": text}, label, started_ns=i)
            outcome = compile_task(st, "route", out_path=Path(tmp) / "route.wasm")
            return outcome.wasm


@functools.lru_cache(maxsize=1)
def artifacts() -> dict[str, bytes]:
    """``name -> artifact bytes`` (code + manifest), the ladder's generation cached on disk."""
    from auto.emit import emit

    out = {name: emit(code, _manifest(name, model)) for name, (model, code) in models().items()}
    cached = SEED_DIR / "ladder_route.wasm"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_bytes(_ladder_artifact())
        tmp.replace(cached)
    out["ladder_route"] = cached.read_bytes()
    return out
