"""Incremental table refresh: +k entries onto an installed memo, gated on the new entries and the
digest chain; the result equals the full compile's table, answers every carried and added entry,
and a changed answer or nothing new is refused."""

from __future__ import annotations

import pytest
from test_memo_scale import _memo_store

from auto.codegen import TableModel, compile_table
from auto.compile import compile_task
from auto.compile.rungs.memo_refresh import merge_input_schema, refresh_table
from auto.compile.witnesses import input_schema
from auto.errors import CompileError, RungRefused
from auto.store import Store
from auto_runtime import Artifact


def _installed(tmp_path, n=200):
    _memo_store(tmp_path / "s.db", n)
    with Store(tmp_path / "s.db") as st:
        return compile_task(st, "memo", rungs=["memo"], out_path=tmp_path / "g1.wasm")


def test_refresh_adds_entries_and_carries_the_installed_table(tmp_path):
    o = _installed(tmp_path)
    added = [({"ticket": f"new ticket {i}"}, ["billing", "bug"][i % 2]) for i in range(30)]
    # an added entry already installed with the same answer is dropped, not refused
    added.append(({"ticket": "ticket 000003 "}, Artifact.load(o.wasm).call({"ticket": "ticket 000003 "})["answer"]))
    with Store(tmp_path / "s.db") as st:
        r = refresh_table(st, "memo", o.wasm, added, out_path=tmp_path / "g2.wasm")
    m = r.manifest
    decl = m["model"]["table"]
    assert r.generation == o.generation + 1 and m["compiled_as"] == "memo" and m["model"]["entries"] == 230
    assert decl["extends"] == {"artifact_id": o.artifact_id, "digest": o.manifest["model"]["table"]["digest"],
                               "entries": 200, "generation": o.generation}
    # the same table a full compile of every entry gives, byte for byte
    old = Artifact.load(o.wasm)
    entries = [({"ticket": f"ticket {i:06d} "}, old.call({"ticket": f"ticket {i:06d} "})["answer"]) for i in range(200)]
    full = TableModel(entries + added[:30])
    assert compile_table(full)[1]["digest"] == decl["digest"]
    assert m["interface"]["input"] == input_schema([e[0] for e in entries + added])
    new = Artifact.load(r.wasm)
    code = Artifact.load(r.wasm, table_fast_path=False)
    for inp, ans in entries + added:
        assert new.call(inp)["answer"] == ans == code.call(inp)["answer"]
    assert code.call({"ticket": "never seen"})["nonconformity"] == 1.0
    assert (tmp_path / "g2.wasm").read_bytes() == r.wasm


def test_refresh_records_the_chain_check_in_its_eval_run(tmp_path):
    o = _installed(tmp_path, 100)
    with Store(tmp_path / "s.db") as st:
        r = refresh_table(st, "memo", o.wasm, [({"ticket": "fresh"}, "bug")])
        rec = st.get_eval_run(r.eval_run_id)
    checks = {c["name"]: c for c in rec["checks"]}
    assert checks["installed-table-carried"]["passed"] and checks["installed-table-carried"]["n"] == 100
    assert checks["installed-table-carried"]["missing"] == checks["installed-table-carried"]["changed"] == 0
    assert checks["witnessed-agreement"]["n"] == 1 + 64  # the added entry and the carried sample
    assert rec["verdict"] == "pass" and r.eval_run_id in r.manifest["eval_runs"]


def test_a_changed_answer_or_nothing_new_is_refused(tmp_path):
    o = _installed(tmp_path, 50)
    old = Artifact.load(o.wasm)
    x = {"ticket": "ticket 000007 "}
    ans = old.call(x)["answer"]
    with Store(tmp_path / "s.db") as st:
        with pytest.raises(RungRefused, match="another answer"):
            refresh_table(st, "memo", o.wasm, [(x, ans + "-changed"), ({"ticket": "n"}, "bug")])
        with pytest.raises(CompileError, match="nothing to add"):
            refresh_table(st, "memo", o.wasm, [(x, ans)])


def test_merged_schema_equals_the_schema_of_all_inputs():
    old = [{"a": "x", "b": 1}, {"a": "y", "b": 2.5, "c": True}]
    new = [{"a": "z", "b": None}, {"a": 3, "b": 1, "d": []}]
    assert merge_input_schema(input_schema(old), new) == input_schema(old + new)


def test_refresh_from_the_loaded_artifact_equals_refresh_from_its_bytes(tmp_path):
    o = _installed(tmp_path, 80)
    added = [({"ticket": "one more"}, "bug"), ({"ticket": "and another"}, "billing")]
    with Store(tmp_path / "s.db") as st:
        a = refresh_table(st, "memo", o.wasm, added, generation=5)
        b = refresh_table(st, "memo", Artifact.load(o.wasm), added, generation=5)
        with pytest.raises(CompileError, match="declares no model.table"):
            refresh_table(st, "memo", Artifact.load(o.wasm, table_fast_path=False), added, generation=6)
    assert a.wasm == b.wasm and a.manifest["model"]["table"]["extends"]["artifact_id"] == o.artifact_id
