"""Program extraction: the DSL of verified programs (:mod:`auto.extract.ast`) and its tools.

- :mod:`auto.extract.regex`: the safe regex subset, its Pike-VM program format and VM;
- :mod:`auto.extract.types`: the type checker (:func:`check`, :func:`input_fields`);
- :mod:`auto.extract.interp`: the reference interpreter (:func:`evaluate`, :func:`run_program`);
- :mod:`auto.extract.serial`: canonical JSON form and digests;
- :mod:`auto.extract.pretty`: the readable form shown by ``auto inspect`` and :func:`size`.

All of these use only the standard library.
"""

from auto.extract import ast
from auto.extract.interp import DeoptSignal, evaluate, run_program
from auto.extract.pretty import render, size
from auto.extract.regex import RegexError, RegexProgram, compile_regex, pike_search
from auto.extract.serial import SerialError, from_json, program_digest, to_json
from auto.extract.types import ProgramTypeError, check, input_fields

__all__ = [
    "ast",
    "DeoptSignal", "evaluate", "run_program",
    "render", "size",
    "RegexError", "RegexProgram", "compile_regex", "pike_search",
    "SerialError", "from_json", "program_digest", "to_json",
    "ProgramTypeError", "check", "input_fields",
]
