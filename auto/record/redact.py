"""Redaction: what of a recording's secrets never reaches the store.

Every span a :class:`~auto.record.core.Recorder` writes (model-call, task and tool spans alike)
goes through one :class:`Redactor` first, and the store redacts again at ingest, for every writer
(:mod:`auto.store.redaction`). In the span's ``name``, ``task``, ``site``, ``input``, ``output``,
``error`` and ``attributes`` (keys and values, at any depth) each secret is replaced by ``[REDACTED]``:

* **by value** — the credentials of the model calls made so far (the values of credential
  request headers, the token inside ``Bearer <token>``, the client's ``api_key``:
  :func:`secrets_of`, learned by :meth:`Redactor.learn`), and the values of the environment
  variables whose names say they hold a secret (:func:`is_secret_name`: a ``_``-separated part
  of the name ending in KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE or CREDENTIAL(S), or a
  last part AUTH, SK, PASS, PWD or PAT),
  read at each write. Values shorter than :data:`MIN_SECRET_LEN` are left alone (they would
  redact ordinary text);
* **by pattern** — the well-known key formats: the patterns of the regex detectors of the
  ``detect-secrets`` package (:data:`DETECT_SECRETS_PLUGINS`: AWS, Azure storage, GitHub, GitLab, Slack, Stripe,
  SendGrid, PyPI, npm, Discord, Mailchimp, Square, OpenAI's marked keys, credentials in URLs),
  plus :data:`PATTERNS` for the formats it does not cover or covers only in part: OpenAI and
  Anthropic ``sk-…`` keys without the legacy marker, whole PEM private-key blocks (the package
  matches the header line only), JSON Web Tokens with their signature (its match stops before
  it), bearer tokens, GitHub fine-grained ``github_pat_…`` tokens and AWS secret access keys
  after their name, quoted or not.

Each string is scanned once for every pattern (:class:`SecretScanner`): one regex made of each
pattern's anchor literals (:func:`anchors`) is searched through the string lower-cased, and a
pattern runs only near where one of its anchors occurs (a string without any costs that one scan);
a string found free of every pattern is remembered for the process (:data:`CLEAN_CACHE`), so the
system prompt and the headers a site repeats on every call are scanned once.

A span with redactions carries ``auto.redactions`` (how many occurrences were replaced) and
``auto.redacted`` (the sorted fields that held them, e.g. ``["input", "output"]``); a compile
leaves a task witness out when its input or output was redacted
(:func:`auto.compile.witnesses.is_redacted`), so the placeholder is never learned as an answer.

Headers: those whose name carries credentials (:data:`SECRET_HEADER`) are dropped; the account
headers (:data:`DIGEST_HEADERS`) are kept as a digest of their value (:func:`sanitize_headers`).
"""

from __future__ import annotations

import collections
import functools
import os
import re
import threading
from typing import Any, Iterable

from auto.canonical import digest

REDACTED = "[REDACTED]"
SECRET_HEADER = re.compile(r"authorization|api[-_]?key|cookie|secret|passw(?:or)?d|(?:^|[-_])(?:token|key)$", re.I)
"""Header names that carry credentials (dropped): ``Authorization``, ``Proxy-Authorization``,
``api-key``, ``X-Api-Key``, ``Cookie``, ``Set-Cookie``, any name holding ``secret`` or
``password``, any name whose last ``-``/``_`` part is ``key`` (Azure API Management's
``Ocp-Apim-Subscription-Key``, ``X-Goog-Api-Key``), and any whose last part is ``token`` (``X-Auth-Token``,
``X-Access-Token``, ``X-Api-Token``, ``X-Amz-Security-Token``; not OpenAI's
``x-ratelimit-remaining-tokens``)."""

DIGEST_HEADERS = frozenset({"openai-organization", "openai-project"})
"""Headers that name the account: kept as ``sha256:…`` of their value, never the value."""

MIN_SECRET_LEN = 6
"""Shorter secret values are not redacted by value."""

MIN_ENV_SECRET_LEN = 8
"""Shorter values of secret-named environment variables are not redacted (``1``, ``true``…)."""

SECRET_NAME_ENDINGS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS")
"""An environment variable holds a secret when a ``_``-separated part of its name ends in one of
these (``OPENAI_API_KEY``, ``GITHUB_TOKEN``, ``PGPASSWORD``; not ``TOKENIZERS_PARALLELISM``)."""

SECRET_NAME_LAST_PARTS = ("AUTH", "SK", "PASS", "PWD", "PAT")
"""… or when the last ``_``-separated part of a name of two parts or more is one of these
(``GITHUB_AUTH``, ``STRIPE_SK``, ``DB_PASS``, ``MYSQL_PWD``, ``GH_PAT``; not ``PWD`` itself, the
working directory, nor ``SSH_AUTH_SOCK``, nor ``AUTO_TASK``)."""

DETECT_SECRETS_PLUGINS = (
    "AWSKeyDetector", "AzureStorageKeyDetector", "BasicAuthDetector", "DiscordBotTokenDetector",
    "GitHubTokenDetector", "GitLabTokenDetector", "MailchimpDetector", "NpmDetector", "OpenAIDetector",
    "PypiTokenDetector", "SendGridDetector", "SlackDetector", "SquareOAuthDetector", "StripeDetector",
)
"""The ``detect-secrets`` detectors whose ``denylist`` patterns are used. Left out:
entropy and keyword heuristics (they would redact digests and ordinary words), public IPs,
formats prone to false matches in prose (Artifactory, Twilio, Telegram) and the private-key
and JWT detectors (replaced by whole-block patterns in :data:`PATTERNS`)."""

PATTERNS = (
    # OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-) and Anthropic (sk-ant-api03-) keys: a word
    # starting with sk- and 20+ key characters, at least one a digit, or (a key of letters
    # only) up to two lower-case marker words then a run of 32+ key characters with no hyphen;
    # hyphenated words such as "sk-learn-compatible-estimators" stay
    re.compile(r"(?<![\w-])sk-(?:(?=[\w-]*\d)[\w-]{20,}|(?:[a-z]+-){0,2}\w{32,}[\w-]*)", re.ASCII),
    # PEM private keys, the whole block (to the end of the text when the END line is missing)
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
               re.DOTALL),
    re.compile(r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC: *[0-9a-fA-F]+|\Z)", re.DOTALL),
    # JSON Web Tokens: header.payload.signature (base64url; both JSON parts start with eyJ)
    re.compile(r"eyJ[\w-]+={0,2}\.eyJ[\w-]+={0,2}\.[\w.+/=-]*", re.ASCII),
    # bearer tokens (the token only)
    re.compile(r"(?i)(?<![\w-])bearer\s+([\w.~+/-]{16,}=*)", re.ASCII),
    # GitHub fine-grained personal access tokens (github_pat_ + 22 + _ + 59 characters; the
    # plugin knows only the classic ghp_/gho_/… prefixes)
    re.compile(r"(?<![\w-])github_pat_[A-Za-z0-9_]{22,255}", re.ASCII),
    # an AWS secret access key after its name, quoted or not (``aws_secret_access_key = …`` of an
    # AWS credentials file, an env assignment, a JSON ``"SecretAccessKey": "…"``; the plugin
    # needs quotes): the 40-character value only
    re.compile(r"(?:(?:aws_)?secret_access_key|(?:AWS_)?SECRET_ACCESS_KEY|SecretAccessKey)[\"']?\s*[:=]\s*[\"']?"
               r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", re.ASCII),
)
"""Patterns for the formats :data:`DETECT_SECRETS_PLUGINS` misses (the secret of a match: see
:func:`_secret_of`)."""

MIN_PATTERN_TEXT = 16
"""Texts shorter than this are not scanned by pattern (no recognised format is that short)."""

CLEAN_CACHE = 8_000_000
"""Characters (in all) of the strings a :class:`Redactor` remembers as free of any pattern match
(then it forgets them at once); a string longer than 1/16 of this is scanned every time."""


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret (:data:`SECRET_NAME_ENDINGS`;
    cached per name: it is asked for every variable at every write)."""
    parts = [p for p in re.split(r"[^A-Z0-9]+", name.upper()) if p]
    return any(p.endswith(SECRET_NAME_ENDINGS) for p in parts) or (len(parts) >= 2 and parts[-1] in SECRET_NAME_LAST_PARTS)


_ENV_CACHE: tuple[Any, frozenset[str]] | None = None


def env_secrets(environ: Any = None) -> set[str]:
    """The values (≥ :data:`MIN_ENV_SECRET_LEN` characters) of the secret-named environment
    variables of ``environ`` (default ``os.environ``; its result is reused while the process
    environment is unchanged: compared by its raw items, which costs no decoding)."""
    global _ENV_CACHE
    if environ is None:
        raw = getattr(os.environ, "_data", None)
        key = tuple(raw.items()) if isinstance(raw, dict) else None
        cached = _ENV_CACHE
        if key is not None and cached is not None and cached[0] == key:
            return set(cached[1])
        found = {v for k, v in list(os.environ.items()) if v and len(v) >= MIN_ENV_SECRET_LEN and is_secret_name(k)}
        if key is not None:
            _ENV_CACHE = (key, frozenset(found))
        return found
    return {v for k, v in list(environ.items()) if v and len(v) >= MIN_ENV_SECRET_LEN and is_secret_name(k)}


class RawHeaders:
    """A snapshot of an ``httpx`` ``Headers``: its class and raw ``(name, value)`` byte pairs
    (:attr:`raw`, made on first read from the ``(name, lower-cased name, value)`` triples copied
    when the snapshot was taken), decoded only when read (:func:`header_items` rebuilds the
    headers from them)."""

    __slots__ = ("kind", "_raw", "_triples")

    def __init__(self, kind: type, raw: list[tuple[bytes, bytes]] | None = None,
                 triples: list[tuple[bytes, bytes, bytes]] | None = None) -> None:
        self.kind, self._raw, self._triples = kind, raw, triples

    @property
    def raw(self) -> list[tuple[bytes, bytes]]:
        if self._raw is None:
            self._raw = [(k, v) for k, _lk, v in self._triples or ()]
        return self._raw


def snapshot_headers(headers: Any) -> Any:
    """What :func:`header_items` reads from ``headers`` as they are now: a :class:`RawHeaders`
    of an ``httpx`` ``Headers`` (a copy of its list of byte triples — one list copy on the
    calling thread, nothing decoded — or of its byte pairs), else their pairs."""
    kind = type(headers)
    triples = getattr(headers, "_list", None)
    if type(triples) is list and _httpx_like(kind) and (not triples or len(triples[0]) == 3):
        return RawHeaders(kind, None, triples[:])  # (tuples: the copy is a snapshot)
    raw = getattr(headers, "raw", None)
    if isinstance(raw, list) and hasattr(kind, "encoding"):  # (its encoding is not worked out here)
        return RawHeaders(kind, raw)
    return list(header_items(headers))


@functools.lru_cache(maxsize=64)
def _httpx_like(kind: type) -> bool:
    """Whether a headers class has an ``encoding`` (as ``httpx``'s ``Headers``; cached per class)."""
    return hasattr(kind, "encoding")


def header_items(headers: Any) -> Any:
    """``(name, value)`` string pairs of headers: an ``httpx`` ``Headers`` or a
    :class:`RawHeaders` (as ``httpx``'s ``items()`` gives them: lower-cased names, the values of
    a repeated name joined by ``", "``; read from the raw bytes without its per-header decoding
    cost), another mapping (its ``items()``) or pairs (as they are)."""
    if isinstance(headers, RawHeaders):
        out: dict[str, str] = {}
        try:  # ASCII: what every header encoding makes of it
            for k, v in headers.raw:
                k, v = k.lower().decode("ascii"), v.decode("ascii")
                out[k] = f"{out[k]}, {v}" if k in out else v
        except UnicodeDecodeError:  # httpx works out the encoding of the others
            return header_items(headers.kind(headers.raw))
        return out.items()
    else:
        raw = getattr(headers, "raw", None)
        if not (isinstance(raw, list) and isinstance(getattr(headers, "encoding", None), str)):
            return headers.items() if hasattr(headers, "items") else headers
        enc = headers.encoding
    out = {}
    for k, v in raw:
        k, v = k.lower().decode(enc), v.decode(enc)
        out[k] = f"{out[k]}, {v}" if k in out else v
    return out.items()


def sanitize_headers(headers: Any) -> dict[str, str]:
    """Headers (a mapping or ``(name, value)`` pairs: :func:`header_items`) as a lower-cased dict
    without any whose name carries credentials (:data:`SECRET_HEADER`), and the account headers
    (:data:`DIGEST_HEADERS`) as digests of their values."""
    if isinstance(headers, RawHeaders):
        try:
            return _sanitize_ascii(headers.raw)
        except UnicodeDecodeError:  # not ASCII: read as httpx reads it
            headers = headers.kind(headers.raw)
    out: dict[str, str] = {}
    for k, v in header_items(headers):
        k, rule = header_rule(k)
        if rule == _DROP:
            continue
        out[k] = digest(str(v)) if rule == _DIGEST else str(v)
    return out


def _sanitize_ascii(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """:func:`sanitize_headers` of ASCII raw header pairs in one pass (a name's rule cached;
    raises ``UnicodeDecodeError`` at the first byte that is not ASCII)."""
    out: dict[str, str] = {}
    digested = None
    for k, v in raw:
        name, rule = ascii_header_rule(k)
        if rule == _DROP:
            continue
        v = v.decode("ascii")
        out[name] = f"{out[name]}, {v}" if name in out else v  # a repeated name joined, as httpx does
        if rule == _DIGEST:
            digested = (digested or set()) | {name}
    for name in digested or ():
        out[name] = digest(out[name])
    return out


_KEEP, _DROP, _DIGEST = 0, 1, 2


@functools.lru_cache(maxsize=4096)
def ascii_header_rule(name: bytes) -> tuple[str, int]:
    """:func:`header_rule` of a raw ASCII header name (cached per name: not decoded again)."""
    return header_rule(name.decode("ascii"))


@functools.lru_cache(maxsize=4096)
def header_rule(name: Any) -> tuple[str, int]:
    """``(lower-cased name, rule)`` of a header name: dropped (:data:`SECRET_HEADER`), kept as a
    digest (:data:`DIGEST_HEADERS`) or kept (cached per name: asked for every header of every
    model call)."""
    k = str(name).lower()
    if SECRET_HEADER.search(k):
        return k, _DROP
    return k, _DIGEST if k in DIGEST_HEADERS else _KEEP


def secrets_of(request: Any, client: Any, headers: Any = None) -> list[str]:
    """The secrets of one HTTP request (an ``httpx`` request) sent by ``client`` (an ``openai``
    client): credential header values, the token of ``Bearer <token>``, the client's
    ``api_key``; longest first, so a token is scrubbed before a prefix of it. ``headers``: the
    request's :func:`snapshot_headers` when the caller has them already."""
    key = getattr(client, "__dict__", {}).get("api_key")
    return credential_secrets(request.headers if headers is None else headers, key if isinstance(key, str) else None)


def credential_secrets(headers: Any, api_key: str | None = None) -> list[str]:
    """:func:`secrets_of` from a request's headers (or their :func:`snapshot_headers`) and the
    client's ``api_key``."""
    found: list[str] = []
    raw = getattr(headers, "raw", None)
    values: list[str] | None = None
    if isinstance(raw, list):
        # ASCII names and values read as they are (what every header encoding makes of them),
        # only the credential headers' values decoded; a name's rule is cached
        values = []
        for k, v in raw:
            if not k.isascii():
                values = None
                break
            if v and ascii_header_rule(k)[1] == _DROP:
                if not v.isascii():
                    values = None
                    break
                values.append(v.decode("ascii"))
        if values is not None and len(values) > 1:
            values = None  # a repeated name counts as one value, joined as httpx joins it
    if values is None:
        values = [str(v) for k, v in header_items(headers) if v and header_rule(k)[1] == _DROP]
    for v in values:
        found.append(v)
        if " " in v:
            found.append(v.split(" ", 1)[1].strip())
    if api_key:
        found.append(api_key)
    return sorted({s for s in found if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)


_PLUGIN_PATTERNS: list[re.Pattern] | None = None
_PLUGINS_LOCK = threading.Lock()


def plugin_patterns() -> list[re.Pattern]:
    """The ``denylist`` regexes of the :data:`DETECT_SECRETS_PLUGINS` (imported on first use, so
    recording starts lazily)."""
    global _PLUGIN_PATTERNS
    with _PLUGINS_LOCK:
        if _PLUGIN_PATTERNS is None:
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

            by_name = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
            _PLUGIN_PATTERNS = [rx for n in DETECT_SECRETS_PLUGINS if n in by_name
                                for rx in getattr(by_name[n], "denylist", ())]
        return _PLUGIN_PATTERNS


def _secret_of(m: re.Match) -> str:
    """The secret of a match: its longest group of at least :data:`MIN_ENV_SECRET_LEN` characters
    (a password in a URL, a key after its keyword), else the whole match (a group that is only a
    prefix, like ``ghp`` of a GitHub token, is not the secret)."""
    groups = [g for g in m.groups() if isinstance(g, str) and len(g) >= MIN_ENV_SECRET_LEN]
    return max(groups, key=len) if groups else m.group(0)


def required_literals(rx: re.Pattern) -> tuple[str, ...] | None:
    """Texts one of which occurs in every text that ``rx`` matches in, or None when none is
    known. Read from the parsed pattern (Python's own ``re`` parser): a run of plain literals at
    its top level (inside groups, and inside repeats of at least one), or one such run per branch
    of an alternation there; the longest is kept. Case-insensitive patterns, and parts, have none
    (their case folding is the regex engine's)."""
    try:
        from re import _constants as c
        from re import _parser
        tree = _parser.parse(rx.pattern, rx.flags)
    except Exception:  # noqa: BLE001 - another Python's parser: no prefilter, the pattern runs
        return None
    if (tree.state.flags | rx.flags) & re.IGNORECASE:
        return None
    repeats = tuple(getattr(c, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(c, n))

    def runs(items: Any) -> list[tuple[str, ...]]:
        out: list[tuple[str, ...]] = []
        run: list[str] = []
        for op, av in items:
            if op is c.LITERAL:
                run.append(chr(av))
                continue
            if run:
                out.append(("".join(run),))
                run = []
            if op is c.SUBPATTERN and not av[1] & re.IGNORECASE:
                out.extend(runs(av[3]))
            elif op is c.BRANCH:
                alts = [best(runs(b)) for b in av[1]]
                if all(a is not None for a in alts):
                    out.append(tuple(x for a in alts for x in a))  # type: ignore[union-attr]
            elif op in repeats and av[0] >= 1:
                out.extend(runs(av[2]))
            elif op is getattr(c, "ATOMIC_GROUP", None):
                out.extend(runs(av))
        if run:
            out.append(("".join(run),))
        return out

    def best(conds: list[tuple[str, ...]]) -> tuple[str, ...] | None:
        return max(conds, key=lambda alts: min(len(a) for a in alts), default=None)

    try:
        return best(runs(tree))
    except Exception:  # noqa: BLE001 - a node this reading does not know: no prefilter
        return None


_PREFILTERED: tuple[tuple[re.Pattern, tuple[str, ...] | None], ...] | None = None


def prefiltered_patterns() -> tuple[tuple[re.Pattern, tuple[str, ...] | None], ...]:
    """``(pattern, required literals or None)`` of :data:`PATTERNS` and the plugins' patterns
    (:func:`required_literals`; computed once)."""
    global _PREFILTERED
    if _PREFILTERED is None:
        _PREFILTERED = tuple((rx, required_literals(rx)) for rx in (*PATTERNS, *plugin_patterns()))
    return _PREFILTERED


def anchors(rx: re.Pattern) -> tuple[tuple[str, int | None], ...] | None:
    """``((literal, before), …)`` such that every match of ``rx`` contains one of the literals,
    and starts at most ``before`` characters ahead of it (None: no bound known), or None when no
    such literals are known. Read from the parsed pattern (Python's own ``re`` parser) as
    :func:`required_literals` reads it, with the widths of what precedes each literal run at the
    top level of the pattern (in a group, a branch, or the first turn of a repeat of at least
    one). Literals of a case-insensitive pattern (or part) are compared case-insensitively by
    :class:`SecretScanner`."""
    try:
        from re import _constants as c
        from re import _parser
        tree = _parser.parse(rx.pattern, rx.flags)
    except Exception:  # noqa: BLE001 - another Python's parser: the pattern runs on every text
        return None
    repeats = tuple(getattr(c, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(c, n))

    def width(op: Any, av: Any) -> int | None:
        w = _parser.SubPattern(tree.state, [(op, av)]).getwidth()[1]
        return None if w >= c.MAXREPEAT else w

    def add(x: int | None, y: int | None) -> int | None:
        return None if x is None or y is None else x + y

    def cands(items: Any, base: int | None) -> list[tuple[tuple[str, int | None], ...]]:
        """Each candidate: alternatives ``(literal, before)``, one of which is in every match."""
        out: list[tuple[tuple[str, int | None], ...]] = []
        run: list[str] = []
        run_at: int | None = base
        off: int | None = base
        for op, av in items:
            if op is c.LITERAL:
                if not run:
                    run_at = off
                run.append(chr(av))
                off = add(off, 1)
                continue
            if run:
                out.append((("".join(run), run_at),))
                run = []
            if op is c.SUBPATTERN:
                out.extend(cands(av[3], off))
            elif op is c.BRANCH:
                alts = [best(cands(b, off)) for b in av[1]]
                if all(a is not None for a in alts):
                    out.append(tuple(x for a in alts for x in a))  # type: ignore[union-attr]
            elif op in repeats and av[0] >= 1:
                out.extend(cands(av[2], off))
            elif op is getattr(c, "ATOMIC_GROUP", None):
                out.extend(cands(av, off))
            off = add(off, width(op, av))
        if run:
            out.append((("".join(run), run_at),))
        return out

    def best(cs: list[tuple[tuple[str, int | None], ...]]) -> tuple[tuple[str, int | None], ...] | None:
        # literals of 3 characters or more first (rarer), of them those with a bound (the
        # pattern then runs near each occurrence), then the longest
        def key(alts: tuple[tuple[str, int | None], ...]) -> tuple[bool, bool, int]:
            shortest = min(len(lit) for lit, _b in alts)
            return shortest >= 3, all(b is not None for _l, b in alts), shortest

        return max(cs, key=key, default=None)

    try:
        got = best(cands(tree, 0))
    except Exception:  # noqa: BLE001 - a node this reading does not know: the pattern runs on every text
        return None
    # a one-character anchor occurs too often to help: the regex engine's own scan is faster
    return got if got is not None and min(len(lit) for lit, _b in got) >= 2 else None


def reach(rx: re.Pattern) -> int | None:
    """How many characters from where a match of ``rx`` starts its matcher may read at most: its
    widest match, plus the widest text of each lookahead in it, plus one (for a word boundary or
    end test); None when unbounded or unknown."""
    try:
        from re import _constants as c
        from re import _parser
        tree = _parser.parse(rx.pattern, rx.flags)
        total = tree.getwidth()[1]
        ahead = 0

        def walk(items: Any) -> None:
            nonlocal ahead
            for op, av in items:
                if op in (c.ASSERT, c.ASSERT_NOT) and av[0] == 1:
                    ahead += _parser.SubPattern(tree.state, list(av[1])).getwidth()[1]
                for part in av if isinstance(av, (tuple, list)) else ():
                    if isinstance(part, _parser.SubPattern):
                        walk(part)
                    elif isinstance(part, list):
                        for q in part:
                            if isinstance(q, _parser.SubPattern):
                                walk(q)
                if isinstance(av, _parser.SubPattern):
                    walk(av)

        walk(tree)
    except Exception:  # noqa: BLE001 - unknown: unbounded
        return None
    return None if total >= c.MAXREPEAT or ahead >= c.MAXREPEAT else total + ahead + 1


_FOLD = {0x17F: "s", 0x131: "i", 0x130: "i"}
"""What ``str.lower`` leaves, or makes two characters of, that the regex engine's case-insensitive
matching takes for an ASCII letter (long s, dotless i, dotted capital I)."""

MATCH_STARTS = 4
"""A pattern whose match starts at most this many characters ahead of its anchor is tried with
``match`` at each such start; one whose match may start further ahead is searched in a window
(:class:`SecretScanner`)."""


class SecretScanner:
    """Finds the matches of many patterns in a text in one scan for all of them.

    One regex made of every pattern's :func:`anchors` (an alternation of literals, longest
    first; a case-insensitive pattern's literals case-insensitively) is searched through the text
    once, at every position where one starts; a pattern then runs only at the few start positions
    its anchors allow (``rx.match`` from ``before`` characters ahead of each occurrence up to
    it), so a text in which no anchor occurs costs one scan and no pattern runs. A pattern
    without anchors, or with an anchor whose ``before`` is unbounded, is searched through the
    whole text where its anchor occurs (or always, without anchors). The matches are those of
    the pattern's own ``finditer`` where they do not overlap; where two would overlap, both are
    reported (a secret is never missed for another)."""

    def __init__(self, patterns: Iterable[re.Pattern]) -> None:
        self.patterns = tuple(patterns)
        self._reach = [reach(rx) for rx in self.patterns]
        # lower-cased literal -> [(literal as written, compared case-insensitively, [(pattern, before)])]
        lits: dict[str, dict[tuple[str, bool], list[tuple[int, int | None]]]] = {}
        self.always: list[int] = []  # patterns searched through every text
        for i, rx in enumerate(self.patterns):
            anc = anchors(rx)
            if not anc:
                self.always.append(i)
                continue
            folded = bool(rx.flags & re.IGNORECASE)
            for lit, before in anc:
                lits.setdefault(lit.lower(), {}).setdefault((lit, folded), []).append((i, before))
        self._entries = {low: [(lit, folded, uses) for (lit, folded), uses in d.items()] for low, d in lits.items()}
        keys = sorted(lits, key=lambda k: (-len(k), k))
        # the shorter literals that start where a longer one does (its prefixes)
        self._also = {k: [j for j in keys if j != k and k.startswith(j)] for k in keys}
        # one alternation of plain literals: the regex engine scans for it in one pass (capture
        # groups or scoped flags would make it try every branch at every position instead)
        self._trigger = re.compile("|".join(re.escape(k) for k in keys)) if keys else None

    def _anchored(self, text: str) -> Any:
        """``(position, lower-cased literal)`` of every occurrence of an anchor in ``text``
        (overlapping ones too), found in one scan of the text lower-cased (a case-sensitive
        anchor is then checked as written); None when lower-casing changes the text's length
        (then every pattern is searched through the text)."""
        low = (text if text.isascii() else text.translate(_FOLD)).lower()
        if len(low) != len(text):
            return None
        out = []
        search = self._trigger.search  # type: ignore[union-attr]
        pos, n = 0, len(low)
        while pos < n:
            m = search(low, pos)
            if m is None:
                break
            at, g = m.start(), m.group()
            out.append((at, g))
            for j in self._also[g]:
                out.append((at, j))
            pos = at + 1
        return out

    def scan(self, text: str, first: bool = False) -> list[re.Match]:
        """The matches of the patterns in ``text`` (see the class docstring); with ``first``, at
        most one (whether any pattern matches)."""
        found: list[re.Match] = []
        for i in self.always:
            for m in self.patterns[i].finditer(text):
                found.append(m)
                if first:
                    return found
        if self._trigger is None:
            return found
        hits = self._anchored(text)
        whole: set[int] = set()  # patterns to search through the whole text
        if hits is None:
            whole = set(range(len(self.patterns))) - set(self.always)
            hits = []
        near: dict[int, list[tuple[int, int]]] = {}  # pattern -> (first start, anchor position)
        n = len(text)
        for at, low in hits:
            for lit, folded, uses in self._entries[low]:
                if not folded and not text.startswith(lit, at):
                    continue
                for i, before in uses:
                    if before is None:
                        whole.add(i)
                    else:
                        near.setdefault(i, []).append((max(0, at - before), at))
        for i in sorted(whole):
            for m in self.patterns[i].finditer(text):
                found.append(m)
                if first:
                    return found
        for i, spots in near.items():
            if i in whole:
                continue
            rx, r = self.patterns[i], self._reach[i]
            done = 0  # every start below this was tried
            for lo, at in sorted(spots):
                lo = max(lo, done)
                if lo > at:
                    continue
                if r is None or at - lo <= MATCH_STARTS:
                    s = lo
                    while s <= at:
                        m = rx.match(text, s)
                        if m is None:
                            s += 1
                            continue
                        found.append(m)
                        if first:
                            return found
                        s = max(m.end(), s + 1)
                    done = max(done, s)
                else:
                    # every match that starts by ``at`` ends, and is read, before ``at + reach``
                    end = min(n, at + r)
                    m = rx.search(text, lo, end)
                    while m is not None and m.start() <= at:
                        found.append(m)
                        if first:
                            return found
                        m = rx.search(text, max(m.end(), m.start() + 1), end)
                    done = max(done, at + 1)
        return found


_SCANNER: SecretScanner | None = None


def scanner() -> SecretScanner:
    """The :class:`SecretScanner` of :data:`PATTERNS` and the plugins' patterns (built once)."""
    global _SCANNER
    if _SCANNER is None:
        _SCANNER = SecretScanner((*PATTERNS, *plugin_patterns()))
    return _SCANNER


def may_hold_pattern(text: str) -> bool:
    """Whether a pattern of :data:`PATTERNS` or the plugins' matches somewhere in ``text`` (one
    scan for all of them: :class:`SecretScanner`)."""
    if len(text) < MIN_PATTERN_TEXT:
        return False
    return bool(scanner().scan(text, first=True))


def pattern_secrets(text: str) -> set[str]:
    """The substrings of ``text`` that have a well-known secret format (:data:`PATTERNS`, then
    the :data:`DETECT_SECRETS_PLUGINS`' patterns; one scan for all of them:
    :class:`SecretScanner`)."""
    if len(text) < MIN_PATTERN_TEXT:
        return set()
    found: set[str] = set()
    for m in scanner().scan(text):
        sec = _secret_of(m)
        if len(sec) >= MIN_SECRET_LEN:
            found.add(sec)
    return found


class _CleanStrings:
    """Strings found free of every pattern (:meth:`Redactor._clean`), for the whole process."""

    def __init__(self) -> None:
        self.strings: set[str] = set()
        self.chars = 0
        self.lock = threading.Lock()


_CLEAN = _CleanStrings()


class Redactor:
    """Redacts secrets from spans (see the module docstring); thread-safe.

    Attributes:
        known: secret values learned from model calls (:meth:`learn`).
    """

    FIELDS = ("name", "task", "site", "input", "output", "error", "attributes")
    """The span fields redacted (ids, times, kind and status are never secrets; a task or site
    name can be: a key in a request path lands in the proxy's site ``opaque/GET /v1/files/…``)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self.known: set[str] = set()
        self._later: collections.deque = collections.deque()  # (headers, api_key) of learn_later
        self._drain_lock = threading.Lock()
        self._clean_cache = _CLEAN  # shared: a string free of patterns is so for every redactor
        self.learn(secrets)

    def learn(self, secrets: Iterable[str]) -> None:
        """Add secret values to redact from now on (shorter than :data:`MIN_SECRET_LEN`: ignored)."""
        new = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}
        if new and not new <= self.known:  # every call of a client learns the same ones
            with self._lock:
                self.known |= new

    def learn_later(self, headers: Any, api_key: str | None = None) -> None:
        """Learn the credentials of a request (:func:`credential_secrets` of its headers, or
        their :func:`snapshot_headers`, and the client's ``api_key``) before anything is redacted
        from now on — worked out then, by the thread that redacts (:meth:`values`), not by the
        caller (one append here)."""
        self._later.append((headers, api_key))

    def _learn_pending(self) -> None:
        # one thread at a time: a thread that finds the queue empty has every secret learned (none
        # is still being worked out by another)
        with self._drain_lock:
            later = self._later
            while later:
                headers, key = later.popleft()
                self.learn(credential_secrets(headers, key))

    def _clean(self, strings: list[str]) -> bool:
        """Whether no string has a secret by pattern (:func:`pattern_secrets`); strings found
        clean are remembered (at most :data:`CLEAN_CACHE` characters in all, then forgotten at
        once). The memory is the process's, shared by every redactor (the recorder's and the
        store's ingest one: a span the recorder found clean is not scanned again at ingest)."""
        shared = self._clean_cache
        cache = shared.strings
        new = [t for t in strings if len(t) >= MIN_PATTERN_TEXT and t not in cache]
        for t in new:
            if pattern_secrets(t):  # (one scan of the string for every pattern)
                return False
        new = [t for t in new if len(t) <= CLEAN_CACHE // 16]
        if new:
            with shared.lock:
                n = sum(len(t) for t in new)
                if shared.chars + n > CLEAN_CACHE:
                    cache.clear()
                    shared.chars = 0
                cache.update(new)
                shared.chars += n
        return True

    def values(self) -> list[str]:
        """Every secret value redacted now (learned, :meth:`learn_later` included, + environment),
        longest first."""
        self._learn_pending()
        with self._lock:
            vals = self.known | env_secrets()
        return sorted(vals, key=len, reverse=True)

    def redact_text(self, text: str, values: list[str] | None = None) -> tuple[str, int]:
        """``(text with every secret replaced by [REDACTED], occurrences replaced)``."""
        values = self.values() if values is None else values
        n = 0
        for s in values:
            if s in text:
                n += text.count(s)
                text = text.replace(s, REDACTED)
        for s in sorted(pattern_secrets(text), key=len, reverse=True):
            if s in text and s != REDACTED:
                n += text.count(s)
                text = text.replace(s, REDACTED)
        return text, n

    def redact_value(self, obj: Any, values: list[str] | None = None) -> tuple[Any, int]:
        """``(obj with its strings redacted, occurrences replaced)`` for a JSON value (dict keys
        included)."""
        values = self.values() if values is None else values
        if isinstance(obj, str):
            return self.redact_text(obj, values)
        if isinstance(obj, list):
            out, total = [], 0
            for v in obj:
                r, n = self.redact_value(v, values)
                out.append(r)
                total += n
            return out, total
        if isinstance(obj, dict):
            d, total = {}, 0
            for k, v in obj.items():
                rk, nk = self.redact_value(k, values) if isinstance(k, str) else (k, 0)
                rv, nv = self.redact_value(v, values)
                d[rk] = rv
                total += nk + nv
            return d, total
        return obj, 0

    def redact_span(self, span: dict, values: list[str] | None = None) -> dict:
        """A copy of ``span`` with its secrets redacted; with any, ``attributes`` gets
        ``auto.redactions`` (count) and ``auto.redacted`` (the fields that held them).

        Fast path (the usual case): when no secret value occurs in the span's strings (one
        substring search each, over the strings joined by NUL) and no string has a pattern match
        (:func:`pattern_secrets`, the same check the full path makes, string by string; a string
        found clean is remembered, so the system prompt, the header values and the digests a
        site repeats on every call are scanned once), ``span`` is returned as it is. ``values``:
        :meth:`values` when the caller has them already (one batch's spans share them)."""
        values = self.values() if values is None else values
        strings: list[str] = []
        for f in self.FIELDS:
            if span.get(f) is not None:
                _strings(span[f], strings)
        joined = "\x00".join(strings)
        if not any(v in joined for v in values) and self._clean(strings):
            return span
        out = dict(span)
        total, fields = 0, []
        for f in self.FIELDS:
            if f in out and out[f] is not None:
                out[f], n = self.redact_value(out[f], values)
                if n:
                    total += n
                    fields.append(f)
        if total:
            attrs = dict(out.get("attributes") or {})
            attrs["auto.redactions"] = total
            attrs["auto.redacted"] = sorted(fields)
            out["attributes"] = attrs
        return out


def _strings(obj: Any, out: list[str]) -> None:
    """Append every string of a JSON value (object keys included) to ``out`` (exact types
    first: the walk runs over every span the recorder writes)."""
    t = type(obj)
    if t is str:
        out.append(obj)
    elif t is dict:
        for k, v in obj.items():
            if type(k) is str:
                out.append(k)
            elif isinstance(k, str):
                out.append(k)
            tv = type(v)
            if tv is str:
                out.append(v)
            elif tv is not int and tv is not float and tv is not bool and v is not None:
                _strings(v, out)
    elif t is list or t is tuple:
        for v in obj:
            tv = type(v)
            if tv is str:
                out.append(v)
            elif tv is not int and tv is not float and tv is not bool and v is not None:
                _strings(v, out)
    elif isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        _strings(dict(obj), out)
    elif isinstance(obj, (list, tuple)):
        _strings(list(obj), out)


def scrub(obj: Any, secrets: list[str]) -> Any:
    """``obj`` (a JSON value) with every occurrence of each of ``secrets`` in its strings (keys
    included) replaced by ``[REDACTED]`` (by value only)."""
    if not secrets:
        return obj
    if isinstance(obj, str):
        for s in secrets:
            if s in obj:
                obj = obj.replace(s, REDACTED)
        return obj
    if isinstance(obj, list):
        return [scrub(v, secrets) for v in obj]
    if isinstance(obj, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in obj.items()}
    return obj
