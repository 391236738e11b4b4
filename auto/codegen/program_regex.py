"""A program's regexes as static data: the Pike-VM program of each pattern and its first-byte table.

Each pattern is compiled by :func:`auto.models.program.regex.compile_regex` to a Pike-VM program (the
contract: ops 0 BYTE set, 1 SPLIT x y, 2 JMP x, 3 SAVE slot, 4 ASSERT kind, 5 MATCH;
:mod:`auto.models.program.regex` defines them), checked,
and stored as 12-byte instructions ``(op, a, b)`` (i32 little-endian; a BYTE's ``a`` is the
absolute address of its 32-byte bitmap, placed 4-aligned). The program runtime's one shared
``$search`` (``program_runtime.wat``) runs them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from auto.errors import CodegenError
from auto.models.program.regex import (ASSERT, ASSERT_END, ASSERT_NOT_WORD, ASSERT_START, ASSERT_WORD, BYTE,
                                JMP, MATCH, SAVE, SPLIT, compile_regex)

from .static import StaticData

ASSERTIONS = (ASSERT_START, ASSERT_END, ASSERT_WORD, ASSERT_NOT_WORD)


@dataclass(frozen=True)
class RegexTables:
    """Where a pattern's program lies and what ``$search`` needs to run it.

    Attributes:
        address: the first instruction's address.
        instructions: how many 12-byte instructions.
        slots: capture slots (two per group, group 0 included).
        groups: capture groups (group 0 excluded).
        first: address of the 256-byte first-byte table, or 0 when a match may consume nothing.
    """

    address: int
    instructions: int
    slots: int
    groups: int
    first: int


def first_bytes(insts, sets) -> bytes | None:
    """A 256-byte table (1 = the byte may start a match) for a regex program, or None when a
    match may consume nothing (MATCH is reachable through SPLIT / JMP / SAVE / ASSERT alone).
    Assertions are treated as passing, so the table over-approximates: skipping positions whose
    byte is 0 never changes the result."""
    allowed = bytearray(256)
    seen: set[int] = set()
    stack = [0]
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        op, a, b = insts[pc]
        if op == BYTE:
            bm = sets[a]
            for v in range(256):
                if bm[v >> 3] >> (v & 7) & 1:
                    allowed[v] = 1
        elif op == SPLIT:
            stack += [a, b]
        elif op == JMP:
            stack.append(a)
        elif op in (SAVE, ASSERT):
            stack.append(pc + 1)
        else:
            return None
    return bytes(allowed)


def place_regex(pattern: str, static: StaticData) -> RegexTables:
    """Compile ``pattern``, check its program, and place its bitmaps, instructions and first-byte
    table in ``static``.

    Raises:
        CodegenError: the pattern does not compile, or its program is malformed (an empty
            program, a bitmap that is not 32 bytes, a reference out of range, an unknown opcode
            or assertion, no MATCH).
    """
    try:
        prog = compile_regex(pattern)
    except Exception as e:  # the regex module's own error types
        raise CodegenError(f"regex {pattern!r} cannot be compiled: {e}") from e
    insts = list(prog.insts)
    if not insts:
        raise CodegenError(f"regex {pattern!r} compiled to an empty program")
    set_at = [static.put(bytes(s), 4) for s in prog.sets]
    if any(len(s) != 32 for s in prog.sets):
        raise CodegenError(f"regex {pattern!r}: a byte set is not a 32-byte bitmap")
    words = bytearray()
    for op, a, b in insts:
        a = 0 if a is None else int(a)
        b = 0 if b is None else int(b)
        if op == BYTE:
            if not 0 <= a < len(set_at):
                raise CodegenError(f"regex {pattern!r}: BYTE refers to set {a}")
            a = set_at[a]
        elif op in (SPLIT, JMP) and not (0 <= a < len(insts) and (op == JMP or 0 <= b < len(insts))):
            raise CodegenError(f"regex {pattern!r}: jump target out of range")
        elif op == SAVE and not 0 <= a < prog.nslots:
            raise CodegenError(f"regex {pattern!r}: SAVE slot {a} out of range")
        elif op == ASSERT and a not in ASSERTIONS:
            raise CodegenError(f"regex {pattern!r}: unknown assertion {a}")
        elif op not in (BYTE, SPLIT, JMP, SAVE, ASSERT, MATCH):
            raise CodegenError(f"regex {pattern!r}: unknown opcode {op}")
        words += struct.pack("<iii", op, a, b)
    if insts[-1][0] not in (JMP, MATCH) and not any(op == MATCH for op, _, _ in insts):
        raise CodegenError(f"regex {pattern!r}: no MATCH instruction")
    at = static.put(bytes(words), 4)
    first = first_bytes(insts, prog.sets)
    return RegexTables(at, len(insts), int(prog.nslots), int(prog.ngroups),
                       0 if first is None else static.put(first))
