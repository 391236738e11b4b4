"""The census of model calls over an ``auto.parquet/3`` export, in DuckDB SQL.

The same sites and counts as :func:`auto.census.census_model_calls` (which reads a store's rows
in Python), found without a Python step per request: ``requests.parquet`` holds what discovery
reads of each request (shape, leaf texts, :func:`auto.sites.discover.leaves_key`), so DuckDB

1. groups the model-call spans by distinct request and response (the store's census SQL,
   :func:`auto.store.census_sql.model_call_census_sql`);
2. counts, per group ``(task, span name, shape)``, the distinct texts of the system and developer
   leaves, from which Python picks the paths that split a group
   (:func:`auto.sites.discover.split_paths`), and numbers the parts;
3. gives, per part and leaf path, the number of distinct texts, the longest, and the
   :data:`~auto.sites.align.MAX_ALIGN_VALUES` texts with the smallest SHA-256 — all that
   :func:`auto.sites.align.leaf_template` needs to align a leaf in Python;
4. checks every distinct text against the templates found, as regular expressions
   (:func:`fits_pattern`: a template's fixed parts in order with anything between them matches
   exactly the texts :func:`auto.sites.align.extract` accepts, since ``extract`` takes each fixed
   part at its first occurrence, which leaves the most room for the rest);
5. counts the observations per site, input (the leaves key: equal for two requests of one site
   exactly when their slot values are) and site answer (``answers.parquet``), aggregated per site
   as the store's census is (:func:`auto.store.census_sql.site_aggregate_sql`).

Python sees a few rows per site, not per request or span.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Hashable

from auto.census import MODEL_CALL_KIND, census_from_rows, census_from_site_rows
from auto.canonical import canonical_json
from auto.sites.align import MAX_ALIGN_CHARS, MAX_ALIGN_VALUES, MIN_ALIGN_VALUES, SLOT, Parts, sample_key, template_candidate
from auto.sites.discover import MODEL_CALL_SPANS, SPLIT_ROLES, build_site, split_paths
from auto.store.census_sql import model_call_census_sql, site_aggregate_sql

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _literal(text: str) -> str:
    """``text`` as an RE2 pattern that matches exactly it: ASCII letters and digits and
    non-ASCII characters as themselves, every other character as ``\\x{hex}``."""
    return "".join(c if c in _ALNUM or ord(c) > 127 else "\\x{%x}" % ord(c) for c in text)


def fits_pattern(parts: Parts) -> str | None:
    """An RE2 pattern (for ``regexp_full_match``) that matches exactly the texts that fit the
    leaf template ``parts`` (:func:`auto.sites.align.extract` is not None), or None when the
    template does not alternate fixed text and slots (then only ``extract`` decides)."""
    for a, b in zip(parts, parts[1:]):
        if (a is SLOT) == (b is SLOT):
            return None
    return "(?s)" + "".join(".*" if p is SLOT else _literal(p) for p in parts)


class _Sql:
    """Runs statements on a DuckDB connection; an error is one :class:`InterchangeError` line
    naming the export."""

    def __init__(self, con: Any, where: str, error: Callable[[str], Exception]) -> None:
        self.con, self.where, self.error = con, where, error

    def run(self, sql: str, params: list | tuple = ()) -> list[tuple]:
        import duckdb

        try:
            return self.con.execute(sql, list(params)).fetchall()
        except duckdb.Error as exc:
            raise self.error(f"{self.where}: {str(exc).splitlines()[0]}") from None

    def register(self, name: str, columns: dict[str, list], types: dict[str, Any]) -> None:
        import pyarrow as pa

        self.con.register(name, pa.table({k: pa.array(v, type=types[k]) for k, v in columns.items()}))


def model_call_census(con: Any, task: bool, params: list, with_inputs: bool,
                      resolve: Callable[[list[Hashable]], dict[Hashable, str]],
                      where: str, error: Callable[[str], Exception]) -> Any:
    """The census of the ``llm`` spans of the views ``spans``, ``requests`` and ``answers`` on
    ``con`` (:func:`auto.interchange.parquet.census_parquet` creates them).

    Args:
        task, params: whether the census is of one task, and the SQL parameters
            (:func:`auto.store.census_sql.census_params` of the task and ``"llm"``).
        with_inputs: collect the per-input rows (``resolve`` reads payload texts by digest).
        where, error: what an error names, and the exception it becomes.

    Raises:
        the ``error`` exception: DuckDB failed, or an answer is missing from ``answers.parquet``.
    """
    db = _Sql(con, where, error)
    names = ", ".join("'" + n.replace("'", "''") + "'" for n in MODEL_CALL_SPANS)
    db.run("CREATE OR REPLACE TEMP TABLE mc AS " + model_call_census_sql(task, ordered=False), params)
    db.run("CREATE OR REPLACE TEMP TABLE mc_req AS SELECT DISTINCT COALESCE(m.task, '') AS gtask, m.name, "
           "m.input_id, q.shape, q.leaves_key FROM mc m JOIN requests q ON q.digest = m.input_id "
           f"WHERE m.name IN ({names})")
    db.run("CREATE OR REPLACE TEMP VIEW leaf AS SELECT digest, l.path AS path, l.role AS role, l.text AS text "
           "FROM (SELECT digest, unnest(leaves) AS l FROM requests)")

    groups = _groups(db)
    part_of = _parts(db, groups)
    templates = _templates(db)
    sites = _sites(db, part_of, groups, templates)
    spans_of = _observations(db, where, error)
    cobs = "  SELECT site, input_id, task, kind, status, output_id, n, first_ns FROM mc_obs"
    if with_inputs:
        c = _with_inputs(db, cobs, sites, resolve)
    else:
        c = census_from_site_rows(db.run("WITH " + site_aggregate_sql(cobs)))
    for sc in c.sites:
        if sc.site in sites:
            sc.model_call = dataclasses.replace(sites[sc.site], requests=spans_of.get(sc.site, 0)).describe()
    return c


def _groups(db: _Sql) -> dict[tuple, tuple[dict, list[str]]]:
    """``{(task, span name, shape): (skeleton, leaf paths)}`` of the requests in ``mc_req``, read
    from one member of each group."""
    groups: dict[tuple, tuple[dict, list[str]]] = {}
    rep_of: dict[str, list[tuple]] = {}
    for gtask, name, shape, digest in db.run("SELECT gtask, name, shape, min(input_id) FROM mc_req "
                                             "GROUP BY gtask, name, shape"):
        rep_of.setdefault(digest, []).append((gtask, name, shape))
    if rep_of:
        for digest, skeleton, leaves in db.run("SELECT digest, skeleton, leaves FROM requests WHERE digest IN "
                                               f"({','.join('?' * len(rep_of))})", list(rep_of)):
            for key in rep_of[digest]:
                groups[key] = (json.loads(skeleton), [lf["path"] for lf in leaves])
    return groups


def _parts(db: _Sql, groups: dict[tuple, tuple[dict, list[str]]]) -> dict[int, tuple]:
    """Split each group by the leaf paths whose distinct texts split it (:func:`split_paths`):
    creates ``mc_pid`` (each request's part id) and ``mc_leaf`` (each part's distinct leaf texts);
    returns ``{part id: (task, span name, shape)}``."""
    import pyarrow as pa

    # each group's distinct leaf texts; the paths that split a group, then the parts
    db.run("CREATE OR REPLACE TEMP TABLE mc_gleaf AS SELECT DISTINCT r.gtask, r.name, r.shape, l.path, l.role, l.text "
           "FROM mc_req r JOIN leaf l ON l.digest = r.input_id")
    roles = ", ".join("'" + r + "'" for r in SPLIT_ROLES)
    counts = {(r[0], r[1], r[2], r[3]): int(r[4]) for r in db.run(
        f"SELECT gtask, name, shape, path, count(*) FROM mc_gleaf WHERE role IN ({roles}) "
        "GROUP BY gtask, name, shape, path")}
    splits: dict[str, list] = {"gtask": [], "name": [], "shape": [], "path": [], "idx": []}
    for (gtask, name, shape), (skeleton, paths) in groups.items():
        for k, p in enumerate(split_paths(skeleton, paths, lambda p: counts.get((gtask, name, shape, p), 0))):
            for col, v in zip(splits, (gtask, name, shape, p, k)):
                splits[col].append(v)
    if splits["path"]:
        db.register("mc_splits", splits, {"gtask": pa.string(), "name": pa.string(), "shape": pa.string(),
                                          "path": pa.string(), "idx": pa.int64()})
        db.run("CREATE OR REPLACE TEMP TABLE mc_pid AS WITH pk AS (SELECT r.gtask, r.name, r.input_id, "
               "list(l.text ORDER BY s.idx) AS pk FROM mc_req r JOIN leaf l ON l.digest = r.input_id "
               "JOIN mc_splits s ON s.gtask = r.gtask AND s.name = r.name AND s.shape = r.shape AND s.path = l.path "
               "GROUP BY r.gtask, r.name, r.input_id) "
               "SELECT r.gtask, r.name, r.input_id, r.shape, r.leaves_key, COALESCE(pk.pk, []::VARCHAR[]) AS pk, "
               "dense_rank() OVER (ORDER BY r.gtask, r.name, r.shape, COALESCE(pk.pk, []::VARCHAR[])) AS pid "
               "FROM mc_req r LEFT JOIN pk ON pk.gtask = r.gtask AND pk.name = r.name AND pk.input_id = r.input_id")
        db.run("CREATE OR REPLACE TEMP TABLE mc_leaf AS SELECT DISTINCT p.pid, l.path, l.text FROM mc_pid p "
               "JOIN leaf l ON l.digest = p.input_id")
    else:  # one part per group: its leaf texts are the group's
        db.run("CREATE OR REPLACE TEMP TABLE mc_pid AS SELECT gtask, name, input_id, shape, leaves_key, "
               "dense_rank() OVER (ORDER BY gtask, name, shape) AS pid FROM mc_req")
        db.run("CREATE OR REPLACE TEMP TABLE mc_leaf AS SELECT p.pid, g.path, g.text FROM mc_gleaf g JOIN "
               "(SELECT DISTINCT pid, gtask, name, shape FROM mc_pid) p "
               "ON p.gtask = g.gtask AND p.name = g.name AND p.shape = g.shape")
    db.run("DROP TABLE mc_gleaf")
    part_of = {int(r[0]): (r[1], r[2], r[3]) for r in db.run("SELECT DISTINCT pid, gtask, name, shape FROM mc_pid")}
    return part_of


def _templates(db: _Sql) -> dict[tuple, Parts]:
    """``{(part id, leaf path): template}`` of every part's leaves (:func:`template_candidate`
    on what alignment needs, computed in SQL; a candidate that needs it is checked against every
    leaf text, and one that fails is a slot)."""
    stats = {(int(r[0]), r[1]): (int(r[2]), int(r[3]), r[4]) for r in db.run(
        "SELECT pid, path, count(*), max(length(text)), min(text) FROM mc_leaf GROUP BY pid, path")}
    samples: dict[tuple, list[str]] = {}
    for pid, path, text in db.run(
            "SELECT pid, path, text FROM (SELECT pid, path, text, row_number() OVER (PARTITION BY pid, path "
            "ORDER BY sha256(text)) AS k FROM mc_leaf WHERE (pid, path) IN (SELECT pid, path FROM mc_leaf "
            "GROUP BY pid, path HAVING count(*) >= ? AND max(length(text)) <= ?)) AS s WHERE k <= ?",
            [MIN_ALIGN_VALUES, MAX_ALIGN_CHARS, MAX_ALIGN_VALUES]):
        samples.setdefault((int(pid), path), []).append(text)
    templates: dict[tuple, Parts] = {}
    check: dict[tuple, Parts] = {}
    for key, (n, longest, only) in stats.items():
        sample = sorted(samples.get(key, ()), key=sample_key)
        parts, needs_check = template_candidate(n, longest, only, sample)
        templates[key] = parts
        if needs_check:
            check[key] = parts
    for key, ok in _check_templates(db, check).items():
        if not ok:
            templates[key] = (SLOT,)
    return templates


def _sites(db: _Sql, part_of: dict[int, tuple], groups: dict[tuple, tuple[dict, list[str]]],
           templates: dict[tuple, Parts]) -> dict[str, Any]:
    """``{site id: site}`` of every part (:func:`build_site`); registers ``mc_site`` (part id ->
    site id)."""
    import pyarrow as pa

    sites: dict[str, Any] = {}
    pid_site: dict[str, list] = {"pid": [], "sid": []}
    for pid, (gtask, name, shape) in sorted(part_of.items()):
        skeleton, paths = groups[(gtask, name, shape)]
        site = build_site(gtask, name, shape, skeleton, {p: templates[(pid, p)] for p in paths}, 0)
        sites[site.id] = site
        pid_site["pid"].append(pid)
        pid_site["sid"].append(site.id)
    db.register("mc_site", pid_site, {"pid": pa.int64(), "sid": pa.string()})
    return sites


def _observations(db: _Sql, where: str, error: Callable[[str], Exception]) -> dict[str, int]:
    """Create ``mc_obs``: every row of ``mc`` under its site, input and output; returns the spans
    read per model-call site.

    Raises:
        the ``error`` exception: an answer is missing from ``answers.parquet``.
    """
    # the request's leaves key and site answer at a model-call site; the recorded site, request and
    # response otherwise; joined once
    db.run("CREATE OR REPLACE TEMP TABLE mc_obs AS SELECT COALESCE(ps.sid, m.site) AS site, "
           "CASE WHEN ps.sid IS NULL THEN m.input_id ELSE p.leaves_key END AS input_id, m.task, "
           f"'{MODEL_CALL_KIND}' AS kind, m.status, "
           "CASE WHEN ps.sid IS NULL THEN m.output_id WHEN m.output_id IS NULL THEN 'null' ELSE a.answer END "
           "AS output_id, m.n, m.first_ns, m.spans, ps.sid IS NOT NULL AS at_site, "
           "ps.sid IS NOT NULL AND COALESCE(m.status, 'ok') = 'ok' AND m.output_id IS NOT NULL AND a.answer IS NULL "
           "AS lost, m.output_id AS raw_output "
           "FROM mc m LEFT JOIN mc_pid p ON p.gtask = COALESCE(m.task, '') AND p.name = m.name "
           "AND p.input_id = m.input_id LEFT JOIN mc_site ps ON ps.pid = p.pid "
           "LEFT JOIN answers a ON a.digest = m.output_id")
    spans_of: dict[str, int] = {}
    for site, spans, lost in db.run("SELECT site, SUM(spans), min(CASE WHEN lost THEN raw_output END) FROM mc_obs "
                                    "WHERE at_site GROUP BY site"):
        if lost is not None:
            raise error(f"{where}: answers.parquet has no row for the model-call output {lost}")
        spans_of[site] = int(spans)
    return spans_of


def _check_templates(db: _Sql, check: dict[tuple, Parts]) -> dict[tuple, bool]:
    """Whether every distinct text of each ``(pid, path)`` fits its template, in one scan."""
    if not check:
        return {}
    out: dict[tuple, bool] = {}
    branches, keys = [], []
    for key, parts in check.items():
        pattern = fits_pattern(parts)
        if pattern is None:  # pragma: no cover - align's templates alternate fixed text and slots
            from auto.sites.align import extract

            texts = db.run("SELECT text FROM mc_leaf WHERE pid = ? AND path = ?", list(key))
            out[key] = all(extract(parts, t[0]) is not None for t in texts)
            continue
        branches.append(f"WHEN {len(keys)} THEN regexp_full_match(t.text, '{pattern}')")
        keys.append(key)
    if keys:
        import pyarrow as pa

        db.register("mc_check", {"cid": list(range(len(keys))), "pid": [k[0] for k in keys],
                                 "path": [k[1] for k in keys]},
                    {"cid": pa.int64(), "pid": pa.int64(), "path": pa.string()})
        for cid, ok in db.run(f"SELECT c.cid, bool_and(CASE c.cid {' '.join(branches)} END) FROM mc_leaf t "
                              "JOIN mc_check c ON c.pid = t.pid AND c.path = t.path GROUP BY c.cid"):
            out[keys[int(cid)]] = bool(ok)
    return out


def _with_inputs(db: _Sql, cobs: str, sites: dict[str, Any],
                 resolve: Callable[[list[Hashable]], dict[Hashable, str]]) -> Any:
    """The model-call census with per-input rows: inputs as slot values, outputs as site answers
    (requests Auto does not understand: their texts, read by ``resolve``)."""
    rows = db.run("WITH " + cobs.replace("  SELECT", "c AS (SELECT", 1) + ") SELECT site, task, kind, input_id, "
                  "status, output_id, SUM(n), MIN(first_ns) FROM c GROUP BY site, task, kind, input_id, status, output_id")
    keys = sorted({r[3] for r in rows if r[0] in sites})
    leaves: dict[tuple, dict[str, str]] = {}
    if keys:
        reps = db.run("SELECT s.sid, p.leaves_key, min(p.input_id) FROM mc_pid p JOIN mc_site s ON s.pid = p.pid "
                      "GROUP BY s.sid, p.leaves_key")
        by_digest: dict[str, list[tuple]] = {}
        for sid, key, digest in reps:
            by_digest.setdefault(digest, []).append((sid, key))
        digests = sorted(by_digest)
        for k in range(0, len(digests), 10_000):
            chunk = digests[k:k + 10_000]
            for digest, lv in db.run(f"SELECT digest, leaves FROM requests WHERE digest IN ({','.join('?' * len(chunk))})",
                                     chunk):
                for sk in by_digest[digest]:
                    leaves[sk] = {x["path"]: x["text"] for x in lv}
    raw = sorted({i for r in rows if r[0] not in sites for i in (r[3], r[5]) if i is not None})
    texts = resolve(raw) if raw else {}
    out = []
    for site, task, kind, input_id, status, output_id, n, first_ns in rows:
        if site in sites:
            values = sites[site].slot_values(leaves[(site, input_id)].items())
            if values is None:  # pragma: no cover - the site's templates fit every request found
                raise AssertionError(f"site {site}: a recorded request does not fit its own template")
            out.append((site, task, kind, canonical_json(values), status, output_id, int(n), first_ns))
        else:
            out.append((site, task, kind, "null" if input_id is None else texts[input_id], status,
                        "null" if output_id is None else texts[output_id], int(n), first_ns))
    out.sort(key=lambda r: (r[0], r[3]))
    return census_from_rows(out, lambda xs: {x: x for x in xs}, True)
