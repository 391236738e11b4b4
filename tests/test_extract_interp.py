"""The program DSL's Python side: type checker, reference interpreter, JSON form, pretty form."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auto.canonical import canonical_json
from auto.errors import CompileError, ArgumentError
from auto.models.program import (
    DeoptSignal,
    ProgramTypeError,
    SerialError,
    check,
    evaluate,
    from_json,
    input_fields,
    program_digest,
    render,
    run_program,
    size,
    to_json,
)
from auto.models.program.ast import (
    TYPES,
    And,
    Compare,
    Const,
    Contains,
    Deopt,
    EndsWith,
    Field,
    If,
    Index,
    IsNull,
    Join,
    Lookup,
    Lower,
    Not,
    Or,
    ParseFloat,
    ParseInt,
    ParseMoney,
    Record,
    Search,
    Slice,
    Split,
    StartsWith,
    Strip,
    Upper,
)

E = Field("email")


def ev(program, text):
    return evaluate(program, {"email": text})


# ---------------------------------------------------------------------------------------------
# Interpreter semantics
# ---------------------------------------------------------------------------------------------


def test_case_mapping_and_strip_are_ascii_only():
    assert ev(Lower(E), "ÉCOLE Straße ΣΑΣ") == "École straße ΣΑΣ"
    assert ev(Upper(E), "straße école") == "STRAßE éCOLE"
    assert ev(Strip(E), " \t\n\r\f\vx y\v ") == "x y"
    assert ev(Strip(E), "\u00a0x\u2003") == "\u00a0x\u2003"  # non-ASCII spaces stay
    assert ev(Strip(E), "\x1cx\x1c") == "\x1cx\x1c"  # str.strip() would remove these


@pytest.mark.parametrize(("start", "stop"), [(0, 3), (1, None), (None, 2), (-2, None), (-10, 2), (3, 1),
                                             (2, 100), (None, None), (-1, -1), (5, None)])
def test_slice_counts_code_points_with_python_rules(start, stop):
    text = "h€😀llo"
    assert ev(Slice(E, start, stop), text) == text[start:stop]


def test_split_join_index():
    assert ev(Split(E, ", "), "a, b,c, ") == ["a", "b,c", ""]
    assert ev(Join(Split(E, ","), "|"), "a,b,,c") == "a|b||c"
    assert ev(Index(Split(E, "-"), -1), "ORD-12-é") == "é"
    assert ev(Index(Split(E, "-"), 3), "ORD-12-é") is None
    assert ev(Index(Split(E, "-"), -4), "ORD-12-é") is None
    assert ev(Split(E, "x"), "") == [""]


def test_search_groups_on_unicode_text():
    assert ev(Search(E, r"(\d+)€", 1), "prix: 12€ net") == "12"
    assert ev(Search(E, r"é(.)", 1), "café😀!") == "😀"
    assert ev(Search(E, r"(\w+)@(\w+)", 2), "to: bob@example") == "example"
    assert ev(Search(E, r"(a)|b", 1), "b") is None  # group did not participate
    assert ev(Search(E, r"ORD-\d+"), "none here") is None
    assert ev(Search(E, r"x$"), "x\n") is None  # $ is end of text only
    assert ev(Search(E, r"(?i)refund"), "a ReFuNd b") == "ReFuNd"


def test_text_predicates():
    assert ev(Contains(E, "fund"), "refund") is True
    assert ev(Contains(E, ""), "") is True
    assert ev(StartsWith(E, "Re:"), "Re: x") is True
    assert ev(EndsWith(E, "é"), "café") is True
    assert ev(EndsWith(E, "E"), "café") is False


def test_null_propagation():
    missing = Search(E, "zzz")
    assert ev(Lower(missing), "abc") is None
    assert ev(Upper(Strip(missing)), "abc") is None
    assert ev(Split(missing, ","), "abc") is None
    assert ev(Join(Split(missing, ","), ","), "abc") is None
    assert ev(Index(Split(missing, ","), 0), "abc") is None
    assert ev(Slice(missing, 0, 1), "abc") is None
    assert ev(Search(missing, "a"), "abc") is None
    assert ev(ParseInt(missing), "abc") is None
    assert ev(ParseMoney(missing), "abc") is None
    assert ev(Contains(missing, ""), "abc") is False
    assert ev(StartsWith(missing, ""), "abc") is False
    assert ev(Compare("eq", missing, "x"), "abc") is False
    assert ev(Compare("ne", missing, "x"), "abc") is False
    assert ev(Compare("lt", ParseInt(E), 5), "abc") is False
    assert ev(Compare("ge", ParseInt(E), 5), "abc") is False
    assert ev(IsNull(missing), "abc") is True
    assert ev(IsNull(E), "abc") is False
    assert ev(Not(Contains(missing, "a")), "abc") is True
    table = Lookup(missing, (("", Const("empty")),), Const("default"))
    assert ev(table, "abc") == "default"


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("42", 42), (" 42\n", 42), ("-7", -7), ("-0", 0), ("007", 7), ("1,234", 1234),
    ("1,2,3", 123), ("12,3456", 123456), ("9223372036854775807", 2 ** 63 - 1),
    ("-9223372036854775808", -(2 ** 63)), ("9223372036854775808", None), ("-9223372036854775809", None),
    ("", None), ("-", None), ("+5", None), ("1,,000", None), (",100", None), ("100,", None),
    ("1 000", None), ("1.0", None), ("١٢", None), ("１２", None), ("12a", None), ("- 5", None),
    ("\u00a012", None), ("--5", None), ("$5", None),
])
def test_parse_int(text, value):
    got = ev(ParseInt(E), text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0.0), ("1.5", 1.5), ("-1.5", -1.5), ("0.1", 0.1), ("1,234.5678", 1234.5678), ("2.", None),
    (".5", None), ("1.23456", None), ("1.2.3", None), ("99999999999999.9999", 99999999999999.9999),
    ("100000000000000", None), ("-100000000000000", None), ("-99999999999999", -99999999999999.0),
    ("  3.25 ", 3.25), ("3,25", 325.0), ("1e5", None), ("nan", None), ("inf", None), ("$5", None),
    ("-0.0", 0.0), ("0.0001", 0.0001), ("1,000.", None),
])
def test_parse_float(text, value):
    got = ev(ParseFloat(E), text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("text", "value"), [
    ("$1,200.50", 1200.5), ("-$5", -5.0), ("$-5", None), ("5", 5.0), ("$0.99", 0.99), ("$", None),
    ("-$", None), ("$$5", None), (" $7 ", 7.0), ("-5.5", -5.5), ("5$", None), ("€5", None),
    ("$1,000,000", 1000000.0), ("$ 5", None),
])
def test_parse_money(text, value):
    got = ev(ParseMoney(E), text)
    assert got == value and type(got) is type(value)


_INT_ORACLE = re.compile(r"-?[0-9]+(?:,[0-9]+)*")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789,-. $\t", max_size=14))
def test_parse_int_and_float_against_an_independent_oracle(text):
    stripped = text.strip(" \t")
    if _INT_ORACLE.fullmatch(stripped):
        v = int(stripped.replace(",", ""))
        expected = v if -(2 ** 63) <= v < 2 ** 63 else None
    else:
        expected = None
    assert ev(ParseInt(E), text) == expected
    m = re.fullmatch(r"(-?)([0-9]+(?:,[0-9]+)*)(?:\.([0-9]{1,4}))?", stripped)
    if m:
        units = int(m[2].replace(",", "")) * 10_000 + int((m[3] or "").ljust(4, "0"))
        fexp = (-units if m[1] else units) / 10_000 if units < 10 ** 18 else None
    else:
        fexp = None
    assert ev(ParseFloat(E), text) == fexp


def test_float_answers_are_exact_decimals():
    got = ev(ParseFloat(E), "0.3")
    assert got == 0.3 and json.dumps(got) == "0.3"
    assert repr(ev(ParseMoney(E), "$1,234,567.0001")) == "1234567.0001"


def test_compare_numbers_text_and_bool():
    price = ParseMoney(Search(E, r"\$[\d,.]+"))
    assert ev(Compare("gt", price, 1000), "pay $1,200.50") is True
    assert ev(Compare("le", price, 1200.5), "pay $1,200.50") is True
    assert ev(Compare("lt", price, 1200.5), "pay $1,200.50") is False
    assert ev(Compare("eq", price, 1200), "pay $1,200.00") is True  # int constant widened
    assert ev(Compare("ne", price, 1200), "pay $1,200.01") is True
    n = ParseInt(E)
    assert [ev(Compare(op, n, 3), "3") for op in ("eq", "ne", "lt", "le", "gt", "ge")] == \
        [True, False, False, True, False, True]
    assert ev(Compare("eq", Lower(E), "refund"), "REFUND") is True
    assert ev(Compare("ne", Lower(E), "refund"), "REFUND") is False
    assert ev(Compare("eq", Contains(E, "a"), False), "bbb") is True


def test_boolean_connectives_and_decision_lists():
    p = If(((And((Contains(E, "a"), Not(Contains(E, "b")))), Const("a only")),
            (Or((Contains(E, "b"), Contains(E, "c"))), Const("b or c"))),
           Const("other"))
    assert [ev(p, t) for t in ("xa", "ab", "c", "zz")] == ["a only", "b or c", "b or c", "other"]


def test_deopt_only_when_reached():
    p = If(((Contains(E, "refund"), Const("refund")),), Deopt())
    assert run_program(p, {"email": "a refund"}) == {"answer": "refund", "deopt": False}
    assert run_program(p, {"email": "hello"}) == {"answer": None, "deopt": True}
    with pytest.raises(DeoptSignal):
        ev(p, "hello")
    rec = Record((("a", Const(1)), ("b", p)))
    assert run_program(rec, {"email": "hello"}) == {"answer": None, "deopt": True}
    assert run_program(rec, {"email": "refund"}) == {"answer": {"a": 1, "b": "refund"}, "deopt": False}
    # And / Or stop at the first deciding item, so a later Deopt is not reached.
    assert ev(And((Contains(E, "x"), Deopt())), "abc") is False
    assert ev(Or((Contains(E, "a"), Deopt())), "abc") is True
    assert run_program(And((Contains(E, "a"), Deopt())), {"email": "abc"})["deopt"] is True
    assert run_program(Lookup(E, (("k", Deopt()),), Const(0)), {"email": "j"}) == {"answer": 0, "deopt": False}


def test_run_program_answer_is_json_and_null_answer_is_not_a_deopt():
    p = Record((("n", ParseInt(E)), ("f", ParseFloat(E)), ("parts", Split(E, ",")), ("none", Const(None))))
    out = run_program(p, {"email": "1,5"})
    assert out == {"answer": {"n": 15, "f": 15.0, "parts": ["1", "5"], "none": None}, "deopt": False}
    assert canonical_json(out) == '{"answer":{"f":15.0,"n":15,"none":null,"parts":["1","5"]},"deopt":false}'
    assert run_program(Search(E, "z"), {"email": "a"}) == {"answer": None, "deopt": False}


def test_bad_input_is_a_usage_error():
    with pytest.raises(ArgumentError, match="email"):
        evaluate(Lower(E), {"body": "x"})
    with pytest.raises(ArgumentError, match="string"):
        evaluate(Lower(E), {"email": 5})
    with pytest.raises(ArgumentError, match="string"):
        run_program(Lower(E), {"email": None})
    with pytest.raises(ArgumentError, match="object"):
        evaluate(Lower(E), ["x"])
    # A constant program reads nothing, so any object is a valid input.
    assert evaluate(Const("x"), {}) == "x"


# ---------------------------------------------------------------------------------------------
# Type checker
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("program", "expected"), [
    (E, "text"), (Const(1), "int"), (Const(1.5), "float"), (Const(True), "bool"), (Const(None), "null"),
    (Deopt(), "null"), (Split(E, ","), "list"), (ParseMoney(E), "float"), (Contains(E, "x"), "bool"),
    (Record((("a", E),)), "record"), (If(((Contains(E, "a"), Const(None)),), Const(3)), "int"),
    (If(((Contains(E, "a"), Deopt()),), Const("x")), "text"),
    (If(((Contains(E, "a"), Const(None)),), Deopt()), "null"),
    (Lookup(E, (("a", Const(1.5)), ("b", Deopt())), Const(None)), "float"),
    (If(((Contains(E, "a"), Record((("k", Const(None)),))),), Record((("k", Const(2)),))), "record"),
    (Compare("lt", ParseFloat(E), 3), "bool"), (Compare("eq", Contains(E, "a"), True), "bool"),
    (IsNull(Split(E, ",")), "bool"), (Lower(Const(None)), "text"),
])
def test_check_infers_types(program, expected):
    assert check(program) == expected
    assert expected in TYPES


@pytest.mark.parametrize(("program", "needle"), [
    (Lower(ParseInt(E)), "Lower"),
    (Compare("lt", Lower(E), "a"), "Compare lt on text"),
    (Compare("gt", Contains(E, "a"), True), "Compare gt on bool"),
    (Compare("eq", ParseInt(E), "3"), "int operand with a text constant"),
    (Compare("lt", ParseInt(E), 2.5), "int operand with a float constant"),
    (Compare("eq", E, None), "IsNull"),
    (Compare("like", E, "a"), "op 'like'"),
    (Compare("eq", Split(E, ","), "a"), "list operand"),
    (Record((("a", E), ("a", E))), "duplicate key 'a'"),
    (If(((Contains(E, "a"), Const("x")),), Const(1)), "different types text and int"),
    (If(((Lower(E), Const("x")),), Const("y")), "an If condition"),
    (If(((Contains(E, "a"), Record((("k", E),))),), Record((("j", E),))), "different keys"),
    (Lookup(E, (("a", Const(1)), ("a", Const(2))), Const(0)), "duplicate key"),
    (Lookup(E, (("a", Const(1)),), Const("z")), "different types"),
    (Search(E, r"(a)\1"), "backreferences"),
    (Search(E, "(a*)*"), "empty string"),
    (Search(E, r"ORD-(\d+)", 2), "group 2"),
    (Search(E, "abc", -1), "group -1"),
    (Split(E, ""), "sep must not be empty"),
    (Record((("a", Field("email")), ("b", Field("subject")))), "more than one field"),
    (Const(1.23456), "4 decimals"),
    (Const(1e14), "1e14"),
    (Const(float("nan")), "finite"),
    (Const(2 ** 63), "outside i64"),
    (Const(b"x"), "unsupported type"),
    (And(()), "non-empty"),
    (Or((Contains(E, "a"), E)), "Or's item"),
    (Not(E), "Not's operand"),
    (Join(E, ","), "Join's operand"),
    (Index(E, 0), "Index's operand"),
    (Index(Split(E, ","), True), "must be an int"),
    (Slice(E, "1", None), "start must be an int"),
    (Contains(E, 5), "s must be a str"),
    (Field(""), "must not be empty"),
    ("email", "not a program node"),
])
def test_check_rejects_ill_typed_programs(program, needle):
    with pytest.raises(ProgramTypeError) as info:
        check(program)
    assert isinstance(info.value, CompileError)
    assert needle in str(info.value)
    assert str(info.value).startswith("program")


def test_check_error_names_the_path():
    bad = Record((("intent", If(((Contains(E, "a"), Lower(ParseInt(E))),), Const("x"))),))
    with pytest.raises(ProgramTypeError, match=r"program\.intent\.cases\[0\]\.then\.x: ParseInt is int"):
        check(bad)


def test_check_input_field_and_input_fields():
    p = Record((("a", Lower(E)), ("b", Contains(E, "x"))))
    assert check(p, input_field="email") == "record"
    with pytest.raises(ProgramTypeError, match="'subject'"):
        check(p, input_field="subject")
    assert input_fields(p) == {"email"}
    assert input_fields(Const(1)) == set()
    assert input_fields(Record((("a", Field("x")), ("b", Lookup(Field("y"), (("k", Field("z")),), Deopt()))))) == {"x", "y", "z"}


# ---------------------------------------------------------------------------------------------
# Generated well-typed programs: evaluation agrees with the checked type; the JSON form
# round-trips (one generation pass serves both checks: generating programs is the slow part).
# ---------------------------------------------------------------------------------------------

_TEXTS = st.text(alphabet="aB1 ,-$.é€😀\n", max_size=6)
_PATTERNS = [(r"\d+", 0), (r"(\w)(\w)?", 2), (r"(?i)a(.)", 1), ("é|€", 0), (r"^\s*(-?\$?[\d,]+)", 1)]


def _programs():
    text = st.deferred(lambda: st.one_of(
        st.just(E), _TEXTS.map(Const), st.just(Const(None)),
        st.builds(Lower, text), st.builds(Upper, text), st.builds(Strip, text),
        st.builds(Slice, text, st.none() | st.integers(-4, 4), st.none() | st.integers(-4, 4)),
        st.builds(lambda x, pg: Search(x, pg[0], pg[1]), text, st.sampled_from(_PATTERNS)),
        st.builds(Join, lst, st.sampled_from(["", ",", "--"])),
        st.builds(Index, lst, st.integers(-3, 3)),
        st.builds(lambda c, a, b: If(((c, a),), b), boolean, text, text),
        st.builds(lambda x, a, d: Lookup(x, (("a", a), ("B1", Const(None))), d), text, text, text),
    ))
    lst = st.builds(Split, text, st.sampled_from([",", " ", "a"]))
    integer = st.one_of(st.builds(ParseInt, text), st.integers(-10, 10).map(Const))
    number = st.one_of(st.builds(ParseFloat, text), st.builds(ParseMoney, text),
                       st.sampled_from([0.5, -2.25, 10.0]).map(Const))
    boolean = st.deferred(lambda: st.one_of(
        st.builds(Contains, text, st.sampled_from(["a", "", "é"])),
        st.builds(StartsWith, text, st.sampled_from(["a", "B"])),
        st.builds(EndsWith, text, st.sampled_from(["1", "😀"])),
        st.builds(IsNull, text),
        st.builds(Compare, st.sampled_from(["eq", "ne"]), text, st.sampled_from(["a", "", "1"])),
        st.builds(Compare, st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), integer, st.integers(-3, 3)),
        st.builds(Compare, st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), number,
                  st.sampled_from([0, 1, -1.5, 2.25])),
        st.builds(lambda xs: And(tuple(xs)), st.lists(boolean, min_size=1, max_size=3)),
        st.builds(lambda xs: Or(tuple(xs)), st.lists(boolean, min_size=1, max_size=3)),
        st.builds(Not, boolean),
    ))
    record = st.builds(lambda a, b, c: Record((("t", a), ("n", b), ("ok", c))), text, number, boolean)
    return st.one_of(text, lst, integer, number, boolean, record,
                     st.builds(lambda c, a: If(((c, a),), Deopt()), boolean, text))


_PY_TYPES = {"text": str, "int": int, "float": float, "bool": bool, "list": list, "record": dict}


@settings(max_examples=150, deadline=None)
@given(program=_programs(), texts=st.lists(_TEXTS, min_size=1, max_size=3))
def test_generated_programs_evaluate_to_their_checked_type_and_round_trip(program, texts):
    t = check(program, input_field="email")
    for text in texts:
        out = run_program(program, {"email": text})
        assert set(out) == {"answer", "deopt"}
        answer = out["answer"]
        if out["deopt"] or answer is None:
            assert answer is None
            assert t != "bool" or out["deopt"]
            continue
        assert t != "null"
        assert type(answer) is _PY_TYPES[t]
        if t == "list":
            assert all(isinstance(s, str) for s in answer)
        canonical_json(out)  # always valid canonical JSON
    _check_round_trip(program)


def _check_round_trip(program):
    obj = to_json(program)
    text = canonical_json(obj)
    back = from_json(json.loads(text))
    assert back == program
    assert program_digest(back) == program_digest(program)
    assert canonical_json(to_json(back)) == text


def test_json_form_is_explicit_and_versioned():
    p = Search(E, r"ORD-(\d+)", 1)
    assert to_json(p) == {"format": "auto.program/1", "program": {
        "op": "search", "x": {"op": "field", "name": "email"}, "pattern": r"ORD-(\d+)", "group": 1}}
    assert to_json(Const(1))["program"] == {"op": "const", "type": "int", "value": 1}
    assert to_json(Const(1.0))["program"] == {"op": "const", "type": "float", "value": 1.0}
    assert program_digest(Const(1)) != program_digest(Const(1.0))
    assert program_digest(Const(True)) != program_digest(Const(1))
    assert program_digest(p).startswith("sha256:") and len(program_digest(p)) == 71
    assert from_json({"format": "auto.program/1", "program": {"op": "const", "type": "float", "value": 2}}) == Const(2.0)


@pytest.mark.parametrize(("obj", "needle"), [
    ([], "format"),
    ({"format": "auto.program/2", "program": {"op": "deopt"}}, "auto.program/2"),
    ({"format": "auto.program/1", "program": {"op": "nope"}}, "unknown op"),
    ({"format": "auto.program/1", "program": {"op": "lower"}}, "missing keys ['x']"),
    ({"format": "auto.program/1", "program": {"op": "deopt", "x": 1}}, "unexpected keys ['x']"),
    ({"format": "auto.program/1", "program": {"op": "const", "type": "int", "value": True}}, "not a int"),
    ({"format": "auto.program/1", "program": {"op": "const", "type": "date", "value": "x"}}, "scalar type"),
    ({"format": "auto.program/1", "program": {"op": "index", "xs": {"op": "deopt"}, "i": 1.0}}, "integer"),
    ({"format": "auto.program/1", "program": {"op": "compare", "cmp": "lt!", "x": {"op": "deopt"},
                                              "type": "int", "value": 1}}, "not one of"),
    ({"format": "auto.program/1", "program": {"op": "and", "items": {"op": "deopt"}}}, "list of nodes"),
    ({"format": "auto.program/1", "program": {"op": "record", "fields": [["a"]]}}, "pair"),
    ({"format": "auto.program/1", "program": {"op": "record", "fields": [[1, {"op": "deopt"}]]}}, "key"),
    ({"format": "auto.program/1", "program": "deopt"}, "must be an object"),
])
def test_from_json_rejects_malformed_input(obj, needle):
    with pytest.raises(SerialError) as info:
        from_json(obj)
    assert isinstance(info.value, CompileError)
    assert needle in str(info.value)


def test_from_json_rejects_absurd_nesting():
    node: dict = {"op": "deopt"}
    for _ in range(5000):
        node = {"op": "lower", "x": node}
    with pytest.raises(SerialError, match="deep"):
        from_json({"format": "auto.program/1", "program": node})


# ---------------------------------------------------------------------------------------------
# Pretty form and size
# ---------------------------------------------------------------------------------------------

EXAMPLE = Record((
    ("intent", If(((Contains(Lower(E), "refund"), Const("refund")),
                   (Contains(Lower(E), "invoice"), Const("billing"))), Deopt())),
    ("order_id", Search(E, r"ORD-(\d+)", 1)),
    ("amount", Compare("ge", ParseMoney(Search(E, r"\$[\d,.]+")), 100)),
    ("tier", Lookup(Strip(Lower(Slice(E, 0, 4))), (("gold", Const(1)), ("vip", Const(2))), Const(None))),
))


def test_render_example():
    assert render(EXAMPLE) == "\n".join([
        "record {",
        '  intent: if contains(lower(email), "refund") -> "refund"',
        '          elif contains(lower(email), "invoice") -> "billing"',
        "          else -> deopt",
        r"  order_id: search(email, /ORD-(\d+)/, 1)",
        r"  amount: parse_money(search(email, /\$[\d,.]+/)) >= 100",
        "  tier: lookup(strip(lower(email[0:4]))) {",
        '          "gold" -> 1',
        '          "vip" -> 2',
        "          else -> null",
        "        }",
        "}",
    ])


def test_render_small_forms():
    assert render(And((Contains(E, "a"), Not(IsNull(Search(E, "a/b")))))) == \
        '(contains(email, "a") and not(is_null(search(email, /a\\/b/))))'
    assert render(Index(Split(Field("the body"), ","), -1)) == 'split(input["the body"], ",")[-1]'
    assert render(Compare("lt", ParseFloat(E), 2.5)) == "parse_float(email) < 2.5"
    assert render(Slice(E, None, -2)) == "email[:-2]"
    assert render(If((), Const("x"))) == '"x"'


def test_size_counts_nodes():
    assert size(E) == 1
    assert size(Lower(E)) == 2
    assert size(Record((("a", E), ("b", Const(1))))) == 3
    assert size(If(((Contains(E, "a"), Const("x")),), Deopt())) == 5
    assert size(EXAMPLE) == 1 + (1 + 3 + 1 + 3 + 1 + 1) + 2 + 4 + (1 + 4 + 3)
    with pytest.raises(ArgumentError):
        size(Lower(object()))


def test_evaluate_refuses_ill_typed_programs_before_running():
    with pytest.raises(ProgramTypeError, match="Lower"):
        evaluate(Lower(ParseInt(E)), {"email": "5"})
    with pytest.raises(ProgramTypeError, match="more than one field"):
        run_program(Record((("a", E), ("b", Field("x")))), {"email": "a", "x": "b"})
    with pytest.raises(ProgramTypeError):
        evaluate(Const([1, 2]), {})  # unhashable constant: checked without the cache
