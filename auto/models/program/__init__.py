"""Program extraction: the DSL of verified programs (:mod:`auto.models.program.ast`) and its tools.

- :mod:`auto.models.program.regex`: the safe regex subset, its Pike-VM program format and VM;
- :mod:`auto.models.program.types`: the type checker (:func:`check`, :func:`input_fields`);
- :mod:`auto.models.program.interp`: the reference interpreter (:func:`evaluate`, :func:`run_program`);
- :mod:`auto.models.program.serial`: canonical JSON form and digests;
- :mod:`auto.models.program.pretty`: the readable form shown by ``auto inspect`` and :func:`size`.

All of these use only the standard library.
"""

from auto.models.program import ast
from auto.models.program.interp import DeoptSignal, evaluate, run_program
from auto.models.program.pretty import render, size
from auto.models.program.regex import RegexError, RegexProgram, compile_regex, pike_search
from auto.models.program.serial import SerialError, from_json, program_digest, to_json
from auto.models.program.types import ProgramTypeError, check, input_fields

__all__ = [
    "ast",
    "DeoptSignal", "evaluate", "run_program",
    "render", "size",
    "RegexError", "RegexProgram", "compile_regex", "pike_search",
    "SerialError", "from_json", "program_digest", "to_json",
    "ProgramTypeError", "check", "input_fields",
]
