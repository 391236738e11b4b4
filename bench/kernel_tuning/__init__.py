"""F7 kernel-tuning benchmark family (GPU, Triton 3.6 on H200).

Modules (torch/triton are imported at module level only by ``kernels``, ``decoder``,
``decode_kernels`` and ``choice_step``; elsewhere inside functions):

* ``workloads``  — the seen corpus (176 unique), its 64 re-recorded row ops, the novel-shape
                    holdout (61).
* ``legality``   — exact static legality (+ marked spill estimates) of a (family, config).
* ``advisor``    — advisor I/O schema ``auto.kt.advise.v1``, heuristic advisor, LLM hook (off),
                    analytic rank, ``make_plan`` (vendor + top-k candidates).
* ``kernels``    — Triton templates + vendor paths, problems, references, env probe.
* ``agent``      — ``decide``: materialize → numerics → P1/P2 timing → choose / fall back → record.
* ``record``     — span-shaped decision records, env hash, schema check, census, summaries.
* ``run``        — driver ``python -m bench.kernel_tuning.run --pass pass1 --out DIR``.
* ``report``     — ``python -m bench.kernel_tuning.report DIR``.
* ``specialist`` — the specialist's inputs, answers (table entries) and parity from recorded passes.
* ``verify``     — specialist vs reference agent vs vendor on the GPU, one process, interleaved,
                    P1 and P2 (``python -m bench.kernel_tuning.verify --out DIR``).
* ``verify_report`` — summary of ``verify.jsonl`` (parity, ratios, per-token sums, drift).
* ``aot_check``  — offline sm_90 compile + ptxas register/spill check (no GPU).
* ``decoder``    — the decode step's models (configs, random bf16 weights) and the torch step the
                    eager, eager + CUDA graph and torch.compile legs run (fp32: the reference).
* ``decode_kernels`` — fixed Triton kernels of the step (rotary + KV write, split-KV decode
                    attention) and the QK-norm variant of the RMSNorm template.
* ``choice_step`` — the decode step built from the specialist's answers, one CUDA graph.
* ``graphs``     — CUDA-graph capture that owns its cuBLAS workspace (cleared before and after).
* ``workspace_repro`` — the shared-workspace illegal memory access reproduced in isolation
                    (``python -m bench.kernel_tuning.workspace_repro --out DIR``).
* ``e2e``        — ``python -m bench.kernel_tuning.e2e``: specialist (+ live deopt), numerics,
                    interleaved legs (fresh torch.compile compiles of two configurations), HBM floor,
                    per-kernel breakdown → ``e2e_<n>.json``; ``run_on_gpu`` for ``bench run --e2e``.
* ``e2e_report`` — summary of the ``e2e_<n>.json`` runs (step times per leg, best baseline,
                    spreads, ratios, floor ratio, first-round level, targets).
* ``device.sh``, ``device_e2e.sh`` — what the device calls ran.
"""
