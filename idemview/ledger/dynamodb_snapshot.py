"""DynamoDB ledgers (issue 23 item 2, DESIGN §5.3): a read-only snapshot of one table in memory SQLite.

How it reads
    ``dynamodb://TABLE?region=R[&endpoint_url=URL][&profile=P]`` names one table. Credentials come from
    the standard AWS chain only (environment, profile, SSO, instance role), never from the URL or a file of
    idemview's: a URL carrying user information is refused before anything is sent. ``DescribeTable``
    gives the key schema (checked against the layout: a table whose primary key differs does not fit),
    then ``Scan`` pages (``ConsistentRead``, ``Limit`` items per page, ``ExclusiveStartKey`` to go on)
    are decoded and loaded into the same in-memory SQLite reference tables a Redis snapshot fills
    (:mod:`idemview.ledger.memory_snapshot`: the memory database, batch loader, indexes, read-only
    engine and prefetching thread every snapshot shares; the per-item mapping is the key-value layout's
    compiled one, :mod:`idemview.ledger.redis_kv.decode`), so the normal
    :class:`~idemview.ledger.reader.Ledger` serves grid, detail, findings and export unchanged.

Read-only by construction
    Every client idemview makes for DynamoDB is made by :func:`connect_dynamodb`, which registers
    :func:`refuse_non_reads` on botocore's ``before-parameter-build.dynamodb`` event: every API call of
    that client (paginators and waiters too) passes it before anything is serialized, and any operation
    outside :data:`ALLOWED_OPERATIONS` raises :class:`DynamoWriteRefused` there. The one place the rule
    is kept.

The snapshot's guarantees (as Redis's)
    Bounded memory: one page (at most ``batch`` items, and DynamoDB's 1 MB per page) is decoded while
    the next is read on a thread; only the SQLite rows stay. Progress is reported per page and a
    :class:`~idemview.services.cancel.CancelToken` stops it between pages and during a backoff. A Scan
    returns every item present for the whole scan exactly once; an item written during it may or may
    not be seen. The "as of" is the server's clock (the HTTP ``Date`` of the first and last response,
    second resolution), shown beside ``now``. Throttling (``ProvisionedThroughputExceededException``,
    ``ThrottlingException``, ``RequestLimitExceeded``) and 5xx answers are retried with capped
    exponential backoff and full jitter (:func:`call_with_backoff`; botocore's own retries are off so
    this is the only retry loop); exhausted, the scan stops with one line (exit 3).

What a DynamoDB table can show
    An expired item stays until DynamoDB's TTL sweeper deletes it, up to 48 h later: ``expired_key``
    is meaningful. One item per primary key: a retry updates it and a call after expiry overwrites it,
    so ``duplicate_effect``, ``key_conflict`` and ``replay_after_expiry`` cannot be seen (see
    :func:`dynamodb_not_checkable`).
"""

from __future__ import annotations

import base64
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from idemview.domain import jsontext
from idemview.domain.model import FindingKind
from idemview.errors import CannotConnect, InputError
from idemview.layouts.dynamodb import DynamoLayout, all_dynamodb_presets, load_dynamodb_layout
from idemview.layouts.layout import LayoutError
from idemview.ledger import memory_snapshot as mem
from idemview.ledger.memory_snapshot import CONVERSION_ERRORS
from idemview.ledger.reader import Ledger
from idemview.ledger.redis_kv.decode import compile_layout, sql_time
from idemview.ledger.redis_kv.ledger import not_checkable, snapshot_layout
from idemview.ledger.source import LedgerSource

SCHEME = "dynamodb"
PAGE_ITEMS: int | None = None  # items per Scan page (Limit); None: DynamoDB's own 1 MB pages
DETECT_SAMPLE = 50  # items sampled by detection (one Scan page)
MAX_ATTEMPTS = 8  # tries per call when DynamoDB throttles or answers 5xx
BACKOFF_BASE_S = 0.05  # first backoff ceiling, doubled per try
BACKOFF_CAP_S = 5.0  # largest backoff ceiling

#: The only DynamoDB operations idemview calls (botocore operation names).
ALLOWED_OPERATIONS = frozenset({"DescribeTable", "Scan", "Query", "GetItem"})
#: Error codes retried with backoff: throttling and the service's own transient failures.
RETRYABLE = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
_THROTTLE = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_REGION = re.compile(r"^[a-z0-9-]{1,40}$")
_URL_OPTIONS = ("region", "endpoint_url", "profile")


class DynamoUrlError(InputError):
    """A ``dynamodb://`` URL that is malformed or carries what it may not (credentials, unknown options)."""


class DynamoWriteRefused(RuntimeError):
    """An operation outside :data:`ALLOWED_OPERATIONS` was about to be called; nothing was sent."""


class NoAwsCredentials(CannotConnect):
    """The AWS credential chain found no credentials (exit 3)."""


class TableNotFound(CannotConnect):
    """The table the URL names does not exist in that region/endpoint (exit 3: the URL names the
    table as a SQL URL names the database)."""


class Throttled(CannotConnect):
    """DynamoDB kept throttling a call after :data:`MAX_ATTEMPTS` tries (exit 3)."""


# ------------------------------------------------------------------------------------------ the URL


@dataclass(frozen=True)
class DynamoTarget:
    """A parsed ``dynamodb://`` URL: ``table``, ``region`` (``None``: the AWS chain's), ``endpoint_url``
    (``None``: AWS's), ``profile`` (``None``: the chain's default). Holds no credential."""

    table: str
    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None

    @property
    def url(self) -> str:
        """The URL again, safe to show and store (it never holds a secret)."""
        opts = [(k, getattr(self, k)) for k in _URL_OPTIONS if getattr(self, k)]
        return f"{SCHEME}://{self.table}" + ("?" + "&".join(f"{k}={v}" for k, v in opts) if opts else "")


def is_dynamodb_url(url: Any) -> bool:
    """True for a ``dynamodb://`` URL string."""
    return isinstance(url, str) and url[:11].lower() == "dynamodb://"


def parse_dynamodb_url(url: str) -> DynamoTarget:
    """Parse ``dynamodb://TABLE?region=R[&endpoint_url=URL][&profile=P]``. Raises
    :class:`DynamoUrlError` (one line, the URL not echoed) for user information (credentials belong to
    the AWS chain), a bad table name, an unknown option or a malformed endpoint."""
    try:
        p = urlsplit(url)
    except ValueError:
        raise DynamoUrlError("not a DynamoDB URL (expected dynamodb://TABLE?region=REGION)") from None
    if p.scheme.lower() != SCHEME:
        raise DynamoUrlError("not a DynamoDB URL (expected dynamodb://TABLE?region=REGION)")
    if "@" in url.split("://", 1)[-1].split("?", 1)[0] or "@" in p.netloc:  # a secret may hold "/"
        raise DynamoUrlError(
            "a dynamodb:// URL must not carry credentials (remove the part before '@'); use the AWS chain "
            "(AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment)"
        )
    table = p.netloc
    if not _TABLE_NAME.match(table) or (p.path not in ("", "/")):
        raise DynamoUrlError(
            "dynamodb://TABLE: a table name is 3-255 letters, digits, '_', '-' or '.' (no path after it)"
        )
    opts: dict[str, str] = {}
    for k, v in parse_qsl(p.query, keep_blank_values=True):
        if k not in _URL_OPTIONS and re.search(r"key|secret|token|password|session", k, re.I):
            raise DynamoUrlError(
                "a dynamodb:// URL must not carry credentials (remove the option); use the AWS chain "
                "(AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment)"
            )
        if k not in _URL_OPTIONS:
            raise DynamoUrlError(f"unknown dynamodb:// option {k[:40]!r}; known: {', '.join(_URL_OPTIONS)}")
        if k in opts:  # region=a&region=b: which one was meant is not ours to guess
            raise DynamoUrlError(f"the dynamodb:// option {k!r} is given twice: keep one")
        opts[k] = v
    if "region" in opts and not _REGION.match(opts["region"]):
        raise DynamoUrlError("region must be an AWS region name such as eu-west-1")
    ep = opts.get("endpoint_url")
    if ep is not None:
        e = urlsplit(ep)
        if e.scheme not in ("http", "https") or not e.hostname or "@" in e.netloc or e.query:
            raise DynamoUrlError("endpoint_url must be http(s)://HOST[:PORT] (no credentials, no query)")
    return DynamoTarget(table, opts.get("region") or None, ep or None, opts.get("profile") or None)


# ------------------------------------------------------------------------------ the read-only client


def refuse_non_reads(model=None, **_kwargs) -> None:
    """botocore ``before-parameter-build`` handler: raise :class:`DynamoWriteRefused` unless the
    operation is one of :data:`ALLOWED_OPERATIONS` (nothing has been serialized or sent yet)."""
    name = getattr(model, "name", None)
    if name not in ALLOWED_OPERATIONS:
        raise DynamoWriteRefused(
            f"idemview refuses to call DynamoDB {name or '?'}: only read calls "
            f"({', '.join(sorted(ALLOWED_OPERATIONS))}) are allowed"
        )


def connect_dynamodb(target: DynamoTarget, *, timeout_s: float = 10.0, session=None):
    """A boto3 DynamoDB client for ``target`` that can only read (:func:`refuse_non_reads`), with
    connect/read timeouts of ``timeout_s`` seconds and botocore's retries off (see
    :func:`call_with_backoff`). ``session``: a ``boto3.session.Session`` (default: a new one, with the
    URL's profile). Raises :class:`DynamoUrlError` (no region anywhere) or :class:`CannotConnect`
    (an unknown profile). Sends nothing."""
    import boto3
    import botocore.exceptions as bx
    from botocore.config import Config

    try:
        session = session or boto3.session.Session(profile_name=target.profile)
        cfg = Config(
            connect_timeout=timeout_s,
            read_timeout=timeout_s * 3,
            retries={"total_max_attempts": 1},
            user_agent_extra="idemview",
        )
        client = session.client("dynamodb", region_name=target.region, endpoint_url=target.endpoint_url, config=cfg)
    except bx.ProfileNotFound as e:
        # the name may come from AWS_PROFILE rather than the URL: botocore's exception names it
        name = target.profile or getattr(e, "kwargs", {}).get("profile")
        source = "" if target.profile else " (from AWS_PROFILE)"
        raise CannotConnect(
            f"AWS profile {name!r}{source} is not in the AWS config files (~/.aws/config): check the profile name"
        ) from None
    except bx.NoRegionError:
        raise DynamoUrlError(
            f"no AWS region for {target.url}: add ?region=REGION to the URL or set AWS_REGION"
        ) from None
    client.meta.events.register("before-parameter-build.dynamodb", refuse_non_reads)
    client.meta.events.register("before-parse.dynamodb.Scan", _parse_scan_body)
    return client


def _parse_scan_body(response_dict=None, customized_response_dict=None, **_kwargs) -> None:
    """botocore ``before-parse`` handler for a successful ``Scan``: the body's JSON parsed with orjson in
    one call (its ``Items`` stay in DynamoDB's typed form, which :func:`decode_item` reads) instead of
    botocore's walk of the output shape per attribute value, about half the cost of a page. The body
    left to botocore is ``{}``; an error answer is left to botocore whole."""
    if not response_dict or response_dict.get("status_code") != 200 or customized_response_dict is None:
        return
    try:
        import orjson

        # the one JSON chokepoint (depth bounded); DynamoDB nests at most 32 levels, so it always fits
        parsed = jsontext.loads(response_dict["body"], orjson.loads)
    except (ImportError, ValueError, TypeError, KeyError):  # JSONTooDeep is a ValueError
        return  # botocore parses it (and says what is wrong)
    if isinstance(parsed, dict):
        customized_response_dict.update(parsed)
        response_dict["body"] = b"{}"


def _where(target: DynamoTarget, client=None) -> str:
    region = target.region or (getattr(client.meta, "region_name", None) if client is not None else None)
    return f"table {target.table!r} in {region or 'the default region'}" + (
        f" at {target.endpoint_url}" if target.endpoint_url else ""
    )


def translate_error(e: BaseException, target: DynamoTarget, op: str, client=None) -> BaseException:
    """The typed, one-line idemview error for a botocore/boto3 exception ``e`` raised by ``op``; ``e``
    itself when it is not one. Messages name what to fix and carry no credential (only AWS's error
    code, never its message text, for refused credentials)."""
    import botocore.exceptions as bx

    where = _where(target, client)
    if isinstance(e, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError):
        return NoAwsCredentials(
            f"no AWS credentials for {where}: idemview takes them from the AWS chain only; set AWS_PROFILE "
            "(or run `aws sso login`), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(e, bx.ClientError):
        code = str(e.response.get("Error", {}).get("Code", "") or "")
        if code == "ResourceNotFoundException":
            return TableNotFound(f"no DynamoDB {where}: check the table name and the region (?region=)")
        if code in (
            "UnrecognizedClientException",
            "InvalidSignatureException",
            "ExpiredTokenException",
            "InvalidClientTokenId",
            "SignatureDoesNotMatch",
        ):
            return CannotConnect(f"AWS refused the credentials for {where} ({code}): refresh or change them")
        if code == "AccessDeniedException":
            return CannotConnect(
                f"AWS denied {op} on {where} (AccessDeniedException): grant dynamodb:DescribeTable and dynamodb:Scan"
            )
        return CannotConnect(f"DynamoDB refused {op} on {where} ({code or 'an error without a code'})")
    if isinstance(e, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError):
        return CannotConnect(f"cannot reach DynamoDB for {where}: {type(e).__name__}")
    if isinstance(e, bx.BotoCoreError):
        return CannotConnect(f"DynamoDB {op} on {where} failed: {type(e).__name__}")
    return e


def _sleep(seconds: float, token, sleep: Callable[[float], Any]) -> None:
    """Sleep ``seconds`` in slices of at most 0.2 s, checking ``token`` before each."""
    left = seconds
    while left > 0:
        if token is not None:
            token.check()
        step = min(left, 0.2)
        sleep(step)
        left -= step


def call_with_backoff(
    client,
    op: str,
    params: dict,
    *,
    target: DynamoTarget,
    token=None,
    on_retry: Callable[[str], Any] | None = None,
    sleep: Callable[[float], Any] = time.sleep,
    attempts: int = MAX_ATTEMPTS,
) -> dict:
    """``client.<op>(**params)`` (``op`` in botocore's snake case, e.g. ``"scan"``), retried on
    :data:`RETRYABLE` error codes with full-jitter exponential backoff: the n-th wait is uniform in
    [0, min(:data:`BACKOFF_CAP_S`, :data:`BACKOFF_BASE_S` × 2^(n-1))] seconds. ``on_retry(code)`` is
    called before each wait; ``token`` is checked during it. Raises :class:`Throttled` after
    ``attempts`` tries, else :func:`translate_error` of any other failure."""
    import botocore.exceptions as bx

    for n in range(1, attempts + 1):
        try:
            return getattr(client, op)(**params)
        except bx.ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", "") or "")
            if code not in RETRYABLE:
                raise translate_error(e, target, op, client) from None
            if n == attempts:
                what = "throttled" if code in _THROTTLE else "kept failing"
                raise Throttled(
                    f"DynamoDB {what} {op} on {_where(target, client)} {attempts} times ({code}): retry later, "
                    "or raise the table's read capacity (on-demand tables: the account's read limits)"
                ) from None
            if on_retry is not None:
                on_retry(code)
            _sleep(random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (n - 1))), token, sleep)
        except (bx.BotoCoreError, DynamoWriteRefused) as e:
            raise translate_error(e, target, op, client) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _server_time(resp: dict) -> datetime | None:
    """The server's clock from a response's HTTP ``Date`` header (aware UTC, whole seconds), or None."""
    date = ((resp.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}).get("date")
    try:
        return parsedate_to_datetime(date).astimezone(UTC) if date else None
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------------------ decoding


def _number(s: str) -> int | float:
    try:
        return int(s)
    except ValueError:
        return float(s)


def decode_item(item: dict) -> dict[str, Any]:
    """A low-level DynamoDB item (``{"attr": {"S": "x"}, ...}``) as plain Python: ``S`` text, ``N`` int
    (or float when it has a fraction or exponent), ``B`` base64 text, ``BOOL``, ``NULL`` → None, ``M``
    dict, ``L`` list, ``SS``/``NS``/``BS`` sorted lists. DynamoDB nests at most 32 levels, so the
    recursion is bounded. Raises ``ValueError``/``TypeError`` on a value of no known type."""
    return {k: _value(v) for k, v in item.items()}


def _value(av: dict) -> Any:
    (t, v), *rest = av.items()
    if rest:
        raise ValueError("an attribute value with several types")
    if t == "S":
        return v
    if t == "N":
        return _number(v)
    if t == "BOOL":
        return bool(v)
    if t == "NULL":
        return None
    if t == "M":
        return {k: _value(x) for k, x in v.items()}
    if t == "L":
        return [_value(x) for x in v]
    if t == "B":  # bytes from botocore's parser, base64 text from the fast Scan parse
        return v if isinstance(v, str) else base64.b64encode(bytes(v)).decode("ascii")
    if t == "SS":
        return sorted(v)
    if t == "NS":
        return sorted(_number(x) for x in v)
    if t == "BS":
        return sorted(x if isinstance(x, str) else base64.b64encode(bytes(x)).decode("ascii") for x in v)
    raise ValueError(f"unknown DynamoDB type {t!r}")


# ------------------------------------------------------------------------------------------ snapshot


@dataclass(kw_only=True)
class DynamoSnapshotInfo(mem.MemorySnapshotInfo):
    """What a snapshot read: ``url`` (no credential), ``table``, ``region``, ``layout``, ``key_schema``;
    when: ``started_at``/``finished_at`` on idemview's clock, ``server_time``/``server_time_end`` the
    server's ``Date`` on the first/last response (aware UTC; the "as of"), ``clock_skew_s`` server -
    local (seconds); counts: ``scanned`` items Scan returned, ``loaded`` records, ``not_matching``
    items whose key attribute the layout's key regex rejects, ``undecodable``, ``without_expiry``
    (no expiry attribute), ``expiry_unreadable`` (an expiry attribute that is no time: text, a negative
    epoch; the item's expiry is unknown), ``same_key`` (a second item mapped onto one (scope, key); the first kept),
    ``pages``, ``retries`` (throttling / 5xx retries), ``item_count_estimate`` (DescribeTable's
    ItemCount, updated by AWS about every 6 hours). The shared fields and :meth:`to_json` are
    :class:`~idemview.ledger.memory_snapshot.MemorySnapshotInfo`'s."""

    table: str
    region: str
    key_schema: list[str] = field(default_factory=list)
    without_expiry: int = 0
    expiry_unreadable: int = 0
    same_key: int = 0
    pages: int = 0
    retries: int = 0
    item_count_estimate: int | None = None

    def server_line(self) -> str:
        """The scan report's ``server`` line: the "as of" and what was read."""
        from idemview.ledger.times import iso

        clock = "the server's Date at the snapshot" if self.clock == "server" else "idemview's clock: no server Date"
        return (
            f"server   {iso(self.server_time)} ({clock}; table {self.table}, {self.scanned} items scanned in "
            f"{self.pages} pages, {self.loaded} records, {self.without_expiry} without expiry, "
            f"{self.expiry_unreadable} with an unreadable expiry, "
            f"{self.not_matching} not matching the key pattern, {self.undecodable} unreadable, "
            f"{self.retries} throttling retries)"
        )


def describe_table(client, target: DynamoTarget, token=None, on_retry=None) -> dict:
    """``DescribeTable``'s ``Table`` (key schema, ItemCount...), plus the response's server time under
    ``"_server_time"``. Raises :class:`TableNotFound`, :class:`NoAwsCredentials`, :class:`CannotConnect`."""
    resp = call_with_backoff(
        client, "describe_table", {"TableName": target.table}, target=target, token=token, on_retry=on_retry
    )
    out = dict(resp.get("Table") or {})
    out["_server_time"] = _server_time(resp)
    return out


def key_schema(table: dict) -> list[str]:
    """The table's primary key attribute names, partition (HASH) key first."""
    ks = sorted(table.get("KeySchema") or [], key=lambda k: k.get("KeyType") != "HASH")
    return [k["AttributeName"] for k in ks]


def check_fits(layout: DynamoLayout, schema: list[str], target: DynamoTarget) -> None:
    """Raise a :class:`LayoutError` that is a ``LayoutMismatch`` (exit 4) unless the table's key schema
    is the layout's."""
    if list(layout.key_schema) != schema:
        raise LayoutError(
            f"layout {layout.name} expects the primary key ({', '.join(layout.key_schema)}) but table "
            f"{target.table!r} has ({', '.join(schema) or 'none'}): choose another layout (--layout)",
            [f"key {a}" for a in layout.key_schema if a not in schema] or ["key schema"],
        )


def scan_pages(
    client,
    target: DynamoTarget,
    *,
    limit: int | None = PAGE_ITEMS,
    token=None,
    on_retry=None,
    max_pages: int | None = None,
) -> Iterator[tuple[list[dict], datetime | None]]:
    """(items, server time) per ``Scan`` page, strongly consistent, at most ``limit`` items (and 1 MB) each,
    following ``LastEvaluatedKey`` until the end (or ``max_pages``)."""
    params: dict[str, Any] = {"TableName": target.table, "ConsistentRead": True}
    if limit:
        params["Limit"] = limit
    n = 0
    while True:
        if token is not None:
            token.check()
        resp = call_with_backoff(client, "scan", params, target=target, token=token, on_retry=on_retry)
        n += 1
        yield resp.get("Items") or [], _server_time(resp)
        last = resp.get("LastEvaluatedKey")
        if not last or (max_pages is not None and n >= max_pages):
            return
        params["ExclusiveStartKey"] = last


class _ItemMapper:
    """Rows of the reference tables from Scan pages: ``page(items)`` -> ``(counts, ops, atts)`` with
    counts = (scanned, not matching, undecodable, without expiry, unreadable expiry); ids numbered from 1 across pages.
    The per-item mapping is the key-value layout's compiled one (:func:`compile_layout`)."""

    def __init__(self, layout: DynamoLayout):
        self.layout = layout
        self.comp = compile_layout(layout.kv)
        self.rid = 0

    def page(self, items: list[dict]):
        lay, comp = self.layout, self.comp
        exp_attr, exp_enc = lay.expires_attribute, lay.expires_encoding
        kind_of, attempt_of = comp.kind, comp.attempt
        rid = self.rid
        not_matching = undecodable = without_expiry = expiry_unreadable = 0
        ops: list[tuple] = []
        atts: list[tuple] = []
        for raw in items:
            try:
                d = decode_item(raw)
                parts = lay.split(d)
                if parts is None:
                    not_matching += 1
                    continue
                scope, key, kind = parts
                vals = comp.values(d)
                raw_status = comp.status(d)
                vkind = kind_of(d) if kind_of is not None else None
                att = attempt_of(raw_status, d, vkind, vals) if attempt_of is not None else None
                expires, exp_state = _expiry(_get(d, exp_attr), exp_enc) if exp_attr else (None, "none")
            except CONVERSION_ERRORS:
                undecodable += 1
                continue
            if exp_state == "none":
                without_expiry += 1
            elif exp_state == "unreadable":
                expiry_unreadable += 1
            rid += 1
            ops.append((rid, scope, key, vkind or kind, raw_status if raw_status is not None else "", expires, *vals))
            if att is not None:
                atts.append((rid, scope, key, *att))
        self.rid = rid
        return (len(items), not_matching, undecodable, without_expiry, expiry_unreadable), ops, atts


def _expiry(v: Any, enc: str) -> tuple[str | None, str]:
    """(expires_at text, "ok" | "none" | "unreadable") of an expiry attribute's value. Missing (or
    empty): no expiry. A value that is not a time in ``enc`` (text where a number belongs, a negative
    or zero epoch: DynamoDB's TTL ignores an attribute that is not a positive number, and it would show
    as "20789 days ago") is unreadable: the item's expiry is unknown, never "none"."""
    if v is None or v == "":
        return None, "none"
    if enc in ("epoch_s", "epoch_ms", "epoch_s_or_ms"):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < float("inf")):
            return None, "unreadable"
    t = sql_time(v, enc)
    return (t, "ok") if t is not None else (None, "unreadable")


def _get(d: dict, path: str) -> Any:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def snapshot(
    client,
    target: DynamoTarget,
    layout: DynamoLayout,
    *,
    batch: int | None = PAGE_ITEMS,
    progress: Callable[[int, int], Any] | None = None,
    token=None,
    table: dict | None = None,
):
    """Read every item of ``target``'s table into a fresh in-memory SQLite database in the reference
    layout. Returns ``(engine, info)``: a read-only SQLAlchemy engine and a :class:`DynamoSnapshotInfo`.
    ``progress(scanned, loaded)`` after each page; ``token`` checked between pages (raises
    ``Cancelled``). ``table``: a :func:`describe_table` result already read. Raises
    :class:`LayoutMismatch` (the key schema differs) and the errors of :func:`call_with_backoff`."""
    info = DynamoSnapshotInfo(
        url=target.url,
        table=target.table,
        region=target.region or str(client.meta.region_name or ""),
        layout=layout.name,
        started_at=datetime.now(UTC),
    )

    def retried(_code):
        info.retries += 1

    desc = table if table is not None else describe_table(client, target, token, retried)
    info.key_schema = key_schema(desc)
    check_fits(layout, info.key_schema, target)
    info.item_count_estimate = desc.get("ItemCount")
    at = desc.get("_server_time")
    if at is None:
        info.clock, at = "local", datetime.now(UTC)
    info.set_server_time(at)
    comp = compile_layout(layout.kv)
    op_sql, att_sql = mem.insert_statements(comp.columns)
    uri, keeper, indexes = mem.new_memory_db("dynamodb")
    mapper = _ItemMapper(layout)
    pages = mem.prefetched(scan_pages(client, target, limit=batch, token=token, on_retry=retried), token)
    with mem.loading(keeper):
        last = info.server_time
        for items, at in pages:
            info.pages += 1
            last = at or last
            (n, not_matching, bad, no_exp, bad_exp), ops, atts = mapper.page(items)
            info.scanned += n
            info.not_matching += not_matching
            info.undecodable += bad
            info.without_expiry += no_exp
            info.expiry_unreadable += bad_exp
            info.load(keeper, op_sql, att_sql, ops, atts)
            if progress:
                progress(info.scanned, info.loaded)
        info.same_key = mem.finish(keeper, indexes)
        info.loaded -= info.same_key
        info.server_time_end = last if info.clock == "server" else datetime.now(UTC)
        info.finished_at = datetime.now(UTC)
    return mem.memory_engine(uri, keeper), info


def dynamodb_not_checkable(layout: DynamoLayout) -> dict[FindingKind, str]:
    """Finding kinds this DynamoDB layout cannot show, with the reason in plain words: the key-value
    ones that follow from what the layout maps (:func:`not_checkable`), with DynamoDB's reasons for the
    one-item-per-key kinds; ``expired_key`` is checkable whenever the layout names an expiry."""
    out = not_checkable(layout.kv)
    K = FindingKind
    out.pop(K.EXPIRED_KEY, None)
    if not layout.expires_attribute:
        out[K.EXPIRED_KEY] = "the layout names no expiry attribute"
    one = "one DynamoDB item per primary key"
    out[K.REPLAY_AFTER_EXPIRY] = (
        f"{one}: a call after expiry overwrites the expired item in place (Powertools' PutItem "
        "condition #expiry < :now), so no earlier record is left to compare"
    )
    out[K.DUPLICATE_EFFECT] = f"{one}: a retry updates the same item, so two successes of one key leave one record"
    out[K.KEY_CONFLICT] = f"{one}, hence one fingerprint (validation) per key"
    if K.UNRESOLVED_FAILURE in out:
        out[K.UNRESOLVED_FAILURE] = "the table keeps no failed records (Powertools deletes the item when a call fails)"
    return out


# ----------------------------------------------------------------------------------------- detection


@dataclass
class DynamoMatch:
    """A DynamoDB preset that fits a table: ``confidence`` in [0, 1] and the reason in words."""

    layout: DynamoLayout
    confidence: float
    reason: str


def detect_dynamodb(client, target: DynamoTarget, presets: list[DynamoLayout] | None = None, table=None, token=None):
    """Rank DynamoDB presets for the table: the key schema must be the preset's; then the share of at
    most :data:`DETECT_SAMPLE` sampled items (one Scan page) whose key attribute matches the key regex
    and that carry the preset's ``[detect] attributes``. An empty table with the right key schema fits
    at 0.5. Best first; empty when nothing fits."""
    desc = table if table is not None else describe_table(client, target, token)
    schema = key_schema(desc)
    sample: list[dict] = []
    for items, _at in scan_pages(client, target, limit=DETECT_SAMPLE, token=token, max_pages=1):
        for it in items:
            try:
                sample.append(decode_item(it))
            except CONVERSION_ERRORS:
                continue
    out = []
    for lay in presets if presets is not None else all_dynamodb_presets():
        if list(lay.key_schema) != schema:
            continue
        if not sample:
            out.append(DynamoMatch(lay, 0.5, f"key schema ({', '.join(schema)}) matches; the table is empty"))
            continue
        need = set(lay.detect_attributes) | ({lay.kv.status_field} if lay.kv.status_field else set())
        good = sum(1 for d in sample if lay.split(d) is not None and all(_get(d, a) is not None for a in need))
        if good:
            out.append(
                DynamoMatch(
                    lay,
                    good / len(sample),
                    f"key schema ({', '.join(schema)}) matches; {good} of {len(sample)} sampled items have "
                    f"{lay.key_attribute} matching the key pattern and {', '.join(sorted(need)) or 'nothing else'}",
                )
            )
    out.sort(key=lambda m: (-m.confidence, -len(m.layout.detect_attributes), m.layout.name))
    return out


# ------------------------------------------------------------------------------------------- opening


class DynamoLedger(Ledger):
    """A :class:`~idemview.ledger.reader.Ledger` over a DynamoDB snapshot. What it carries beside is its
    declared :attr:`source` (backend and dialect ``dynamodb``, the :class:`DynamoSnapshotInfo`, the
    kinds it cannot show with the reasons, detection, the manifest's identity (dialect, host, database =
    the table, ``region``, ``endpoint_url``, the snapshot; never a credential), the
    :class:`DynamoLayout`); :attr:`detection` is ``source.detection`` under the name callers read."""

    @property
    def detection(self) -> str:
        """How the layout was chosen, in words (``source.detection``)."""
        return self.source.detection


def _choose_layout(client, target, layout, desc, token) -> tuple[DynamoLayout, str]:
    if isinstance(layout, DynamoLayout):
        return layout, f"layout {layout.name} (chosen)"
    if layout:
        lay = load_dynamodb_layout(layout)
        return lay, f"layout {lay.name} (chosen)"
    matches = detect_dynamodb(client, target, table=desc, token=token)
    if not matches:
        schema = ", ".join(key_schema(desc)) or "none"
        raise LayoutError(
            f"no DynamoDB preset fits table {target.table!r} (primary key {schema}); pass --layout NAME|FILE "
            "(powertools-dynamodb, powertools-dynamodb-composite, dynamodb-generic or your own)",
            ["key schema"],
        )
    m = matches[0]
    return m.layout, f"detected {m.layout.name} ({m.confidence:.0%}): {m.reason}"


def open_dynamodb_ledger(
    url: str | DynamoTarget,
    *,
    layout: str | DynamoLayout | None = None,
    name: str | None = None,
    progress=None,
    token=None,
    batch: int | None = PAGE_ITEMS,
    lock_timeout_s=None,
    retry_threshold=None,
    retention_s=None,
    session=None,
) -> DynamoLedger:
    """Parse the URL, make the read-only client, choose the layout (given, else detected), take a
    snapshot and return a :class:`DynamoLedger` on it. Raises :class:`DynamoUrlError` (exit 2),
    :class:`CannotConnect` and its subclasses (exit 3), :class:`LayoutError` (a bad layout: 2; no
    preset fits or the key schema differs: 4), ``Cancelled``."""
    target = url if isinstance(url, DynamoTarget) else parse_dynamodb_url(url)
    client = connect_dynamodb(target, session=session)
    try:
        desc = describe_table(client, target, token)
        lay, detection = _choose_layout(client, target, layout, desc, token)
        engine, info = snapshot(client, target, lay, batch=batch, progress=progress, token=token, table=desc)
        # where the table was read (the URL's endpoint, else the one botocore chose for the region)
        endpoint = target.endpoint_url or str(getattr(client.meta, "endpoint_url", "") or "")
    finally:
        client.close()
    ledger = DynamoLedger(
        engine,
        snapshot_layout(lay.kv),
        name=name or f"dynamodb {target.table}",
        lock_timeout_s=lock_timeout_s,
        retry_threshold=retry_threshold,
        retention_s=retention_s,
    )
    identity = {
        "dialect": SCHEME,
        "host": target.endpoint_url or f"dynamodb.{info.region}.amazonaws.com",
        "database": target.table,
        # the same table name in another region or on another endpoint is another ledger; never a
        # credential (the URL holds none, parse_dynamodb_url)
        "region": info.region,
        "endpoint_url": endpoint,
        "snapshot": info.to_json(),
    }
    ledger.source = LedgerSource(
        SCHEME,
        info,
        dynamodb_ledger_not_checkable(lay, ledger.lock_timeout_override),
        dialect=SCHEME,
        detection=detection,
        identity=identity,
        store_layout=lay,
    )
    return ledger


def dynamodb_ledger_not_checkable(lay: DynamoLayout, lock_timeout_s: float | None) -> dict[FindingKind, str]:
    """The kinds a DynamoDB ledger read with ``lay`` cannot show, with the reasons: the layout's
    (:func:`dynamodb_not_checkable`), ``stuck_in_progress`` checkable after all when the caller gave a
    lock timeout (``lock_timeout_s``, seconds; ``None``: none given) for a ``locked_at`` field.
    What :meth:`idemview.backends.dynamodb.DynamoBackend.not_checkable` declares."""
    out = dynamodb_not_checkable(lay)
    if lock_timeout_s is not None and "locked_at" in lay.kv.fields:
        out.pop(FindingKind.STUCK_IN_PROGRESS, None)
    return out


def test_dynamodb(url: str | DynamoTarget, layout: str = "", session=None) -> str:
    """The connection dialog's Test for a DynamoDB connection: credentials found, table described, a
    page scanned, layout detected or checked. One line of plain words (run on a worker thread).
    Raises what :func:`open_dynamodb_ledger` raises before the snapshot."""
    target = url if isinstance(url, DynamoTarget) else parse_dynamodb_url(url)
    client = connect_dynamodb(target, session=session)
    try:
        desc = describe_table(client, target)
        parts = [f"✓ table {target.table} ({desc.get('ItemCount', '?')} items, about)", "read calls only"]
        presets = [load_dynamodb_layout(layout)] if layout else None
        m = detect_dynamodb(client, target, presets, table=desc)
        if m:
            parts.append(
                f"{'layout' if layout else 'detected'} {m[0].layout.name} — confidence {m[0].confidence:.0%}: "
                f"{m[0].reason}"
            )
        else:
            parts.append("⚠ no DynamoDB preset fits this table: choose or write a layout")
        return " · ".join(parts)
    finally:
        client.close()


test_dynamodb.__test__ = False  # type: ignore[attr-defined]  # a function of the dialog, not a test
