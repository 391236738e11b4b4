"""The census as SQL: the one text every engine's census runs (the store on SQLite and
PostgreSQL, :mod:`auto.interchange.parquet` and :mod:`auto.interchange.duckdb_sites` on DuckDB).

:func:`census_sql` groups a store's spans into observations per (site, input, output);
:func:`census_site_sql` aggregates them per site in the database; :func:`model_call_census_sql`
groups model-call spans by distinct request. Each takes its filters as ``?`` placeholders whose
values :func:`census_params` lists.
"""

from __future__ import annotations

from typing import Any

from auto.store.normalize import SITE_KEY_SQL

_CENSUS_SQL = """
WITH retried AS (
  SELECT DISTINCT logical_call_id AS lid FROM spans
  WHERE attempt > 0 AND logical_call_id IS NOT NULL {and_task}
),
obs AS (
  SELECT {site} AS site, task, kind, name, input_id, status, output_id, started_ns AS first_ns, 1 AS attempts
  FROM spans
  WHERE (logical_call_id IS NULL OR logical_call_id NOT IN (SELECT lid FROM retried)) {and_task}
  UNION ALL
  SELECT site, task, kind, name, input_id, status, output_id, first_ns, attempts FROM (
    SELECT {site} AS site, task, kind, name, input_id, status, output_id,
           MIN(started_ns) OVER (PARTITION BY {site}, logical_call_id) AS first_ns,
           COUNT(*) OVER (PARTITION BY {site}, logical_call_id) AS attempts,
           ROW_NUMBER() OVER (PARTITION BY {site}, logical_call_id
                              ORDER BY attempt DESC, started_ns DESC, span_id DESC) AS rn
    FROM spans WHERE logical_call_id IN (SELECT lid FROM retried) {and_task}
  ) AS last_attempts WHERE rn = 1
)
{final}
"""
"""The census in the database: one row per (site, task, kind, input, status, output) with its
number of logical observations (SDK retries of one model call, sharing ``auto.logical_call_id``,
count once: the last attempt by ``(auto.attempt, started_ns, span_id)``) and the first start time
among them; ordered by site, then input. The same SQL runs on SQLite, PostgreSQL and DuckDB."""

_CENSUS_FINAL = """SELECT site, task, kind, input_id, status, output_id, count(*) AS n, MIN(first_ns) AS first_ns
FROM obs
GROUP BY site, input_id, task, kind, status, output_id
ORDER BY site, input_id"""

_MODEL_CALL_FINAL = """SELECT site, task, name, input_id, status, output_id, count(*) AS n, MIN(first_ns) AS first_ns,
       SUM(attempts) AS spans
FROM obs
GROUP BY site, task, name, input_id, status, output_id"""

_MODEL_CALL_ORDER = "\nORDER BY task, name, input_id, site"

_SITE_AGGREGATE = """cobs AS (
{cobs}
),
per_out AS (
  SELECT site, input_id, task, kind, ok, out_id, SUM(n) AS n, MIN(first_ns) AS first_ns FROM (
    SELECT site, input_id, task, kind,
           CASE WHEN COALESCE(status, 'ok') = 'ok' THEN 1 ELSE 0 END AS ok,
           CASE WHEN COALESCE(status, 'ok') = 'ok' THEN output_id END AS out_id, n, first_ns
    FROM cobs) AS o
  GROUP BY site, input_id, task, kind, ok, out_id
),
per_input AS (
  SELECT site, SUM(n) AS obs, SUM(CASE WHEN ok = 0 THEN n ELSE 0 END) AS errors,
         COUNT(DISTINCT out_id) + MAX(CASE WHEN ok = 1 AND out_id IS NULL THEN 1 ELSE 0 END) AS outs
  FROM per_out GROUP BY site, input_id
)
SELECT site, obs, errors, outs, count(*) AS inputs, NULL AS task, NULL AS kind, NULL AS first_ns
FROM per_input GROUP BY site, obs, errors, outs
UNION ALL
SELECT site, NULL, NULL, NULL, NULL, task, kind, MIN(first_ns) FROM per_out GROUP BY site, task, kind"""
"""The census per site, aggregated in the database from observations ``cobs`` (columns ``site,
input_id, task, kind, status, output_id, n, first_ns``: ``n`` observations): one row ``(site,
obs, errors, outs, inputs, NULL, NULL, NULL)`` per site and distinct ``(observations, errors,
distinct successful outputs)`` of its inputs, with the number of inputs that have them, and one
row ``(site, NULL, NULL, NULL, NULL, task, kind, first_ns)`` per site, task and kind with its
earliest observation (:func:`auto.census.census_from_site_rows` folds them). A successful
observation whose output is JSON null (``output_id`` NULL) is a distinct output of its own."""


def census_sql(task: bool, exclude_kind: bool = False) -> str:
    """:data:`_CENSUS_SQL` with or without the ``task = ?`` and ``kind <> ?`` filters (each
    placeholder three times: :func:`census_params`)."""
    conds = ("AND task = ? " if task else "") + ("AND kind <> ?" if exclude_kind else "")
    return _CENSUS_SQL.format(site=SITE_KEY_SQL, and_task=conds, final=_CENSUS_FINAL)


def site_aggregate_sql(cobs: str) -> str:
    """:data:`_SITE_AGGREGATE` over the observations ``cobs`` (a ``SELECT``): common table
    expressions and the final ``SELECT``, to follow ``WITH`` or a comma in a ``WITH`` list."""
    return _SITE_AGGREGATE.format(cobs=cobs)


def census_site_sql(task: bool, exclude_kind: bool = False) -> str:
    """The census per site (:data:`_SITE_AGGREGATE`) of the spans :func:`census_sql` reads, with
    the same filters and parameters (:func:`census_params`); no row per input leaves the database."""
    conds = ("AND task = ? " if task else "") + ("AND kind <> ?" if exclude_kind else "")
    cobs = "  SELECT site, input_id, task, kind, status, output_id, 1 AS n, first_ns FROM obs"
    return _CENSUS_SQL.format(site=SITE_KEY_SQL, and_task=conds, final=",\n" + site_aggregate_sql(cobs))


TIER1_SPAN = "auto.tier1"
"""The span name of a recorded tier-1 answer (``auto proxy`` records one per answer, kind
``llm``, marked ``auto.tier = 1``). It is not an observation of its site: the census leaves it
out (:func:`model_call_census_sql`) and site discovery reads only
:data:`auto.sites.discover.MODEL_CALL_SPANS`, so an artifact's own answers are never its
witnesses."""


def model_call_census_sql(task: bool, ordered: bool = True) -> str:
    """The census's observations of one span kind (``kind = ?``; ``task = ?`` first when
    ``task``: :func:`census_params`), grouped by distinct request instead of by site: one row
    ``(site, task, name, input_id, status, output_id, n, first_ns, spans)`` per recorded site key,
    task, span name, request, status and response (``spans``: the spans of those ``n`` logical
    observations, retried attempts included), ordered by task, name, then request (what
    :func:`auto.census.census_model_calls` folds into model-call sites); ``ordered=False``
    leaves out the ``ORDER BY``. Tier-1 answers (:data:`TIER1_SPAN`) are not observations and
    are left out."""
    conds = ("AND task = ? " if task else "") + f"AND kind = ? AND name <> '{TIER1_SPAN}'"
    final = _MODEL_CALL_FINAL + (_MODEL_CALL_ORDER if ordered else "")
    return _CENSUS_SQL.format(site=SITE_KEY_SQL, and_task=conds, final=final)


def census_params(task: str | None, exclude_kind: str | None = None) -> list[Any]:
    """The parameters of :func:`census_sql` ``(task is not None, exclude_kind is not None)``."""
    one = [v for v in (task, exclude_kind) if v is not None]
    return one * 3

