"""The safe regex subset, compiled to a Pike-VM program over UTF-8 bytes, and a Python Pike VM.

The program format below is shared with the WebAssembly backend, which runs the same VM; the
Python VM here is the reference the backend is tested against.

Subset (anything else raises :class:`RegexError`):

- literal characters (any Unicode; a non-ASCII literal becomes its UTF-8 byte sequence);
- escapes ``\\d \\D \\w \\W \\s \\S \\b \\B \\n \\t \\r \\f \\v`` and a backslash before any other
  character that is not an ASCII letter or digit (``\\.``, ``\\\\``, ``\\-``, ``\\(``, ``\\/``, ``\\ ``,
  ... stand for that character, as Python's ``re.escape`` writes them);
- ``.`` (any code point except ``\\n``);
- classes ``[...]`` / ``[^...]`` whose members are ASCII characters, ASCII ranges ``a-z`` and
  ``\\d \\w \\s``; a negated class matches every code point not in the set, including every
  non-ASCII code point;
- groups ``( )`` (capturing, at most 9) and ``(?: )`` (non-capturing); alternation ``|``;
- greedy quantifiers ``* + ?`` ``{m}`` ``{m,}`` ``{m,n}`` (``m <= n <= 32``), applied to a
  sub-pattern that cannot match the empty string;
- anchors ``^`` (start of text) and ``$`` (end of text only, *not* before a final newline: this
  is Python's ``\\Z``), word boundaries ``\\b`` / ``\\B`` (``\\B`` is exactly "not ``\\b``", so it
  matches the empty text, as in Python 3.14; Python 3.13 and older never match ``\\B`` there);
- a leading ``(?i)``: ASCII-only case-insensitive matching.

Character classes follow Python's ``re.ASCII``: ``\\d`` = ``[0-9]``, ``\\w`` = ``[A-Za-z0-9_]``,
``\\s`` = ``[ \\t\\n\\r\\f\\v]``; bytes >= 0x80 are never word characters.

Program (:class:`RegexProgram`): instructions ``(op, a, b)``:

====  ========  ==========================================================================
op    name      meaning
====  ========  ==========================================================================
0     BYTE      consume one byte that is in ``sets[a]``, continue at pc + 1
1     SPLIT     continue at ``a`` (higher priority) and at ``b``
2     JMP       continue at ``a``
3     SAVE      record the current byte offset in capture slot ``a``
4     ASSERT    ``a``: 0 start of text, 1 end of text, 2 word boundary, 3 not word boundary
5     MATCH     a match (its slots are the answer)
====  ========  ==========================================================================

Each set is a 32-byte bitmap: byte value ``v`` is allowed iff bit ``v & 7`` of byte ``v >> 3``
is set. The program starts with ``SAVE 0`` and ends with ``SAVE 1; MATCH``; slots ``2k`` and
``2k + 1`` hold the start and end byte offsets of group ``k`` (group 0 is the whole match).
A code point that is not a single byte (``.``, a negated class, ``\\D``, ``\\W``, ``\\S``) compiles
to byte-level alternatives ``[ASCII part] | [\\xc2-\\xdf][\\x80-\\xbf] |
[\\xe0-\\xef][\\x80-\\xbf]{2} | [\\xf0-\\xf4][\\x80-\\xbf]{3}``; the input is valid UTF-8, so no
validation is done. Unanchored search is the VM's job (:func:`pike_search`), not a prefix of
the program.

The Pike VM is Thompson's NFA simulation with per-thread captures (R. Cox, "Regular Expression
Matching: the Virtual Machine Approach", 2009): threads are kept in priority order and each pc
is added at most once per input position, which gives the leftmost-first (backtracking) result
in time O(len(data) * len(insts)).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from auto.errors import CompileError, ArgumentError

BYTE, SPLIT, JMP, SAVE, ASSERT, MATCH = range(6)
"""Opcodes of :class:`RegexProgram` instructions."""

ASSERT_START, ASSERT_END, ASSERT_WORD, ASSERT_NOT_WORD = range(4)
"""Kinds of the ASSERT instruction."""

MAX_GROUPS = 9
MAX_REPEAT = 32
MAX_INSTS = 4096

_DIGIT = frozenset(range(0x30, 0x3A))
_WORD = frozenset(list(range(0x30, 0x3A)) + list(range(0x41, 0x5B)) + list(range(0x61, 0x7B)) + [0x5F])
_SPACE = frozenset(b" \t\n\r\f\v")
_ASCII = frozenset(range(0x80))
_WORD_BYTES = bytes(1 if b in _WORD else 0 for b in range(256))

# UTF-8 lead/continuation byte ranges of multi-byte code points (RFC 3629, section 4).
_CONT = frozenset(range(0x80, 0xC0))
_MULTIBYTE = (
    (frozenset(range(0xC2, 0xE0)), _CONT),
    (frozenset(range(0xE0, 0xF0)), _CONT, _CONT),
    (frozenset(range(0xF0, 0xF5)), _CONT, _CONT, _CONT),
)


class RegexError(CompileError):
    """A pattern outside the safe regex subset, or one whose program would be too large."""


def _show(pattern: str) -> str:
    """The pattern's repr for messages, cut to about 80 characters."""
    r = repr(pattern)
    return r if len(r) <= 80 else r[:76] + "...'"


@dataclass(frozen=True)
class RegexProgram:
    """A compiled pattern (see the module docstring for the instruction set).

    Attributes:
        insts: instructions ``(op, a, b)``; unused operands are 0.
        sets: byte sets, each a 32-byte bitmap (bit ``v & 7`` of byte ``v >> 3``).
        ngroups: number of capture groups, not counting group 0 (0..9).
        nslots: ``2 * (ngroups + 1)``, the length of the slot array :func:`pike_search` returns.
        pattern: the source pattern.
    """

    insts: tuple[tuple[int, int, int], ...]
    sets: tuple[bytes, ...]
    ngroups: int
    nslots: int
    pattern: str


# ----------------------------------------------------------------------------------------------
# Parser: pattern text -> regex tree.
#
# Tree nodes are tuples:
#   ("cp", ascii_set: frozenset[int], non_ascii: bool)   one code point (class, '.', escapes)
#   ("seq", bytes)                                        a non-ASCII literal code point
#   ("cat", [nodes]) / ("alt", [nodes])
#   ("group", index | None, node)
#   ("rep", node, min, max | None)
#   ("assert", kind)
# ----------------------------------------------------------------------------------------------

_SPECIAL_OUTSIDE = set("()[]{}|*+?.^$\\")


def _swapcase_closure(chars: frozenset[int]) -> frozenset[int]:
    out = set(chars)
    for c in chars:
        if 0x41 <= c <= 0x5A:
            out.add(c + 32)
        elif 0x61 <= c <= 0x7A:
            out.add(c - 32)
    return frozenset(out)


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.icase = False
        self.ngroups = 0

    def error(self, msg: str, at: int | None = None) -> RegexError:
        pos = self.i if at is None else at
        return RegexError(f"regex {_show(self.p)}: {msg} at position {pos}")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self):
        if self.p.startswith("(?i)"):
            self.icase = True
            self.i = 4
        node = self.parse_alt()
        if self.i < len(self.p):
            # Only an unbalanced ')' stops parse_alt early.
            raise self.error("unbalanced ')'")
        return node

    def parse_alt(self):
        branches = [self.parse_cat()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.parse_cat())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def parse_cat(self):
        items = []
        while True:
            c = self.peek()
            if c is None or c in "|)":
                break
            items.append(self.parse_repeat())
        return items[0] if len(items) == 1 else ("cat", items)

    def parse_repeat(self):
        start = self.i
        atom = self.parse_atom()
        q = self.parse_quantifier()
        if q is None:
            return atom
        lo, hi = q
        if atom[0] == "assert":
            raise self.error("nothing to repeat (an anchor cannot be quantified)", start)
        if _nullable(atom):
            raise self.error("a quantified sub-pattern must not match the empty string", start)
        nxt = self.peek()
        if nxt == "?":
            raise self.error("lazy quantifiers are not supported")
        if nxt == "+":
            raise self.error("possessive quantifiers are not supported")
        if nxt in ("*",) or (nxt == "{" and self._brace_quantifier_at(self.i) is not None):
            raise self.error("multiple repeat")
        return ("rep", atom, lo, hi)

    def _brace_quantifier_at(self, i: int):
        """Parse ``{m}``, ``{m,}`` or ``{m,n}`` at ``i``; returns (lo, hi, end) or None."""
        p = self.p
        if i >= len(p) or p[i] != "{":
            return None
        j = i + 1
        k = j
        while k < len(p) and "0" <= p[k] <= "9":
            k += 1
        if k == j:
            return None
        lo = int(p[j:k])
        if k < len(p) and p[k] == "}":
            return lo, lo, k + 1
        if k >= len(p) or p[k] != ",":
            return None
        k += 1
        m = k
        while m < len(p) and "0" <= p[m] <= "9":
            m += 1
        if m >= len(p) or p[m] != "}":
            return None
        hi = int(p[k:m]) if m > k else None
        return lo, hi, m + 1

    def parse_quantifier(self):
        c = self.peek()
        if c == "*":
            self.i += 1
            return 0, None
        if c == "+":
            self.i += 1
            return 1, None
        if c == "?":
            self.i += 1
            return 0, 1
        if c == "{":
            q = self._brace_quantifier_at(self.i)
            if q is None:
                raise self.error("'{' must start a quantifier {m}, {m,} or {m,n} (write \\{ for the character)")
            lo, hi, end = q
            if lo > MAX_REPEAT or (hi is not None and hi > MAX_REPEAT):
                raise self.error(f"repeat counts above {MAX_REPEAT} are not supported")
            if hi is not None and hi < lo:
                raise self.error("repeat range {m,n} with n < m")
            self.i = end
            return lo, hi
        return None

    def parse_atom(self):
        c = self.peek()
        start = self.i
        if c in ("*", "+", "?"):
            raise self.error("nothing to repeat")
        if c == "{":
            if self._brace_quantifier_at(self.i) is not None:
                raise self.error("nothing to repeat")
            raise self.error("'{' must start a quantifier (write \\{ for the character)")
        if c == "(":
            return self.parse_group()
        if c == "[":
            return self.parse_class()
        if c == ".":
            self.i += 1
            return ("cp", _ASCII - {0x0A}, True)
        if c == "^":
            self.i += 1
            return ("assert", ASSERT_START)
        if c == "$":
            self.i += 1
            return ("assert", ASSERT_END)
        if c == "\\":
            return self.parse_escape()
        self.i += 1
        return self.literal(c, start)

    def literal(self, ch: str, at: int):
        o = ord(ch)
        if o < 0x80:
            s = frozenset([o])
            return ("cp", _swapcase_closure(s) if self.icase else s, False)
        try:
            return ("seq", ch.encode("utf-8"))
        except UnicodeEncodeError:
            raise self.error("the pattern holds a lone surrogate", at) from None

    def parse_escape(self):
        start = self.i
        self.i += 1
        c = self.peek()
        if c is None:
            raise self.error("trailing backslash", start)
        self.i += 1
        cls = {"d": (_DIGIT, False), "D": (_ASCII - _DIGIT, True), "w": (_WORD, False),
               "W": (_ASCII - _WORD, True), "s": (_SPACE, False), "S": (_ASCII - _SPACE, True)}
        if c in cls:
            chars, non_ascii = cls[c]
            return ("cp", frozenset(chars), non_ascii)
        if c == "b":
            return ("assert", ASSERT_WORD)
        if c == "B":
            return ("assert", ASSERT_NOT_WORD)
        ctrl = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}
        if c in ctrl:
            return self.literal(ctrl[c], start)
        if c.isascii() and c.isalnum():
            if c.isdigit():
                raise self.error("backreferences are not supported", start)
            raise self.error(f"unsupported escape \\{c}", start)
        return self.literal(c, start)

    def parse_group(self):
        start = self.i
        self.i += 1
        if self.p.startswith("?:", self.i):
            self.i += 2
            index = None
        elif self.peek() == "?":
            rest = self.p[self.i:self.i + 3]
            if rest.startswith(("?=", "?!", "?<=", "?<!")):
                raise self.error("lookaround is not supported", start)
            if rest.startswith(("?P", "?<")):
                raise self.error("named groups are not supported", start)
            if rest.startswith("?>"):
                raise self.error("atomic groups are not supported", start)
            raise self.error("inline flags and other (?...) groups are not supported "
                             "(only a leading (?i))", start)
        else:
            self.ngroups += 1
            if self.ngroups > MAX_GROUPS:
                raise self.error(f"more than {MAX_GROUPS} capture groups", start)
            index = self.ngroups
        body = self.parse_alt()
        if self.peek() != ")":
            raise self.error("missing ')'", start)
        self.i += 1
        return ("group", index, body)

    def parse_class(self):
        start = self.i
        self.i += 1
        negated = False
        if self.peek() == "^":
            negated = True
            self.i += 1
        chars: set[int] = set()
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("unterminated character class", start)
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo = self.class_member()
            if isinstance(lo, frozenset):
                chars |= lo
                if self.peek() == "-" and self.p[self.i + 1:self.i + 2] not in ("]", ""):
                    raise self.error("a class escape cannot start a range")
                continue
            if self.peek() == "-" and self.p[self.i + 1:self.i + 2] not in ("]", ""):
                self.i += 1
                hi = self.class_member()
                if isinstance(hi, frozenset):
                    raise self.error("a class escape cannot end a range")
                if hi < lo:
                    raise self.error("bad character range (end before start)")
                chars.update(range(lo, hi + 1))
            else:
                chars.add(lo)
        s = frozenset(chars)
        if self.icase:
            s = _swapcase_closure(s)
        if negated:
            return ("cp", _ASCII - s, True)
        return ("cp", s, False)

    def class_member(self) -> int | frozenset[int]:
        """One class member: a code point (int, ASCII) or a set for ``\\d \\w \\s``."""
        at = self.i
        c = self.p[self.i]
        if c == "\\":
            self.i += 1
            e = self.peek()
            if e is None:
                raise self.error("trailing backslash", at)
            self.i += 1
            if e in "dws":
                return frozenset({"d": _DIGIT, "w": _WORD, "s": _SPACE}[e])
            ctrl = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B}
            if e in ctrl:
                return ctrl[e]
            if e.isascii() and e.isalnum():
                raise self.error(f"unsupported escape \\{e} in a character class", at)
            if not e.isascii():
                raise self.error("character class members must be ASCII", at)
            return ord(e)
        if c == "[":
            raise self.error("'[' inside a character class must be escaped", at)
        if c in "&~|-" and self.p[self.i + 1:self.i + 2] == c:
            raise self.error(f"'{c}{c}' inside a character class must be escaped", at)
        if not c.isascii():
            raise self.error("character class members must be ASCII", at)
        self.i += 1
        return ord(c)


def _nullable(node) -> bool:
    """True when ``node`` can match the empty string."""
    kind = node[0]
    if kind in ("cp", "seq"):
        return False
    if kind == "assert":
        return True
    if kind == "cat":
        return all(_nullable(n) for n in node[1])
    if kind == "alt":
        return any(_nullable(n) for n in node[1])
    if kind == "group":
        return _nullable(node[2])
    if kind == "rep":
        return node[2] == 0 or _nullable(node[1])
    raise AssertionError(kind)


# ----------------------------------------------------------------------------------------------
# Code generation: regex tree -> instructions.
# ----------------------------------------------------------------------------------------------


class _Emitter:
    def __init__(self, pattern: str):
        self.pattern = pattern
        self.insts: list[list[int]] = []
        self.sets: list[bytes] = []
        self.set_index: dict[bytes, int] = {}

    def emit(self, op: int, a: int = 0, b: int = 0) -> int:
        if len(self.insts) >= MAX_INSTS:
            raise RegexError(f"regex {_show(self.pattern)}: the program exceeds {MAX_INSTS} instructions")
        self.insts.append([op, a, b])
        return len(self.insts) - 1

    def byteset(self, values) -> int:
        bm = bytearray(32)
        for v in values:
            bm[v >> 3] |= 1 << (v & 7)
        key = bytes(bm)
        idx = self.set_index.get(key)
        if idx is None:
            idx = len(self.sets)
            self.sets.append(key)
            self.set_index[key] = idx
        return idx

    def alternatives(self, branches) -> None:
        """Emit ``b1 | b2 | ...`` where each branch is a callable emitting its code."""
        jumps = []
        for k, branch in enumerate(branches):
            if k < len(branches) - 1:
                split = self.emit(SPLIT)
                self.insts[split][1] = len(self.insts)
                branch()
                jumps.append(self.emit(JMP))
                self.insts[split][2] = len(self.insts)
            else:
                branch()
        for j in jumps:
            self.insts[j][1] = len(self.insts)

    def gen(self, node) -> None:
        kind = node[0]
        if kind == "cp":
            _, ascii_set, non_ascii = node
            branches = []
            if ascii_set:
                branches.append(lambda s=ascii_set: self.emit(BYTE, self.byteset(s)))
            if non_ascii:
                for seq in _MULTIBYTE:
                    branches.append(lambda seq=seq: [self.emit(BYTE, self.byteset(s)) for s in seq])
            if not branches:  # unreachable (every class has a member); an empty set never matches
                branches.append(lambda: self.emit(BYTE, self.byteset(())))
            self.alternatives(branches)
        elif kind == "seq":
            for b in node[1]:
                self.emit(BYTE, self.byteset((b,)))
        elif kind == "cat":
            for n in node[1]:
                self.gen(n)
        elif kind == "alt":
            self.alternatives([lambda n=n: self.gen(n) for n in node[1]])
        elif kind == "group":
            _, index, body = node
            if index is None:
                self.gen(body)
            else:
                self.emit(SAVE, 2 * index)
                self.gen(body)
                self.emit(SAVE, 2 * index + 1)
        elif kind == "assert":
            self.emit(ASSERT, node[1])
        elif kind == "rep":
            _, body, lo, hi = node
            for _ in range(lo):
                self.gen(body)
            if hi is None:
                # body*: L: SPLIT L+1, end; body; JMP L
                loop = self.emit(SPLIT)
                self.insts[loop][1] = len(self.insts)
                self.gen(body)
                self.emit(JMP, loop)
                self.insts[loop][2] = len(self.insts)
            else:
                # (body(body(...)?)?)? nested greedy optionals
                splits = []
                for _ in range(hi - lo):
                    s = self.emit(SPLIT)
                    self.insts[s][1] = len(self.insts)
                    splits.append(s)
                    self.gen(body)
                end = len(self.insts)
                for s in splits:
                    self.insts[s][2] = end
        else:
            raise AssertionError(kind)


def compile_regex(pattern: str) -> RegexProgram:
    """Compile a pattern of the safe subset into a :class:`RegexProgram`.

    Args:
        pattern: the pattern text (see the module docstring for the subset).

    Returns:
        the program; ``len(insts) <= 4096``, ``ngroups <= 9``.

    Raises:
        RegexError: (a :class:`~auto.errors.CompileError`) the pattern is outside the subset
            (backreferences, lookaround, named groups, lazy/possessive quantifiers, a quantified
            sub-pattern that can match the empty string, repeat counts above 32, more than 9
            groups, non-ASCII class members, ...) or compiles to more than 4096 instructions.
    """
    if not isinstance(pattern, str):
        raise RegexError(f"a regex pattern must be a str, not {type(pattern).__name__}")
    return _compile(pattern)


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> RegexProgram:
    parser = _Parser(pattern)
    try:
        tree = parser.parse()
    except RecursionError:
        raise RegexError(f"regex {_show(pattern)}: groups are nested too deeply") from None
    em = _Emitter(pattern)
    em.emit(SAVE, 0)
    em.gen(tree)
    em.emit(SAVE, 1)
    em.emit(MATCH)
    return RegexProgram(
        insts=tuple(tuple(i) for i in em.insts),
        sets=tuple(em.sets),
        ngroups=parser.ngroups,
        nslots=2 * (parser.ngroups + 1),
        pattern=pattern,
    )


# ----------------------------------------------------------------------------------------------
# The Pike VM.
# ----------------------------------------------------------------------------------------------


def _first_bytes(prog: RegexProgram) -> bytes | None:
    """A 256-byte table (1 = may start a match) or None when a match may consume nothing.

    Over-approximates: assertions are treated as passing. Used only to skip start positions at
    which no thread could survive its first byte, so it never changes the result.
    """
    seen = set()
    stack = [0]
    allowed = bytearray(256)
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        op, a, b = prog.insts[pc]
        if op == BYTE:
            bm = prog.sets[a]
            for v in range(256):
                if bm[v >> 3] >> (v & 7) & 1:
                    allowed[v] = 1
        elif op == SPLIT:
            stack.extend((a, b))
        elif op == JMP:
            stack.append(a)
        elif op in (SAVE, ASSERT):
            stack.append(pc + 1)
        elif op == MATCH:
            return None
    return bytes(allowed)


@lru_cache(maxsize=1024)
def _prepared(prog: RegexProgram):
    """Per-program tables: set membership as 256-entry bytes, and the first-byte filter."""
    members = tuple(bytes(bm[v >> 3] >> (v & 7) & 1 for v in range(256)) for bm in prog.sets)
    first = _first_bytes(prog)
    return members, first


def _check_search_args(prog: RegexProgram, data: bytes, start: int) -> None:
    """Raise :class:`ArgumentError` unless ``pike_search``'s arguments have their stated types
    and ``0 <= start <= len(data)``."""
    if not isinstance(data, (bytes, bytearray)):
        raise ArgumentError(f"pike_search: data must be bytes, not {type(data).__name__}")
    if not isinstance(prog, RegexProgram):
        raise ArgumentError(f"pike_search: prog must be a RegexProgram, not {type(prog).__name__}")
    n = len(data)
    if not 0 <= start <= n:
        raise ArgumentError(f"pike_search: start {start} outside 0..{n}")


def _thread_adder(insts: tuple, data: bytes):
    """The thread-list adder of one search of ``data``: ``add(lst, pc0, caps, pos)`` follows the
    epsilon closure of ``pc0`` at byte offset ``pos`` in priority order and appends the BYTE and
    MATCH threads it reaches to ``lst``, each pc at most once per position."""
    n = len(data)
    mark = [-1] * len(insts)  # mark[pc] == pos: pc already added to the list for position pos
    word = _WORD_BYTES

    def add(lst: list, pc0: int, caps: tuple, pos: int) -> None:
        stack = [(pc0, caps)]
        while stack:
            pc, caps = stack.pop()
            if mark[pc] == pos:
                continue
            mark[pc] = pos
            op, a, b = insts[pc]
            if op == JMP:
                stack.append((a, caps))
            elif op == SPLIT:
                stack.append((b, caps))
                stack.append((a, caps))
            elif op == SAVE:
                if a < len(caps):
                    caps = caps[:a] + (pos,) + caps[a + 1:]
                stack.append((pc + 1, caps))
            elif op == ASSERT:
                if a == ASSERT_START:
                    ok = pos == 0
                elif a == ASSERT_END:
                    ok = pos == n
                else:
                    before = pos > 0 and word[data[pos - 1]] == 1
                    after = pos < n and word[data[pos]] == 1
                    ok = (before != after) == (a == ASSERT_WORD)
                if ok:
                    stack.append((pc + 1, caps))
            else:  # BYTE or MATCH
                lst.append((pc, caps))

    return add


def pike_search(prog: RegexProgram, data: bytes, start: int = 0) -> tuple[int, ...] | None:
    """Leftmost-first search of ``prog`` in ``data`` from byte offset ``start``.

    The result equals Python's ``re.compile(pattern, re.ASCII).search(text, pos)`` on the
    subset, with ``$`` read as ``\\Z``, offsets in bytes of the UTF-8 encoding. ``^`` matches only
    at offset 0 (not at ``start``), and ``\\b`` at ``start`` looks at the byte before it, as in
    Python. New threads start only at code-point boundaries (bytes that are not ``0b10xxxxxx``).

    Args:
        prog: a compiled program (:func:`compile_regex`).
        data: UTF-8 bytes (validity is assumed, not checked).
        start: byte offset where the search begins, ``0 <= start <= len(data)``, at a
            code-point boundary.

    Returns:
        the slot array of the first match (length ``prog.nslots``; ``slots[2k]``/``slots[2k+1]``
        = start/end byte offsets of group ``k``, -1 when the group did not participate), or
        None when there is no match.

    Raises:
        ArgumentError: ``start`` is outside ``0..len(data)``, ``data`` is not bytes or ``prog`` is
            not a :class:`RegexProgram`.

    Time O(len(data) * len(prog.insts)); memory O(len(prog.insts) * prog.nslots).
    """
    _check_search_args(prog, data, start)
    n = len(data)
    members, first = _prepared(prog)
    insts = prog.insts
    add = _thread_adder(insts, data)
    empty = (-1,) * prog.nslots
    matched: tuple[int, ...] | None = None
    clist: list = []
    pos = start
    flags = data.translate(first) if first is not None else None
    while True:
        if matched is None:
            if not clist and flags is not None:
                # No live thread: jump to the next byte that can start a match.
                nxt = flags.find(1, pos)
                if nxt < 0:
                    return None
                pos = nxt
            if pos == n or (data[pos] & 0xC0) != 0x80:
                add(clist, 0, empty, pos)
        if not clist:
            if matched is not None or pos >= n:
                break
            pos += 1
            continue
        nlist: list = []
        byte = data[pos] if pos < n else -1
        for pc, caps in clist:
            op, a, _ = insts[pc]
            if op == BYTE:
                if byte >= 0 and members[a][byte]:
                    add(nlist, pc + 1, caps, pos + 1)
            else:  # MATCH: lower-priority threads are cut
                matched = caps
                break
        if pos >= n:
            break
        clist = nlist
        pos += 1
    return matched
