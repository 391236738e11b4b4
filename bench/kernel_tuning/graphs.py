"""CUDA-graph capture that owns its cuBLAS workspace.

PyTorch keeps one cuBLAS workspace per (cuBLAS handle, CUDA stream) and frees it only when
``torch._C._cuda_clearCublasWorkspaces()`` is called (PyTorch's CUDA semantics notes, section
"cuBLAS workspaces"). Every ``torch.cuda.graph`` capture runs on the same capture stream, so the
workspace the first capture allocated (inside that graph's private memory pool) is reused by every
later capture: each later graph bakes in a pointer into a pool it does not own. Inductor's
CUDA-graph trees (``torch.compile(mode="max-autotune")``) clear those workspaces whenever they
warm up or record a graph, and the next ``torch.cuda.graph`` entry empties the allocator's cache;
once the graph that owned the pool is gone, its workspace is then returned to the driver and every
graph that baked it in replays into unmapped memory ("an illegal memory access"). In this
package's end-to-end runs that was the batch-1 point after a batch > 1 point: the batch > 1
compiled step (cuBLAS GEMMs) was the last capture of its point, its workspace outlived it in the
cache, and the next point's eager-step graph baked it in (``traces/kernel-tuning/README.md``,
``workspace_repro``).

:func:`capture_step` therefore clears the workspaces right before and right after each capture:
the graph's cuBLAS calls get a workspace allocated in its own pool (kept alive with the graph),
and no later capture can pick it up.

torch is imported inside the functions (or passed in, for tests): the module imports anywhere.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator


def clear_blas_workspaces(torch: Any) -> bool:
    """Free PyTorch's cached cuBLAS workspaces (every handle and stream). Returns False where this
    torch build has no such call (nothing is cached then, or it cannot be cleared)."""
    f = getattr(getattr(torch, "_C", None), "_cuda_clearCublasWorkspaces", None)
    if not callable(f):
        return False
    f()
    return True


@contextlib.contextmanager
def own_blas_workspace(torch: Any) -> Iterator[None]:
    """Around one ``torch.cuda.graph`` capture: cached cuBLAS workspaces are cleared on entry (the
    capture allocates its own, in the graph's private pool) and on exit (no later capture reuses
    it)."""
    clear_blas_workspaces(torch)
    try:
        yield
    finally:
        clear_blas_workspaces(torch)


def capture_step(forward: Callable[[], Any], warmup: int = 2, torch: Any = None,
                 own_workspace: bool = True) -> tuple[Any, Any]:
    """``forward()`` run ``warmup`` times on a side stream (compiles every kernel), then captured
    in one CUDA graph: ``(graph, out)``, ``out`` the tensor the replays rewrite.

    ``own_workspace=False`` captures without clearing the cuBLAS workspaces (how this package
    captured before; kept for ``workspace_repro``)."""
    if torch is None:
        import torch
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        for _ in range(warmup):
            forward()
    torch.cuda.current_stream().wait_stream(st)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    scope = own_blas_workspace(torch) if own_workspace else contextlib.nullcontext()
    with scope:
        with torch.cuda.graph(graph):
            out = forward()
    torch.cuda.synchronize()
    return graph, out
