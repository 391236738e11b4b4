"""auto_runtime: load and run Auto artifacts (sandboxed .wasm), with guards and deopt.

Deploy hosts install only this distribution (it depends on wasmtime and numpy).
"""

from auto_runtime.errors import AutoError  # noqa: F401

__version__ = "0.1.0"
