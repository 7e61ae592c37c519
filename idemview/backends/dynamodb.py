"""DynamoDB tables (``dynamodb://TABLE?region=R[&endpoint_url=URL][&profile=P]``), read as a snapshot
(:mod:`idemview.ledger.dynamodb_snapshot`: read calls only, paginated, the server's clock). Credentials
come from the AWS chain only (environment, profile, SSO, instance role): there is no credential field and
a URL carrying one is refused. Reached over HTTPS, never through an SSH tunnel.

A saved connection keeps the table in ``database`` and ``region`` / ``endpoint_url`` / ``profile`` among
its URL query options, ``tls`` (:class:`~idemview.config.Connection`)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from idemview.backends.base import Backend, Choice, Field, Match, OpenRequest, Source, Target
from idemview.errors import InputError

if TYPE_CHECKING:
    from idemview.config import Connection
    from idemview.domain.model import FindingKind
    from idemview.ledger.reader import Ledger

SCHEME = "dynamodb"
#: The URL's options a saved connection keeps in ``tls`` (dynamodb_snapshot.parse_dynamodb_url's).
OPTIONS = ("region", "endpoint_url", "profile")


def dynamodb_url(table: str, options: dict) -> str:
    """``dynamodb://TABLE?region=…&endpoint_url=…&profile=…`` from a table name and options (empty
    values left out; values quoted so an endpoint's ``:`` and ``/`` survive the query)."""
    opts = [(k, str(options[k])) for k in OPTIONS if options.get(k)]
    query = "&".join(f"{k}={quote(v, safe=':/')}" for k, v in opts)
    return f"{SCHEME}://{table}" + (f"?{query}" if query else "")


class DynamoBackend(Backend):
    """DynamoDB (see the module docstring)."""

    name = "dynamodb"
    title = "DynamoDB"
    choices = (Choice("DynamoDB", "dynamodb"),)
    network = False
    priority = 20
    layout_kinds = ("dynamodb",)
    no_fit_detect = "no DynamoDB preset fits this table; write a layout (see dynamodb-generic)"
    # idemview/ledger/dynamodb_snapshot.py: refuse_non_reads on botocore's before-parameter-build event
    read_only_note = (
        "Read-only: a hook in the AWS client refuses any operation other than DescribeTable, Scan, Query "
        "and GetItem before it is sent."
    )

    def matches(self, target: Target) -> bool:
        from idemview.ledger.dynamodb_snapshot import is_dynamodb_url

        return is_dynamodb_url(target) or (not isinstance(target, str) and target.drivername == SCHEME)

    def target(self, conn: Connection, password: str | None = None) -> Target:
        return dynamodb_url(conn.database, dict(conn.tls or {}))

    def fields(self, dialect: str) -> tuple[Field, ...]:
        return (
            Field("database", "Table", placeholder="the table's name, e.g. idempotency"),
            Field("tls.region", "Region", placeholder="e.g. eu-west-1 (empty: the AWS chain's)"),
            Field(
                "tls.endpoint_url",
                "Endpoint URL",
                placeholder="empty: AWS; e.g. http://localhost:8000 for DynamoDB Local",
            ),
            Field("tls.profile", "AWS profile", placeholder="empty: the default profile or AWS_PROFILE"),
            Field(
                "note",
                "Credentials come from the AWS chain (environment, profile, SSO, instance role); "
                "idemview stores none and calls only DescribeTable, Scan, Query and GetItem.",
                "note",
            ),
        )

    def connection_from(self, name: str, text: str) -> tuple[Connection, str | None]:
        from idemview.config import Connection
        from idemview.ledger.dynamodb_snapshot import parse_dynamodb_url

        t = parse_dynamodb_url(text)  # DynamoUrlError (a ValueError): credentials in the URL refused
        opts = {k: getattr(t, k) for k in OPTIONS if getattr(t, k)}
        return Connection(name=name, dialect=SCHEME, database=t.table, tls=opts), None

    def open(self, req: OpenRequest) -> Source:
        from dataclasses import replace

        from idemview.ledger.dynamodb_snapshot import open_dynamodb_ledger

        ledger = open_dynamodb_ledger(
            str(req.target),
            layout=req.layout if isinstance(req.layout, str) else None,  # SQL layouts do not apply
            **req.snapshot_kwargs(),
        )
        ledger.source = replace(ledger.source, backend=self.name, not_checkable=self.not_checkable(ledger))
        info = ledger.snapshot
        clock = "server time" if info.clock == "server" else "idemview's clock"
        detection = (
            f"{ledger.detection}; snapshot of {info.loaded} records at {clock} {info.server_time:%Y-%m-%d %H:%M:%S} UTC"
        )
        return Source(ledger, ledger.engine, detection, info.url)

    def test(self, target: Target, password: str | None, layout: str) -> str:
        from idemview.ledger.dynamodb_snapshot import test_dynamodb

        return test_dynamodb(str(target), layout)

    def detect(self, target: Target, password: str | None) -> list[Match]:
        from idemview.ledger.dynamodb_snapshot import (
            connect_dynamodb,
            describe_table,
            detect_dynamodb,
            parse_dynamodb_url,
        )

        t = parse_dynamodb_url(str(target))
        client = connect_dynamodb(t)
        try:
            return [
                Match(m.layout.name, m.confidence, m.reason)
                for m in detect_dynamodb(client, t, table=describe_table(client, t))
            ]
        finally:
            client.close()

    def not_checkable(self, ledger: Ledger) -> dict[FindingKind, str]:
        """What a DynamoDB snapshot cannot show (one item per primary key, what the layout maps:
        :func:`~idemview.ledger.dynamodb_snapshot.dynamodb_ledger_not_checkable`); none for a ledger that
        is no DynamoDB snapshot."""
        from idemview.layouts.dynamodb import DynamoLayout
        from idemview.ledger.dynamodb_snapshot import dynamodb_ledger_not_checkable

        lay = ledger.source.store_layout
        if not isinstance(lay, DynamoLayout):
            return {}
        return dynamodb_ledger_not_checkable(lay, ledger.lock_timeout_override)

    def through(self, target: Target, spec, connection_id, secret=None):
        raise InputError("--ssh does not apply to a dynamodb:// URL (it is reached over HTTPS)")


def _table(target: Target) -> str:
    s = str(target)
    return s.split("://", 1)[-1].split("?", 1)[0]


BACKEND = DynamoBackend()
