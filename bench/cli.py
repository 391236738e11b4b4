"""``auto bench``: the AUTO-BENCH commands, added to the ``auto`` CLI as a plugin.

The ``auto-bench`` distribution registers :func:`bench` in the ``auto.commands`` entry-point
group; ``auto`` adds every command of that group. The commands raise the product's errors
(:class:`auto.errors.UsageError`, :class:`auto.errors.GateRefused`,
:class:`auto.errors.ReferenceModelError` for an endpoint that cannot be used, ...); the product
CLI turns them into one line and the documented exit code (0 ok, 1 error, 2 usage, 3 refused,
130 interrupted).

Data goes to stdout (JSON), progress and summaries to stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from auto.errors import GateRefused, UsageError


def say(msg: str) -> None:
    """A message for humans (stderr)."""
    click.echo(msg, err=True)


def _emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False))


@click.group()
def bench() -> None:
    """AUTO-BENCH: run a family end to end and report cost, parity and silent errors."""


@bench.command(name="run")
@click.argument("family", type=click.Choice(["triage", "intents", "extraction", "routing", "inbox", "assistant", "kernel-tuning"]))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out/bench", show_default=True, help="Output folder.")
@click.option("--stream", "stream_path", type=click.Path(exists=True, dir_okay=False), default=None, help="Your own stream: JSONL lines with the family's input field (other keys ignored).")
@click.option("--items", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Stream length (generated stream only).")
@click.option("--generator", "stream_kind", default="shifted", show_default=True, type=click.Choice(["shifted", "repetitive", "zipf", "near-duplicate"]),
              help="triage: the generated stream: fresh tickets with one shift to an unseen category, or about 60 "
                   "distinct tickets with heavy repetition and three shifts. intents: zipf (default for intents: "
                   "Zipf repeats of real utterances) or near-duplicate (greetings, sign-offs, casing, typos, numbers).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Corpus and simulator seed.")
@click.option("--warm-start", is_flag=True, help="Begin the stream with the offline generation installed (default: no artifact).")
@click.option("--worker", default="process", show_default=True, type=click.Choice(["process", "thread"]),
              help="triage: where the ratchet compiles (a child process per compile, or a thread).")
@click.option("--replay", "replay_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="kernel-tuning: census, compile and parity from recorded decisions (e.g. traces/kernel-tuning) on a CPU machine.")
@click.option("--inputs", "inputs_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="extraction/routing/inbox/assistant: compile from your own traffic (JSONL lines with the family's input "
                   "field: email / request / ticket / request).")
@click.option("--eval-inputs", "eval_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="extraction/routing: after compiling, also run the generation on these inputs (JSONL) against the reference; "
                   "inbox/assistant: verify on these inputs instead of the generated held-out slice.")
@click.option("--audit-rate", default=0.05, show_default=True, type=float,
              help="triage: fraction of tier-1 answers re-asked at tier 0 in the background (shadow audit; 0 = off).")
@click.option("--audit-seed", default=None, type=click.IntRange(min=0),
              help="triage: seed of the shadow audit's selection (default: --seed). Which tier-1 answers are audited "
                   "decides which witnesses later compiles see, so one stream's figures vary with it.")
@click.option("--e2e", "e2e", is_flag=True,
              help="kernel-tuning, on a GPU machine: measure the decode step built from the specialist's choices against "
                   "torch eager / CUDA graph / torch.compile, writing e2e.json into the --replay folder "
                   "(default traces/kernel-tuning), then replay it.")
def bench_run(family: str, out_dir: str, stream_path: str | None, items: int, stream_kind: str, seed: int,
              warm_start: bool, worker: str, replay_dir: str | None, inputs_path: str | None, eval_path: str | None,
              audit_rate: float, audit_seed: int | None, e2e: bool) -> None:
    """Record, census, compile, verify, then drive a stream through the tiered runtime.

    \b
    triage:        the AUTO-BENCH stream (simulated reference model unless OPENAI_BASE_URL is set).
    intents:       real HWU64 utterances (Zipf repeats, a shift, out-of-scope inputs), cold, beside an
                   exact dict and a similarity cache on the same items.
    inbox:         F2, classify -> lookup tool -> priority -> summary, compiled as one region.
    assistant:     a function-calling loop (tool choice, arguments, tool run, phrasing) as one region.
    kernel-tuning: on a GPU machine, records two passes + the holdout with the reference agent,
                   then compiles; with --replay DIR it replays recordings on any machine.
    """
    if e2e and family != "kernel-tuning":
        raise UsageError("--e2e applies to the kernel-tuning family only")
    if family == "kernel-tuning":
        from bench.kernel_tuning.replay import record_on_gpu, run_replay

        if e2e:
            from bench.kernel_tuning.e2e import run_on_gpu

            replay_dir = str(run_on_gpu(Path(replay_dir or "traces/kernel-tuning"), Path(out_dir), progress=say))
        if replay_dir is None:
            replay_dir = str(record_on_gpu(Path(out_dir) / "recordings", progress=say))
        _emit_json(run_replay(Path(replay_dir), Path(out_dir), progress=say))
        return
    if replay_dir is not None:
        raise UsageError("--replay applies to the kernel-tuning family only")
    if family in ("extraction", "routing"):
        if stream_path is not None or warm_start:
            raise UsageError(f"--stream and --warm-start apply to triage; {family} takes --inputs / --eval-inputs")
        from bench.compile_family import run_compile_family
        from bench.report import render_compile_summary

        results = run_compile_family(family, out_dir=Path(out_dir), inputs_path=Path(inputs_path) if inputs_path else None,
                                     eval_path=Path(eval_path) if eval_path else None, seed=seed, progress=say)
        _emit_json(results)
        say("")
        say(render_compile_summary(results))
        say(f"wrote {Path(out_dir) / 'results.json'}")
        if results.get("compiled_as") == "refused":  # as `auto compile`: ran, but every rung was refused
            raise GateRefused(str(results.get("reason")), results.get("eval_run_id"))
        return
    if family in ("inbox", "assistant"):
        if stream_path is not None or warm_start:
            raise UsageError(f"--stream and --warm-start apply to triage; {family} takes --inputs / --eval-inputs")
        from bench.region_family import render_region_summary, run_region_family

        results = run_region_family(family, out_dir=Path(out_dir), inputs_path=Path(inputs_path) if inputs_path else None,
                                    eval_path=Path(eval_path) if eval_path else None, seed=seed, progress=say)
        _emit_json(results)
        say("")
        say(render_region_summary(results))
        say(f"wrote {Path(out_dir) / 'results.json'}")
        if results.get("compiled_as") == "refused":
            raise GateRefused(str(results.get("reason")), results.get("eval_run_id"))
        return
    if family == "intents":
        if stream_path is not None or warm_start:
            raise UsageError("--stream and --warm-start apply to triage; intents runs its generated stream cold")
        gen_given = click.get_current_context().get_parameter_source("stream_kind") == click.core.ParameterSource.COMMANDLINE
        if gen_given and stream_kind not in ("zipf", "near-duplicate"):
            raise UsageError(f"--generator {stream_kind} is a triage stream; intents takes zipf or near-duplicate")
        from bench.intents.run import render, run_intents

        results = run_intents(out_dir=Path(out_dir), items=items, seed=seed, generator=stream_kind if gen_given else "zipf",
                              audit_rate=audit_rate, worker=worker, progress=say)
        _emit_json(results)
        say("")
        say(render(results))
        say(f"wrote {Path(out_dir) / 'results.json'}, ratchet.csv, cost.png")
        return
    if inputs_path is not None or eval_path is not None:
        raise UsageError("--inputs / --eval-inputs apply to the extraction, routing, inbox and assistant families")
    if stream_path is not None:
        given = [f"--{n}" for n in ("items", "generator") if click.get_current_context().get_parameter_source(
            "stream_kind" if n == "generator" else n) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise UsageError(f"{' and '.join(given)} apply to the generated stream; --stream replays your file as it is")
    from bench.report import render_summary
    from bench.run import run_family

    results = run_family(family, out_dir=Path(out_dir), stream_path=Path(stream_path) if stream_path else None, items=items,
                         seed=seed, warm_start=warm_start, audit_rate=audit_rate, stream_kind=stream_kind, worker=worker,
                         progress=say, audit_seed=audit_seed)
    _emit_json(results)
    say("")
    say(render_summary(results))
    say(f"wrote {Path(out_dir) / 'results.json'}, ratchet.csv, cost.png")


@bench.command(name="guards")
@click.option("--family", default="triage", show_default=True, type=click.Choice(["triage"]), help="Bench family.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out/guards", show_default=True, help="Output folder.")
@click.option("--seed", default=0, show_default=True, help="Corpus, probe and simulator seed.")
@click.option("--items", default=300, show_default=True, type=click.IntRange(min=1), help="Length of the shifted stream.")
@click.option("--heldout", default=300, show_default=True, type=click.IntRange(min=1), help="Fresh in-distribution tickets.")
@click.option("--warm-start", is_flag=True, help="Begin each stream with the offline generation installed.")
@click.option("--audit-rate", default=0.1, show_default=True, type=float, help="Shadow-audit rate in the streams.")
@click.option("--guard", "variants", multiple=True, type=click.Choice(["lexical", "semantic", "combined"]),
              help="Guard variant(s) to measure (repeatable; default: all).")
def bench_guards(family: str, out_dir: str, seed: int, items: int, heldout: int, warm_start: bool, audit_rate: float,
                 variants: tuple[str, ...]) -> None:
    """Measure guard variants (lexical, semantic, combined) on held-out, OOD probes and the shifted stream.

    Writes guards.json (rows with false-proceed / false-abstain rates and 95% Clopper–Pearson
    upper bounds), prints the JSON on stdout and a table beside the published reference figures
    on stderr.
    """
    from bench.guard_eval import VARIANTS, render_table, run_guards

    results = run_guards(out_dir=Path(out_dir), seed=seed, family=family, items=items, heldout=heldout,
                         warm_start=warm_start, audit_rate=audit_rate, variants=variants or VARIANTS, progress=say)
    _emit_json(results)
    say("")
    say(render_table(results))
    say(f"wrote {Path(out_dir) / 'guards.json'}")


@bench.command(name="anyagent")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out/anyagent", show_default=True, help="Output folder.")
@click.option("--seed", default=0, show_default=True, help="Corpus and simulator seed.")
@click.option("--calls", default=500, show_default=True, type=click.IntRange(min=10), help="Interleaved calls for the overhead measurement.")
@click.option("--clients", default=100, show_default=True, type=click.IntRange(min=1), help="Concurrent clients.")
@click.option("--per-client", default=50, show_default=True, type=click.IntRange(min=1), help="Calls per concurrent client.")
@click.option("--stream-items", default=300, show_default=True, type=click.IntRange(min=10), help="Fresh stream length.")
@click.option("--train-tickets", default=1000, show_default=True, type=click.IntRange(min=20), help="Tickets the agent is recorded on (twice).")
def bench_anyagent(out_dir: str, seed: int, calls: int, clients: int, per_client: int, stream_items: int,
                   train_tickets: int) -> None:
    """The proxy and auto serve against the simulator: overhead, first byte, load, the zero-code-change agent.

    Writes results.json (stdout too) and prints a summary on stderr; see bench/anyagent.py.
    """
    from bench.anyagent import render, run_anyagent

    results = run_anyagent(Path(out_dir), seed=seed, calls=calls, clients=clients, per_client=per_client,
                           stream_items=stream_items, train_tickets=train_tickets, progress=say)
    _emit_json(results)
    say("")
    say(render(results))
    say(f"wrote {Path(out_dir) / 'results.json'}")
