"""The rungs of the compile ladder, one module each, one signature each
(``compile_rung(witnesses, contract, ctx) -> CompileOutcome``, raising ``RungRefused``)."""
