"""The Python API for notebooks and scripts (DESIGN §9): ledgers and evidence files as pandas DataFrames.

    >>> import idemview
    >>> led = idemview.open("ledger.db")                 # layout detected, opened read-only
    >>> ops = led.operations({"statuses": ["failed"]})   # a DataFrame, masked
    >>> for chunk in led.attempts(chunksize=50_000):     # large ledgers: an iterator of DataFrames
    ...     ...
    >>> df = idemview.read_evidence("export.csv")        # verifies the manifest's SHA-256 first

The frames have exactly the columns and rows of ``idemview export --rows operations|attempts|findings``
(same read contract: :func:`idemview.evidence.plan.plan_export` over :class:`~idemview.ledger.reader.Ledger`),
typed instead of text:

- ``instant`` columns → ``datetime64[ns, UTC]``; ``naive_instant`` columns (a layout's ``naive`` times,
  exported as stored wall time) are converted to UTC here with the layout's zone (DST folds take the
  standard-time reading, DST gaps move forward);
- ``integer`` → ``Int64`` (nullable); ``boolean`` → ``boolean``; ``text`` → ``string``;
  ``json`` → ``object`` (the masked Python value: dict, list, str, number).

Masking is on by default (DESIGN §6) with one :class:`~idemview.masking.masker.Masker` per opened
ledger, so a value masks to the same tag in every frame of that ledger; pass ``masked=False`` for raw
values (never for frames you share).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING, Any

from idemview.config import new_masker
from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind, Payload, Status
from idemview.evidence.plan import plan_export
from idemview.evidence.writer import ColumnSpec
from idemview.layouts.layout import Layout
from idemview.ledger.inputs import instant_value
from idemview.ledger.reader import Ledger
from idemview.masking.masker import Masker

if TYPE_CHECKING:  # pandas is imported when a frame is built, not at import time
    import pandas as pd

    #: An instant as the CLI's ``--now`` takes it: ISO-8601 text (naive = UTC), an aware ``datetime``,
    #: a ``pandas.Timestamp`` (:func:`idemview.ledger.inputs.instant_value`).
    TimeLike = str | datetime | pd.Timestamp

__all__ = ["LedgerFrames", "open", "read_evidence", "read_report"]

FilterLike = Filter | Mapping[str, Any] | None


def _filter(flt: FilterLike) -> Filter:
    """A :class:`Filter` from a Filter, ``None`` (everything) or a mapping of its fields; enum fields
    accept their string values (``{"statuses": ["failed"], "findings": ["duplicate_effect"]}``).
    Raises :class:`~idemview.errors.InputError`-compatible ``ValueError`` on an unknown field or value."""
    if flt is None:
        return Filter()
    if isinstance(flt, Filter):
        return flt
    if not isinstance(flt, Mapping):
        raise TypeError(f"filter must be a Filter, a mapping or None, not {type(flt).__name__}")
    d = dict(flt)
    unknown = set(d) - set(Filter.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown filter field(s): {', '.join(sorted(unknown))}")
    if "findings" in d:
        d["findings"] = [FindingKind(k) for k in d["findings"]]
    if "statuses" in d:
        d["statuses"] = [Status(s) for s in d["statuses"]]
    for k in ("since", "until"):  # what --since/--until take (idemview.ledger.inputs)
        if d.get(k) is not None:
            d[k] = instant_value(d[k], k)
    return Filter(**d)


def _plain(v: Any) -> Any:
    """Bytes and payloads become what a person would read before masking sees them (as the CSV)."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, Payload):
        return (
            v.value
            if v.encoding != "binary"
            else (v.value.hex() if isinstance(v.value, (bytes, bytearray)) else v.value)
        )
    return v


def _typed_frame(cols: list[ColumnSpec], rows: list[tuple], zones: Mapping[str, str]) -> pd.DataFrame:
    """One DataFrame from plan rows, each column converted by its :class:`ColumnSpec` kind."""
    import pandas as pd

    data: dict[str, Any] = {}
    for i, c in enumerate(cols):
        values = [r[i] for r in rows]
        data[c.name] = _series(c, values, zones.get(c.name, "UTC"))
    return pd.DataFrame(data, columns=[c.name for c in cols])


def _series(col: ColumnSpec, values: list[Any], zone: str) -> pd.Series:
    import pandas as pd

    kind = col.kind
    if kind == "integer":
        if all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in values):
            return pd.Series(values, dtype="Int64", name=col.name)
        # a masked or non-numeric value in an integer column: keep the text rather than lose it
        return pd.Series([None if v is None else str(v) for v in values], dtype="string", name=col.name)
    if kind == "boolean":
        return pd.Series(values, dtype="boolean", name=col.name)
    if kind == "instant":
        return pd.Series(pd.to_datetime(pd.Series(values, dtype=object), utc=True), name=col.name)
    if kind == "naive_instant":
        s = pd.to_datetime(pd.Series(values, dtype=object))
        if s.dt.tz is None:
            s = s.dt.tz_localize(zone, ambiguous=False, nonexistent="shift_forward")
        return pd.Series(s.dt.tz_convert("UTC"), name=col.name)
    if kind == "text":
        return pd.Series([None if v is None else str(v) for v in values], dtype="string", name=col.name)
    return pd.Series(values, dtype=object, name=col.name)


@dataclass
class LedgerFrames:
    """A ledger opened read-only for analysis; each method returns what the export of the same rows
    would contain, as a typed, masked DataFrame (see the module docstring for the dtypes).

    ``ledger`` is the underlying :class:`~idemview.ledger.reader.Ledger` (the read contract); ``masker``
    masks every frame of this object (one key, so equal values give equal tags across frames).
    Close with :meth:`close` or use as a context manager.
    """

    ledger: Ledger
    masked: bool = True
    masker: Masker = field(default_factory=new_masker)
    #: The SSH tunnel the ledger is read through (``ssh=``), closed by :meth:`close`; None when direct.
    tunnel: Any = None

    @property
    def layout(self) -> Layout:
        return self.ledger.layout

    def operations(
        self, filter: FilterLike = None, *, now: TimeLike | None = None, chunksize: int | None = None
    ) -> pd.DataFrame | Iterator[pd.DataFrame]:
        """One row per operation record matching ``filter`` (a Filter, a mapping of its fields, or None
        for all), ordered by record id; ``findings`` lists the kinds found at ``now`` (default: the
        current time, UTC). With ``chunksize`` (rows), an iterator of DataFrames instead."""
        return self._frames("operations", filter, now, chunksize)

    def attempts(
        self, filter: FilterLike = None, *, now: TimeLike | None = None, chunksize: int | None = None
    ) -> pd.DataFrame | Iterator[pd.DataFrame]:
        """Every recorded attempt of the operations matching ``filter`` (none for counter-only
        layouts). With ``chunksize`` (rows), an iterator of DataFrames instead."""
        return self._frames("attempts", filter, now, chunksize)

    def findings(
        self, now: TimeLike | None = None, *, filter: FilterLike = None, chunksize: int | None = None
    ) -> pd.DataFrame | Iterator[pd.DataFrame]:
        """The findings (DESIGN §5) at ``now`` (aware; default the current time), one row per finding:
        ledger, kind, severity, scope, idempotency_key, at (UTC), explanation, evidence."""
        return self._frames("findings", filter, now, chunksize)

    def _frames(
        self, rows: str, flt: FilterLike, now: TimeLike | None, chunksize: int | None
    ) -> pd.DataFrame | Iterator[pd.DataFrame]:
        # what the CLI's --now takes (idemview.ledger.inputs): ISO text, an aware datetime or
        # pandas.Timestamp; TypeError for anything else, InputError (a ValueError) when out of range
        now = datetime.now(UTC) if now is None else instant_value(now, "now")
        if chunksize is not None and (not isinstance(chunksize, int) or chunksize < 1):
            raise ValueError(f"chunksize must be a whole number >= 1, not {chunksize!r}")
        plan = plan_export(self.ledger, _filter(flt), rows, now)
        cols = plan.columns
        zones = self._zones(rows)
        cells = self._cells(cols, plan.rows)
        if chunksize is None:
            return _typed_frame(cols, list(cells), zones)
        return self._chunks(cols, cells, zones, chunksize)

    @staticmethod
    def _chunks(cols, cells, zones, chunksize) -> Iterator[pd.DataFrame]:
        while True:
            batch = list(islice(cells, chunksize))
            if not batch:
                return
            yield _typed_frame(cols, batch, zones)

    def _cells(self, cols: list[ColumnSpec], rows: Iterator[tuple]) -> Iterator[tuple]:
        if not self.masked:
            yield from (tuple(_plain(v) for v in r) for r in rows)
            return
        masks = [self.masker.for_column(c.name) for c in cols]
        for r in rows:
            yield tuple(None if v is None else m(_plain(v)) for m, v in zip(masks, r, strict=True))

    def _zones(self, rows: str) -> dict[str, str]:
        """IANA zone of every naive time column (to turn stored wall times back into UTC)."""
        lay = self.ledger.layout
        if rows == "attempts":
            a = lay.attempts
            return {
                k: tc.zone
                for k in ("started_at", "finished_at")
                if (tc := getattr(a, k, None)) is not None and tc.encoding == "naive"
            }
        return {k: tc.zone for k, tc in lay.times.items() if tc.encoding == "naive"}

    def close(self) -> None:
        """Release the database connections (and close the SSH tunnel, if any)."""
        self.ledger.engine.dispose()
        if self.tunnel is not None:
            self.tunnel.close()

    def __enter__(self) -> LedgerFrames:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open(  # noqa: A001 - the API's name (DESIGN §9); builtins.open is used explicitly in this module
    url: str,
    layout: str | Layout | None = None,
    *,
    masked: bool = True,
    masker: Masker | None = None,
    naive_zone: str | None = None,
    schema: str | None = None,
    status_map: dict[str, str] | None = None,
    outcome_map: dict[str, str] | None = None,
    ssh: str | None = None,
    ssh_key: str | None = None,
    write_ttl_s: float | None = None,
) -> LedgerFrames:
    """Open a ledger read-only for analysis.

    ``url``: a SQLAlchemy URL, a SQLite file, a ``redis://``/``rediss://`` URL (read as a snapshot,
    ``layout`` then a key-value preset or file), a ``dynamodb://TABLE?region=R`` URL (a snapshot of the
    table, ``layout`` a DynamoDB preset or file; credentials from the AWS chain), or the name of a saved
    connection (its password then comes from the keyring, its layout and naive zone are used unless
    given). ``layout``: a preset name, a layout file, a :class:`Layout`, or ``None`` to detect it as
    ``idemview detect`` does.
    ``naive_zone``: the IANA zone the ledger's naive timestamps were written in. ``masker``: a
    :class:`Masker` (e.g. with a fixed key for reproducible tags); default a fresh one.
    ``schema``: where the layout's tables are (the CLI's ``--schema``; default the preset's schema, else
    found as detection finds them). ``status_map`` / ``outcome_map``: extra raw values, ``{RAW: STATUS}``
    (the CLI's ``--map-status`` / ``--map-outcome``), merged over a saved connection's own maps.
    ``ssh`` (``USER@HOST[:PORT]``) / ``ssh_key`` (a private key path): read through an SSH tunnel (the
    CLI's ``--ssh`` / ``--ssh-key``; default a saved connection's own), closed by :meth:`LedgerFrames.close`.
    ``write_ttl_s``: for a Redis ledger, the TTL in seconds the store sets at every write (Celery's
    ``result_expires``; the CLI's ``--write-ttl``), over the connection's and the layout's ``[expiry]
    write_ttl_seconds``: a record without a time of its own is dated from its remaining TTL.

    Raises :class:`~idemview.errors.CannotConnect` (unreachable, not a database),
    :class:`~idemview.errors.LayoutMismatch` (no preset fits / the layout's tables are missing),
    :class:`~idemview.errors.InvalidLayout` (a malformed layout file), :class:`~idemview.errors.InputError`
    (a ``write_ttl_s`` that is no number of seconds above 0, or given for a ledger that is no Redis one).
    """
    from idemview.backends import Tunables
    from idemview.services.opener import OpenSpec, saved_connection, spec_for_connection

    saved = saved_connection(url)
    if saved is not None:  # a saved connection, as on the command line; its password from the keyring
        from idemview.config import CredentialStore

        spec = spec_for_connection(saved, CredentialStore().get(saved.id))
        spec.status_map = {**spec.status_map, **(status_map or {})}
        spec.outcome_map = {**spec.outcome_map, **(outcome_map or {})}
    else:
        spec = OpenSpec(url=url, name="", status_map=dict(status_map or {}), outcome_map=dict(outcome_map or {}))
    if ssh_key and not (ssh or spec.ssh):  # as the CLI's --ssh-key: a key alone would be ignored silently
        from idemview.errors import InputError

        raise InputError("ssh_key needs ssh='USER@HOST[:PORT]' (or a saved connection with an SSH tunnel)")
    spec.ssh, spec.ssh_key = ssh or spec.ssh, ssh_key or spec.ssh_key
    spec.layout = layout if layout is not None else spec.layout
    spec.naive_zone = naive_zone if naive_zone is not None else spec.naive_zone
    spec.schema = schema if schema is not None else spec.schema
    from idemview.ledger.inputs import write_ttl_value
    from idemview.services.opener import open_source

    ttl = write_ttl_value(write_ttl_s, "write_ttl_s") if write_ttl_s is not None else None
    opened = open_source(
        spec, tunables=Tunables(write_ttl_s=ttl), no_fit_hint="; pass layout=NAME|FILE (see `idemview presets`)"
    )
    return LedgerFrames(
        opened.ledger, masked=masked, masker=masker if masker is not None else new_masker(), tunnel=opened.tunnel
    )


def read_evidence(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read an evidence CSV written by ``idemview export`` after verifying it against its manifest
    (``PATH.manifest.json``): SHA-256 and size of the file, then the row count.

    Column types are restored from the manifest's ``columns`` kinds (``instant`` → UTC datetimes,
    ``naive_instant`` → naive datetimes as exported, ``integer`` → ``Int64``, ``boolean``, ``json`` →
    parsed values, ``text`` → ``string`` with the formula guard's leading ``'`` removed). The manifest's
    ``null`` literal is read as missing.

    Raises :class:`~idemview.errors.EvidenceMismatch` (and nothing else for a bad file) when the
    manifest is missing, not JSON, lacks a key or holds a value of the wrong type, when the file differs
    from it (changed after export), or when a cell does not fit its column's kind (an instant that is
    none). Text round-trips exactly (:mod:`idemview.evidence.cells`).
    """
    from idemview.evidence.reading import read_evidence_frame

    return read_evidence_frame(path)


def read_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Verify an incident report written by ``idemview report`` (or the GUI's "Export report…")
    against its manifest (``PATH.manifest.json``: SHA-256 and size of the HTML bytes, DESIGN §5.4 and
    §7) and return the manifest (a dict: ``ledger``, ``filter``, ``now``, ``report`` counts,
    ``masking``, ``html``). Raises :class:`~idemview.errors.EvidenceMismatch` (and nothing else for a
    bad file) when the manifest is missing or unreadable, is not a report's, or the file differs from
    it (a changed byte)."""
    from idemview.evidence.reading import read_report_manifest

    return read_report_manifest(path)
