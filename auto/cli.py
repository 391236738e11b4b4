"""The ``auto`` command line.

Data goes to stdout, humans' messages to stderr. Errors are converted to messages and exit codes
in one place (:class:`_AutoGroup`): 0 ok, 1 error, 2 usage, 3 "ran, but a gate refused" (also: the
guard declined and no reference was configured), 130 interrupted (Ctrl-C: 128 + SIGINT, the
shell's convention; ``auto record`` passes its child's exit code through, and a child ended by
Ctrl-C gives the same 130).

Other distributions add commands through the entry-point group :data:`PLUGIN_GROUP`
(``auto.commands``): each entry point names a click command (or group), added under the entry
point's name. A distribution registers one in its ``pyproject.toml``::

    [project.entry-points."auto.commands"]
    hello = "my_package.cli:hello"      # a click.Command; `auto hello ...`

Plugins load only when a command name is not built in (or for ``--help``); a plugin that fails
to load gives one warning line on stderr and the other commands work. Plugin commands raise the
errors of :mod:`auto.errors` and get the same messages and exit codes as the built-in ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Iterator

import click

from auto.errors import ArgumentError, AutoError, GateRefused, GuardDeclined, ReferenceFailed, UsageError, VerificationFailed
from auto.reference import first_line as _first_line
from auto.reference import load_reference

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT): 128 + 2, as a shell reports a command ended by SIGINT."""

PLUGIN_GROUP = "auto.commands"
"""The entry-point group whose click commands ``auto`` adds (see the module docstring)."""


def say(msg: str) -> None:
    """A message for humans (stderr)."""
    click.echo(msg, err=True)




def _message(e: BaseException) -> str:
    """An error's message as a user reads it: its text, never its class name; an error raised
    with no message gets the first line of its class's docstring (each class of
    :mod:`auto.errors` has one, in plain words)."""
    text = str(e).strip()
    if text:
        return text
    doc = (type(e).__doc__ or "").strip()
    return doc.splitlines()[0].rstrip(".") if doc else "failed"


def _interrupted() -> None:
    """Say ``interrupted`` and exit 130. Objects that Ctrl-C left half-built (an HTTP client
    interrupted in its constructor) may fail in their finalizers at shutdown; those messages
    are silenced so the last line a user sees stays ``interrupted``."""
    sys.unraisablehook = lambda _unraisable: None
    say("interrupted")
    sys.exit(EXIT_INTERRUPTED)


def load_plugins(builtin: set[str]) -> dict[str, click.Command]:
    """The click commands of the :data:`PLUGIN_GROUP` entry points, by entry-point name.

    An entry point that fails to import, is not a click command, or takes the name of a command
    in ``builtin`` (or of an earlier plugin) is left out with one warning line on stderr.
    """
    found: dict[str, click.Command] = {}
    for ep in entry_points(group=PLUGIN_GROUP):
        dist = getattr(ep, "dist", None)
        origin = f"{ep.value}" + (f" from {dist.name} {dist.version}" if dist is not None else "")
        if ep.name in builtin or ep.name in found:
            say(f"warning: plugin command {ep.name!r} ({origin}) ignored: the name is taken")
            continue
        try:
            cmd = ep.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break the other commands
            say(f"warning: plugin command {ep.name!r} ({origin}) failed to load: {_first_line(e)}")
            continue
        if not isinstance(cmd, click.Command):
            say(f"warning: plugin command {ep.name!r} ({origin}) ignored: not a click command")
            continue
        found[ep.name] = cmd
    return found


class _AutoGroup(click.Group):
    """Converts every AutoError into a one-line message and the documented exit code; adds the
    plugin commands (:func:`load_plugins`) when a name is not built in or the commands are listed."""

    _plugins: dict[str, click.Command] | None = None

    def _plugin_commands(self) -> dict[str, click.Command]:
        if self._plugins is None:
            self._plugins = load_plugins(set(self.commands))
        return self._plugins

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None:
            cmd = self._plugin_commands().get(cmd_name)
        return cmd

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._plugin_commands()})

    def main(self, *args: Any, **kwargs: Any) -> Any:  # noqa: D401
        kwargs.setdefault("standalone_mode", True)
        try:
            return super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.exceptions.Abort as e:
            if isinstance(e.__cause__ or e.__context__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
                _interrupted()
            say("aborted")
            sys.exit(EXIT_ERROR)
        except click.UsageError as e:
            e.show()
            sys.exit(EXIT_USAGE)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except GateRefused as e:
            say(f"refused: {e.reason}")
            if e.eval_run_id:
                say(f"eval run: {e.eval_run_id}")
            sys.exit(EXIT_REFUSED)
        except GuardDeclined as e:
            say(f"declined: {e}")
            sys.exit(EXIT_REFUSED)
        except (UsageError, ArgumentError) as e:
            say(f"usage error: {e}")
            sys.exit(EXIT_USAGE)
        except AutoError as e:  # the message in plain words; the class is for code, not for the user
            say(f"error: {_message(e)}")
            sys.exit(EXIT_ERROR)
        except KeyboardInterrupt:
            _interrupted()
        except OSError as e:  # a path that cannot be written or read (a missing folder, /proc, permissions)
            where = f": {e.filename}" if e.filename else ""
            say(f"error: cannot use {where[2:] or 'a file'}: {e.strerror or e}")
            sys.exit(EXIT_ERROR)


class StoreLocation(click.ParamType):
    """``--store``: an SQLite file path or a ``postgresql://`` URI (libpq connection string).

    With ``exists``, a path must name an existing file (a URI is checked when it is opened). A
    location that looks like a URI of another scheme is one usage line
    (:func:`auto.store.postgres.location_error`)."""

    name = "store"

    def __init__(self, exists: bool = True) -> None:
        self.exists = exists

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        from auto.store.postgres import is_dsn, location_error

        text = str(value)
        if is_dsn(text):
            return text
        bad = location_error(text)
        if bad is not None:  # a typo'd scheme: one line, never an SQLite file of that name
            raise UsageError(f"--store {bad}")
        p = Path(text)
        if p.is_dir():
            self.fail(f"{text!r} is a directory, not a store (a file path or a postgresql:// URI)", param, ctx)
        if self.exists and not p.exists():
            self.fail(f"store {text!r} does not exist (a file path or a postgresql:// URI)", param, ctx)
        return text


def _existing_store(path: str) -> Any:
    """Open a store a read-mostly command needs to exist already (an empty file, or a PostgreSQL
    schema without tables, is not a store: nothing is created)."""
    from auto.store import Store

    return Store(path, create=False)


def _no_task(store: Any, task: str) -> UsageError:
    """The usage error of a ``--task`` the store does not hold: it names the recorded tasks and,
    when there are none (calls recorded outside any task, as the proxy records them), the
    model-call sites, which ``--site`` takes."""
    names = sorted(store.tasks())
    where = f"no task {task!r} in {store.location} (tasks recorded: {', '.join(names) or 'none'}"
    if not names:
        from auto.sites import store_sites

        sites = sorted(store_sites(store))
        if sites:
            return UsageError(f"{where}; model-call sites: {', '.join(sites)}, which auto compile --site takes)")
    return UsageError(where + ")")


def _emit_json(obj: Any) -> None:
    """Data on stdout as strict JSON (NaN or infinity, which JSON cannot hold, is an error)."""
    try:
        text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ReferenceFailed(f"the answer cannot be written as JSON ({e}); a task's answers must be JSON values") from None
    click.echo(text)


@click.group(cls=_AutoGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="auto")
def main() -> None:
    """Auto: compile an agent's deterministic decisions into verified WebAssembly artifacts.

    \b
    Pipeline: record → census → compile (distill, verify, emit) → run (tier-1 or deopt).
    Exit codes: 0 ok, 1 error, 2 usage, 3 a gate refused / the guard declined, 130 interrupted (Ctrl-C).
    """


# ---------------------------------------------------------------------------------------- record
@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--store", "store_path", required=True, type=StoreLocation(exists=False),
              help="Trace store to record into: an SQLite file (created if missing) or a postgresql:// URI.")
@click.option("--task", default=None, help="Task name for model calls made outside any @auto.task.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def record(store_path: str, task: str | None, command: tuple[str, ...]) -> None:
    """Record a child process with no change to its code: auto record --store S -- python agent.py"""
    from auto.record import run_recorded

    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given after --")
    code = run_recorded(cmd, store=store_path, task=task)
    from auto.store.postgres import location_label

    say(f"recorded into {location_label(store_path)} (child exit code {code})")
    sys.exit(code)


# ---------------------------------------------------------------------------------------- census
@main.command()
@click.option("--store", "store_path", default=None, type=StoreLocation(), help="Trace store (SQLite file or postgresql:// URI).")
@click.option("--parquet", "parquet_dir", default=None, type=click.Path(exists=True, file_okay=False),
              help="Instead of a store: an `auto store export --format parquet` folder (census by DuckDB).")
@click.option("--task", default=None, help="Only this task's sites.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.option("--inputs", "with_inputs", is_flag=True, help="With --json: include per-input rows.")
def census(store_path: str | None, parquet_dir: str | None, task: str | None, as_json: bool, with_inputs: bool) -> None:
    """The determinism census: per site and distinct input, were the answers the same?

    \b
    Aggregated in the database (memory bounded by the sites, and with --inputs the inputs,
    reported; not by the spans); --parquet runs the same census on DuckDB over an export.
    """
    from auto.census import census_store, render_table

    if with_inputs and not as_json:
        raise UsageError("--inputs applies to --json output")
    if (store_path is None) == (parquet_dir is None):
        raise UsageError("give exactly one of --store and --parquet")
    if parquet_dir is not None:
        from auto.interchange.parquet import census_parquet

        c = census_parquet(parquet_dir, task=task, with_inputs=with_inputs)
        if task is not None and not c.sites:
            raise UsageError(f"no task {task!r} in {parquet_dir}")
    else:
        with _existing_store(store_path) as store:
            c = census_store(store, task=task, with_inputs=with_inputs)
            if task is not None and not c.sites:  # a typo: name what was recorded instead of an empty table
                raise _no_task(store, task)
    if as_json:
        _emit_json(c.to_dict(with_inputs=with_inputs))
    else:
        click.echo(render_table(c))


# --------------------------------------------------------------------------------------- compile
@main.command(name="compile")
@click.option("--store", "store_path", required=True, type=StoreLocation(), help="Trace store (SQLite file or postgresql:// URI).")
@click.option("--task", default=None, help="Task to compile.")
@click.option("--site", "site", default=None, help="Model-call site to compile (an id auto census lists, or a unique prefix).")
@click.option("--all", "all_tasks", is_flag=True, help="Compile every task and model-call site of the store, in parallel on Ray (see --workers).")
@click.option("--workers", type=click.IntRange(min=0), default=None,
              help="With --all: CPUs of the local Ray cluster (default: all cores); 0 compiles serially without Ray.")
@click.option("--address", default=None, help="With --all: an existing Ray cluster (e.g. ray://head:10001) instead of a local one.")
@click.option("--out-dir", "out_dir", type=click.Path(file_okay=False), default=None,
              help="With --all: folder for the artifacts (default: the current folder).")
@click.option("--contract", "contract_path", type=click.Path(exists=True, dir_okay=False), default=None, help="Contract TOML (defaults derived from the task).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None, help="Where to write the .wasm (default: TASK.genN.wasm).")
@click.option("--no-memo", is_flag=True, help="Specialist only: no exact-match table in front, no memo fallback when the specialist is refused.")
@click.option("--no-program", is_flag=True, help="Skip the program rung (DSL synthesis); start at the specialist.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON on stdout.")
def compile_cmd(store_path: str, task: str | None, site: str | None, all_tasks: bool, workers: int | None,
                address: str | None, out_dir: str | None, contract_path: str | None, out_path: str | None,
                no_memo: bool, no_program: bool, as_json: bool) -> None:
    """Synthesize or distill, verify and emit one generation of a TASK or model-call SITE as a .wasm artifact (exit 3 if refused).

    \b
    The ladder: a DSL program first (synthesized from the witnesses, gated on held-out inputs);
    if none passes, a distilled specialist, memo-first (witnessed inputs answered from an
    exact-match table); if the specialist fails its gate, an exact-match memo of the witnessed
    inputs (it answers only what was witnessed); otherwise a refusal naming each rung's reason.
    A site's input is its slots (auto census lists them); its artifact carries the site's template.

    \b
    --all compiles every task and model-call site (results as a JSON list on stdout, one line each on stderr);
    exit 1 if any compile failed with an error, 3 if any was refused, else 0.
    """
    from auto.gate import Contract

    if all_tasks:
        if task or site or out_path:
            raise UsageError("--all compiles every task: leave out --task, --site and --out (use --out-dir)")
        with _compile_lock(store_path):
            _compile_all(store_path, workers, address, out_dir, contract_path, no_memo, no_program)
        return
    if workers is not None or address or out_dir:
        raise UsageError("--workers, --address and --out-dir apply to --all")
    if (task is None) == (site is None):
        raise UsageError("give exactly one of --task NAME or --site ID (or --all)")
    from auto.compile import compile_task

    with _existing_store(store_path) as store:
        if site is not None:
            task = _resolve_site(store, store.location, site)
        elif not store.has_task(task):
            raise _no_task(store, task)
        assert task is not None
        contract = Contract.load(contract_path, task=task) if contract_path else Contract.default_for(task)
        with _compile_lock(store_path):
            try:
                outcome = compile_task(store, task, contract=contract, out_path=out_path, memo=not no_memo,
                                       programs=not no_program, progress=say)
            except GateRefused as e:
                if as_json:  # the refusal as JSON too (as --all reports one), then exit 3 as always
                    _emit_json({"task": task, "verdict": "refuse", "reason": e.reason, "eval_run_id": e.eval_run_id})
                raise
    if as_json:
        _emit_json(outcome.summary())
    else:
        click.echo(outcome.artifact_path)
    say(f"compiled {task} generation {outcome.generation}: {outcome.reason}")
    say(f"artifact {outcome.artifact_id} ({outcome.artifact_bytes} bytes), eval run {outcome.eval_run_id}")


@contextlib.contextmanager
def _compile_lock(store_path: str) -> Iterator[None]:
    """Hold the store's compile lock (:func:`auto.store.lock.compile_lock`), waiting for it with
    one line on stderr: one compile at a time takes a store's next generation numbers."""
    from auto.store.lock import compile_lock

    lock = compile_lock(store_path)
    if not lock.acquire():
        say("waiting for another compile of this store to finish (one compile at a time takes a generation number)")
        lock.acquire(blocking=True)
    try:
        yield
    finally:
        lock.release()


def _compile_all(store_path: str, workers: int | None, address: str | None, out_dir: str | None,
                 contract_path: str | None, no_memo: bool, no_program: bool) -> None:
    from auto.distributed import compile_all
    from auto.gate import Contract

    contract = Contract.load_shared(contract_path) if contract_path else None  # its fields apply to every task
    with _existing_store(store_path):
        pass  # a bad store fails here, once, before any worker starts

    def line(r: dict) -> None:
        extra = f"generation {r.get('generation')}, {r.get('artifact_bytes')} bytes" if r["verdict"] == "pass" else r.get("reason", "")
        say(f"{r['verdict']:<7} {r['task']}: {extra}")

    results = compile_all(store_path, out_dir=out_dir or ".", workers=workers, address=address, contract=contract,
                          memo=not no_memo, programs=not no_program, progress=line)
    _emit_json(results)
    verdicts = [r["verdict"] for r in results]
    say(f"compiled {verdicts.count('pass')} of {len(results)} tasks ({verdicts.count('refuse')} refused, "
        f"{verdicts.count('error')} errors)")
    if "error" in verdicts:
        sys.exit(EXIT_ERROR)
    if "refuse" in verdicts:
        sys.exit(EXIT_REFUSED)


def _resolve_site(store: Any, store_path: str, ref: str) -> str:
    """The site id a --site argument names (an id or a unique prefix of one)."""
    from auto.sites import SITE_PREFIX, store_sites

    sites = store_sites(store)  # from the distinct requests, not every model-call span
    want = ref if ref.startswith(SITE_PREFIX) else SITE_PREFIX + ref
    hits = [sid for sid in sites if sid.startswith(want)]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(sorted(sites)) or "none"
    if not hits:
        raise UsageError(f"no model-call site {ref!r} in {store_path} (sites: {listed})")
    raise UsageError(f"--site {ref!r} names {len(hits)} sites ({', '.join(hits)}); give more of the id")


def _trust(paths: tuple[str, ...]) -> Any:
    """The trust policy of --trust-key files, else of AUTO_TRUST_KEYS, else None."""
    from auto_runtime import TrustPolicy

    return TrustPolicy.from_files(paths) if paths else TrustPolicy.from_env()


_TRUST_HELP = ("Trusted public key (PEM or ed25519:<base64>); repeatable. Artifacts not signed by one are refused. "
               "Default: the files in AUTO_TRUST_KEYS.")
_TOOLS_HELP = ("module:attribute, the host's tools for an artifact that calls tools: a dict {tool name: callable} "
               "(or a function returning one); each must be a tool the manifest declares.")


# ------------------------------------------------------------------------------------------- run
@main.command()
@click.argument("artifact", type=click.Path(exists=True, dir_okay=False))
@click.option("--input", "input_json", required=True,
              help="One task input as JSON, e.g. '{\"ticket\": \"...\"}'; @FILE reads it from a file, - from stdin.")
@click.option("--id", "expected_id", default=None, help="Expected artifact id (sha256:...); refuse on mismatch.")
@click.option("--reference", default=None, help="module:function to call on deopt (tier-0), e.g. my_agent:triage.")
@click.option("--trust-key", "trust_keys", multiple=True, type=click.Path(exists=True, dir_okay=False), help=_TRUST_HELP)
@click.option("--tools", "tools_spec", default=None, help=_TOOLS_HELP)
def run(artifact: str, input_json: str, expected_id: str | None, reference: str | None, trust_keys: tuple[str, ...],
        tools_spec: str | None) -> None:
    """Run one input through ARTIFACT (tier-1 unless the guard deopts to --reference)."""
    from auto_runtime import Artifact, TieredTask

    if input_json == "-":
        input_json = sys.stdin.read()
    elif input_json.startswith("@"):
        try:
            input_json = Path(input_json[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--input {input_json}: cannot read the file: {e}") from None
    from auto.jsonlimits import MAX_JSON_DEPTH, json_depth_ok

    if not json_depth_ok(input_json.encode("utf-8", "surrogatepass")):
        raise UsageError(f"--input nests arrays/objects deeper than {MAX_JSON_DEPTH} levels")
    try:
        obj = json.loads(input_json)
    except (ValueError, RecursionError) as e:
        raise UsageError(f"--input is not JSON: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if not isinstance(obj, dict):
        raise UsageError("--input must be a JSON object (the task's named arguments)")
    if expected_id is not None and not re.fullmatch(r"sha256:[0-9a-f]{64}", expected_id):
        raise UsageError(f"--id must look like sha256:<64 hex digits>, got {expected_id!r}")
    ref = load_reference(reference) if reference else None
    art = Artifact.load(artifact, expected_id=expected_id, trust=_trust(trust_keys))
    if art.tools or tools_spec:
        from auto.serve.app import check_no_extra_tools, load_tools, tiered_with_tools

        tools = load_tools(tools_spec, str(Path.cwd())) if tools_spec else None
        tt = tiered_with_tools(art, tools, reference=ref)
        check_no_extra_tools([art], tools)
    else:
        tt = TieredTask(art, reference=ref)
    from auto_runtime import InputSchemaError

    try:
        res = tt(obj)
    except InputSchemaError as e:  # the user's input, not the artifact, is wrong: a usage error
        raise UsageError(f"--input does not fit the artifact's input schema: {_message(e)}") from None
    _emit_json(
        {
            "answer": res.answer,
            "tier": res.tier,
            "reason": res.reason,
            "score": res.score,
            "p_value": res.p_value,
            "latency_us": res.latency_us,
            "generation": res.generation,
            "artifact_id": res.artifact_id,
        }
    )
    if res.tier == "declined":
        raise GuardDeclined(res.reason)


# --------------------------------------------------------------------------------------- inspect
@main.command()
@click.argument("artifact", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
def inspect(artifact: str, as_json: bool) -> None:
    """Show an artifact's manifest, imports, exports, size and id."""
    from auto_runtime import Artifact
    from auto_runtime.manifest import Manifest

    art = Artifact.load(artifact)
    info = art.describe()
    if as_json:
        _emit_json(info)
        return
    m = Manifest.of(art.manifest)
    click.echo(f"artifact   {info['id']}")
    click.echo(f"size       {info['bytes']} bytes")
    click.echo(m.summary_line())
    if m.site is not None:
        from auto.sites import Site

        try:
            d = Site.from_manifest(m.site).describe()
            click.echo(f"site       model-call site, model {d['model']}, slots "
                       + (", ".join(f"{x['name']} ({x['path']})" for x in d["slots"]) or "none"))
        except ValueError as e:
            click.echo(f"site       unreadable: {e}")
    click.echo(f"imports    {info['imports'] or 'none (pure)'}")
    click.echo(f"exports    {', '.join(info['exports'])}")
    for line in m.inspect_lines():
        click.echo(line)


# ----------------------------------------------------------------------------------------- proxy
@main.command()
@click.option("--upstream", required=True, help="The OpenAI-compatible endpoint to forward to, e.g. https://api.openai.com/v1.")
@click.option("--store", "store_path", required=True, type=StoreLocation(exists=False),
              help="Store to record into: an SQLite file (created if missing) or a postgresql:// URI.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8788, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--record-only", is_flag=True, help="Record and forward every call; never answer at tier-1.")
@click.option("--trust-key", "trust_keys", multiple=True, type=click.Path(exists=True, dir_okay=False), help=_TRUST_HELP)
@click.option("--registry", "registry_dir", default=None, envvar="AUTO_REGISTRY", type=click.Path(file_okay=False),
              help="Registry holding the generations' signatures (and where --sign-key signs new ones).")
@click.option("--sign-key", "sign_key", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Ed25519 private key: sign the generations this proxy compiles into --registry.")
@click.option("--audit-rate", default=None, type=click.FloatRange(0.0, 1.0), help="Share of tier-1 answers re-asked upstream in the background (default 0.05).")
@click.option("--timeout-s", default=600.0, show_default=True, type=click.FloatRange(min=0.001), help="Limit of one forwarded call (s).")
@click.option("--contract", "contract_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Contract TOML every site's generations are gated with (default: the default contract).")
@click.option("--client-key", "client_keys", multiple=True, envvar="AUTO_PROXY_CLIENT_KEYS",
              help="A key always admitted to tier-1 answers (repeatable; or AUTO_PROXY_CLIENT_KEYS, space-separated). "
                   "Other keys get tier-1 answers only once the upstream accepted them within --key-ttl-s.")
@click.option("--key-ttl-s", default=300.0, show_default=True, type=click.FloatRange(min=0.0),
              help="How long a key the upstream accepted stays admitted to tier-1 answers (s; 0: only --client-key).")
@click.option("--audit-key", default=None, envvar="AUTO_PROXY_AUDIT_KEY",
              help="The key shadow audits send upstream (or AUTO_PROXY_AUDIT_KEY); without it audits carry no "
                   "credentials. A caller's key is never used.")
@click.option("--no-tier1-spans", "no_tier1_spans", is_flag=True,
              help="Do not record tier-1 answers as spans (they are recorded by default, for the OTLP export; never "
                   "witnesses): about 0.1 ms less per tier-1 answer.")
def proxy(upstream: str, store_path: str, host: str, port: int, record_only: bool, trust_keys: tuple[str, ...],
          registry_dir: str | None, sign_key: str | None, audit_rate: float | None, timeout_s: float,
          contract_path: str | None, client_keys: tuple[str, ...], key_ttl_s: float, audit_key: str | None,
          no_tier1_spans: bool) -> None:
    """An OpenAI-compatible proxy: record every call, answer compiled model-call sites at tier-1.

    \b
    Point the agent at it: OPENAI_BASE_URL=http://127.0.0.1:8788/v1 (any language, any client).
    Credentials are forwarded upstream, never stored. A tier-1 answer needs a --client-key or a
    key the upstream accepted within --key-ttl-s; any other request is forwarded. Stop with Ctrl-C.
    """
    from auto.proxy import ProxyConfig, run as run_proxy
    from auto.proxy.upstream import Upstream
    from auto.ratchet import DEFAULT_AUDIT_RATE
    from auto.registry import Registry
    from auto.signing import load_private_key
    from auto.store import Store
    from auto.store.postgres import location_label
    from auto.gate import Contract

    from auto.asgi import check_listen

    up_label = Upstream(upstream).label  # a bad URL is a usage error before anything starts
    # every argument is checked before the store is opened: a proxy that cannot start writes nothing
    if contract_path:
        Contract.load(contract_path, task="site:check")  # a bad contract fails before anything listens
    if sign_key and not registry_dir:
        raise UsageError("--sign-key needs --registry (where the signatures go)")
    trust = _trust(trust_keys)
    private_key = load_private_key(sign_key) if sign_key else None
    check_listen(host, port)  # a taken port is one line, and no store file is created
    Store(store_path).close()
    cfg = ProxyConfig(upstream=upstream, store=store_path, host=host, port=port, answer=not record_only, trust=trust,
                      registry=Registry(registry_dir) if registry_dir else None,
                      sign_key=private_key,
                      audit_rate=DEFAULT_AUDIT_RATE if audit_rate is None else audit_rate, timeout_s=timeout_s,
                      contract_path=contract_path, client_keys=tuple(k for k in client_keys if k), key_ttl_s=key_ttl_s,
                      audit_key=audit_key or None, record_tier1=not no_tier1_spans)
    if host not in ("127.0.0.1", "localhost", "::1"):
        say(f"warning: listening on {host}: anyone who can reach it can use the upstream with the keys they send")
    run_proxy(cfg, announce=lambda bound: say(
        f"auto proxy on http://{host}:{bound}/v1 -> {up_label}, recording into {location_label(store_path)}"
        + (" (record only)" if record_only else "") + (f", trusting {', '.join(trust.key_ids)}" if trust else "")))


# --------------------------------------------------------------------------------------- receive
@main.command()
@click.option("--store", "store_path", required=True, type=StoreLocation(exists=False),
              help="Store to receive into (created if missing).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=4318, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (4318: the OTLP/HTTP default).")
def receive(store_path: str, host: str, port: int) -> None:
    """An OTLP/HTTP receiver: spans POSTed to /v1/traces (protobuf or JSON) go into the store.

    \b
    Point an instrumented service at it: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318
    (OpenLLMetry, opentelemetry-instrumentation-openai-v2, OpenInference). Spans are journaled
    before they are acknowledged. Stop with Ctrl-C.
    """
    from auto.interchange.receiver import serve
    from auto.store.postgres import location_label

    got = serve(store_path, host, port, announce=lambda bound: say(
        f"auto receive on http://{host}:{bound}/v1/traces, into {location_label(store_path)} "
        f"(OTEL_EXPORTER_OTLP_ENDPOINT=http://{host}:{bound})"))
    say(f"received {got['spans']} spans in {got['requests']} requests ({got['skipped']} spans of no GenAI "
        f"convention skipped, {got['refused']} requests refused)")


# ----------------------------------------------------------------------------------------- serve
@main.command()
@click.argument("artifacts", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--store", "store_path", default=None, type=StoreLocation(exists=False),
              help="Also serve every artifact of this store, an SQLite file or a postgresql:// URI, and capture deopts "
                   "there (created if missing, when artifact files or --registry give something to serve).")
@click.option("--registry", "registry_dir", default=None, envvar="AUTO_REGISTRY", type=click.Path(file_okay=False), help="Also serve every artifact of this registry.")
@click.option("--trust-key", "trust_keys", multiple=True, type=click.Path(exists=True, dir_okay=False), help=_TRUST_HELP)
@click.option("--reference", "references", multiple=True,
              help="module:function answering declined calls (tier-0), for a single task; with artifacts of several tasks "
                   "give TASK=module:function once per task. Without one, declined calls answer 409.")
@click.option("--tools", "tools_spec", default=None, help=_TOOLS_HELP)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (off loopback needs --token).")
@click.option("--token", default=None, envvar="AUTO_SERVE_TOKEN",
              help="Bearer token every endpoint but /health requires (or AUTO_SERVE_TOKEN).")
@click.option("--allow-unauthenticated", is_flag=True, help="Listen off loopback without a token (anyone who can reach it "
              "may run the artifacts and trigger reference calls).")
@click.option("--port", default=8787, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 256), help="Worker processes.")
@click.option("--fuel", default=None, type=click.IntRange(min=1), help="Fuel per call (default: the runtime's).")
@click.option("--memory-bytes", default=None, type=click.IntRange(min=65536), help="Memory cap per instance (bytes).")
@click.option("--timeout-ms", default=None, type=click.FloatRange(min=0.001), help="Wall-clock limit per call (ms).")
@click.option("--no-tier1-spans", "no_tier1_spans", is_flag=True,
              help="Do not record tier-1 answers in --store as spans (recorded by default, for the OTLP export; never "
                   "witnesses).")
def serve(artifacts: tuple[str, ...], store_path: str | None, registry_dir: str | None, trust_keys: tuple[str, ...],
          references: tuple[str, ...], tools_spec: str | None, host: str, port: int, token: str | None,
          allow_unauthenticated: bool, workers: int, fuel: int | None,
          memory_bytes: int | None, timeout_ms: float | None, no_tier1_spans: bool) -> None:
    """Serve artifacts over HTTP: POST /v1/artifacts/ID/run, GET /v1/artifacts, GET /health."""
    from auto.serve import ServeConfig, run as run_serve

    if not artifacts and not store_path and not registry_dir:
        raise UsageError("nothing to serve: give artifact files, --store or --registry")
    paths = list(trust_keys)
    if not paths:
        from auto_runtime.signing import TRUST_ENV

        paths = [p for p in os.environ.get(TRUST_ENV, "").split(os.pathsep) if p.strip()]
    plain = [r for r in references if "=" not in r]
    per_task = dict(r.split("=", 1) for r in references if "=" in r)
    if len(plain) > 1:
        raise UsageError("give one plain --reference module:function, or one --reference TASK=module:function per task")
    cfg = ServeConfig(artifacts=[str(Path(a).resolve()) for a in artifacts], store=store_path, registry=registry_dir,
                      trust_keys=paths, reference=plain[0] if plain else None, references=per_task, tools=tools_spec,
                      fuel=fuel, memory_bytes=memory_bytes, timeout_ms=timeout_ms, host=host, port=port, workers=workers,
                      cwd=str(Path.cwd()), token=token or None, allow_unauthenticated=allow_unauthenticated,
                      record_tier1=not no_tier1_spans)
    created = _serve_store(store_path, bool(artifacts or registry_dir), host, port)
    announced = []

    def announce() -> None:
        announced.append(True)
        say(f"auto serve on http://{host}:{port} ({workers} worker{'s' if workers > 1 else ''})")

    try:
        run_serve(cfg, announce=announce)
    except BaseException:
        if created is not None and not announced:  # failed before serving: the store it created goes too
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(created) + suffix).unlink(missing_ok=True)
        raise


def _serve_store(store_path: str | None, other_sources: bool, host: str, port: int) -> Path | None:
    """Create ``auto serve``'s ``--store`` when it is an SQLite path that does not exist yet (as
    ``record``, ``proxy`` and ``receive`` do), after the address was found free; the path created,
    or None.

    Raises:
        UsageError: the store does not exist and nothing else is given to serve (a new store holds
            no artifacts).
        ListenError: the address cannot be listened on (checked first: nothing is created then).
    """
    from auto.store.postgres import is_dsn

    if store_path is None or is_dsn(store_path) or Path(store_path).exists():
        return None
    if not other_sources:
        raise UsageError(f"--store {store_path} does not exist yet, so it holds no artifacts to serve: compile into "
                         "it first, or give artifact files or --registry (a new store is then created for the deopts)")
    from auto.asgi import check_listen
    from auto.store import Store

    check_listen(host, port)  # a taken port is one line, and no store file is created
    Store(store_path).close()
    return Path(store_path)


# -------------------------------------------------------------------------------------- registry
@main.group()
def registry() -> None:
    """A content-addressed artifact registry with Ed25519 signatures."""


def _registry(path: str | None) -> Any:
    from auto.registry import Registry

    if not path:
        raise UsageError("give --registry DIR (or set AUTO_REGISTRY)")
    return Registry(path)


_REG = click.option("--registry", "registry_dir", default=None, envvar="AUTO_REGISTRY", type=click.Path(file_okay=False),
                    help="The registry folder (default: AUTO_REGISTRY).")


@registry.command(name="keygen")
@click.option("--out", "prefix", required=True, help="Writes PREFIX.key (private, mode 0600) and PREFIX.pub.")
def registry_keygen(prefix: str) -> None:
    """Make an Ed25519 key pair for signing artifacts."""
    from auto.signing import generate_keypair

    priv, pub, kid = generate_keypair(prefix)
    _emit_json({"key_id": kid, "private_key": str(priv), "public_key": str(pub)})
    say(f"key {kid}: keep {priv} secret; give {pub} to deploy hosts (--trust-key or AUTO_TRUST_KEYS)")


@registry.command(name="add")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@_REG
@click.option("--sign-key", default=None, type=click.Path(exists=True, dir_okay=False), help="Sign what is added with this private key.")
def registry_add(files: tuple[str, ...], registry_dir: str | None, sign_key: str | None) -> None:
    """Add artifact files (and sign them with --sign-key); prints each id."""
    from auto.signing import load_private_key

    reg = _registry(registry_dir)
    key = load_private_key(sign_key) if sign_key else None
    for f in files:
        aid = reg.add(Path(f).read_bytes(), key=key)
        click.echo(aid)
        say(f"added {f} as {aid}" + (" (signed)" if key is not None else ""))


@registry.command(name="sign")
@click.argument("ref")
@_REG
@click.option("--sign-key", required=True, type=click.Path(exists=True, dir_okay=False), help="The private key to sign with.")
def registry_sign(ref: str, registry_dir: str | None, sign_key: str) -> None:
    """Sign an artifact already in the registry (REF: its id or a unique prefix)."""
    from auto.signing import load_private_key, sign

    reg = _registry(registry_dir)
    aid, data, _ = reg.get(ref)
    rec = sign(data, load_private_key(sign_key))
    reg.add_signature(aid, rec)
    say(f"{aid} signed by {rec['key_id']}")


@registry.command(name="get")
@click.argument("ref")
@_REG
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="Where to write it (and OUT.sig).")
@click.option("--trust-key", "trust_keys", multiple=True, type=click.Path(exists=True, dir_okay=False), help=_TRUST_HELP)
def registry_get(ref: str, registry_dir: str | None, out_path: str, trust_keys: tuple[str, ...]) -> None:
    """Write an artifact and its signatures (OUT, OUT.sig); with a trust key, only if a trusted key signed it."""
    reg = _registry(registry_dir)
    aid, data, sigs = reg.get(ref)
    trust = _trust(trust_keys)
    if trust is not None:
        trust.verify(data, sigs, aid)
    out = Path(out_path)
    out.write_bytes(data)
    if sigs:
        Path(str(out) + ".sig").write_text(json.dumps(sigs, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    click.echo(aid)
    say(f"wrote {out} ({len(data)} bytes, {len(sigs)} signature(s))")


@registry.command(name="list")
@_REG
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
def registry_list(registry_dir: str | None, as_json: bool) -> None:
    """List the registry's artifacts with their task, generation and signers."""
    entries = _registry(registry_dir).entries()
    if as_json:
        _emit_json([e.to_dict() for e in entries])
        return
    for e in entries:
        click.echo(f"{e.id}  {e.task}  gen {e.generation}  {e.compiled_as}  {e.bytes} bytes  "
                   f"signed by {', '.join(e.signatures) or 'nobody'}")


@registry.command(name="verify")
@click.argument("refs", nargs=-1)
@_REG
@click.option("--trust-key", "trust_keys", multiple=True, type=click.Path(exists=True, dir_okay=False), help=_TRUST_HELP)
def registry_verify(refs: tuple[str, ...], registry_dir: str | None, trust_keys: tuple[str, ...]) -> None:
    """Re-hash every artifact and check every signature (exit 1 on any failure; with a trust key, unsigned fails too)."""
    rows = _registry(registry_dir).verify(_trust(trust_keys), list(refs) or None)
    _emit_json(rows)
    bad = [r for r in rows if not r["ok"]]
    if bad:
        first = bad[0]
        why = first["reason"] or next((s["reason"] for s in first["signatures"] if not s["ok"]), None) or "content does not match its id"
        raise VerificationFailed(f"{len(bad)} of {len(rows)} artifacts failed verification; first {first['id']}: {why}")
    say(f"registry verified: {len(rows)} artifacts")


# ----------------------------------------------------------------------------------------- store
@main.group()
def store() -> None:
    """Inspect, check, export and import a trace store (SQLite file or postgresql:// URI)."""


@store.command(name="verify")
@click.option("--store", "store_path", required=True, type=StoreLocation())
@click.option("--task", default=None, help="Only this task's spans (through its index).")
@click.option("--incremental", is_flag=True, help="Only spans added since the last incremental check of the same scope.")
def store_verify(store_path: str, task: str | None, incremental: bool) -> None:
    """Re-derive every digest in the store; exit 1 on any mismatch."""
    import dataclasses

    with _existing_store(store_path) as st:
        report = st.verify(task=task, incremental=incremental)
    _emit_json(dataclasses.asdict(report))
    report.raise_for_mismatch()
    say(f"store verified: {report.spans} spans, {report.traces} traces, {report.eval_runs} eval runs, "
        f"{report.artifacts} artifacts; every digest matches")


@store.command(name="info")
@click.option("--store", "store_path", required=True, type=StoreLocation())
def store_info(store_path: str) -> None:
    """Counts of traces, spans, payloads, eval runs and artifacts; schema version; bytes; store digest."""
    with _existing_store(store_path) as st:
        counts = st.counts()
        size = st.size_bytes()
        _emit_json({
            "schema_version": st.schema_version,
            **counts,
            "tasks": st.tasks(),
            "bytes": size,
            "bytes_per_span": round(size / counts["spans"], 1) if counts["spans"] else None,
            "store_digest": st.digest(),
        })


@store.command(name="export")
@click.option("--store", "store_path", required=True, type=StoreLocation())
@click.option("--format", "fmt", type=click.Choice(["parquet"]), default=None,
              help="parquet: the auto.parquet/3 layout (spans, payloads, traces, model-call requests and answers) into --out DIR.")
@click.option("--otlp", "otlp_path", type=click.Path(dir_okay=False), default=None,
              help="Write OpenTelemetry OTLP/JSON Lines (gen_ai.* attributes) to this file instead.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, help="With --format parquet: the folder.")
def store_export(store_path: str, fmt: str | None, otlp_path: str | None, out_dir: str | None) -> None:
    """Export the store: Parquet for analytics (DuckDB, `auto census --parquet`), OTLP for other tools."""
    if (fmt is None) == (otlp_path is None):
        raise UsageError("give one of --format parquet (with --out DIR) and --otlp FILE")
    if fmt == "parquet" and not out_dir:
        raise UsageError("--format parquet needs --out DIR")
    with _existing_store(store_path) as st:
        if otlp_path:
            from auto.interchange.otlp import export_otlp

            res = export_otlp(st, otlp_path)
        else:
            from auto.interchange.parquet import export_parquet

            res = export_parquet(st, out_dir)
    _emit_json(res)
    say(f"exported {res['spans']} spans ({res['bytes']} bytes)")


@store.command(name="import")
@click.option("--store", "store_path", required=True, type=StoreLocation(exists=False),
              help="Store to import into (created if missing).")
@click.option("--otlp", "otlp_path", default=None, type=click.Path(exists=True, dir_okay=False),
              help="OpenTelemetry OTLP/JSON file (one request, or one per line) of GenAI spans.")
@click.option("--format", "fmt", type=click.Choice(["otlp", "auto-v0"]), default=None,
              help="The format of the FILES: otlp (as --otlp), or auto-v0 (the reference Auto SDK's JSONL trace files).")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
def store_import(store_path: str, otlp_path: str | None, fmt: str | None, files: tuple[str, ...]) -> None:
    """Import traces made elsewhere so they become witnesses: OpenTelemetry GenAI spans (--otlp FILE), or the
    reference Auto SDK's trace files (--format auto-v0 FILE...)."""
    from auto.interchange.otlp import load_otlp, write_otlp
    from auto.store import Store

    if otlp_path is not None and (fmt is not None or files):
        raise UsageError("give --otlp FILE, or --format FORMAT with FILES, not both")
    if otlp_path is None and (fmt is None or not files):
        raise UsageError("give --otlp FILE, or --format otlp|auto-v0 with one or more FILES")
    if otlp_path is not None or fmt == "otlp":
        if fmt == "otlp" and len(files) != 1:
            raise UsageError("--format otlp reads one FILE")
        batch = load_otlp(otlp_path or files[0])  # read and checked whole before the store is opened
        what = "non-GenAI spans"
    else:
        from auto.interchange.autov0 import load_auto_v0

        batch = load_auto_v0(files)  # every file read and checked before the store is opened: a failure writes nothing
        what = "structural spans"
    with Store(store_path) as st:
        res = write_otlp(st, batch, progress=say if len(batch.spans) > 2000 else None)  # a long write says how far
    _emit_json(res)
    say(f"imported {res['spans']} spans ({res['unchanged']} already present, {res['skipped']} {what} skipped)")
    if res["without_messages"]:
        from auto.interchange.otlp import without_messages_line

        say(f"note: {without_messages_line(res['without_messages'])}")


if __name__ == "__main__":  # pragma: no cover
    main()
