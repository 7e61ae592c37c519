"""The incident report (DESIGN §5.4, issue 24): one self-contained HTML file for the people who decide
(finance, support, legal, an auditor), plus ``FILE.html.manifest.json`` with its SHA-256 (§7).

What it holds, in order: the filter as a sentence, ``now``, the ledger (connection name, dialect, host,
database: never a user or password, the manifest's own description), counts per finding kind and per
action class, the incident overview chart, then each operation with findings: its findings with their
explanations and evidence rows, its timeline as a picture, its attempts, records and effect records.
More than ``full`` operations (default 200): the first ``full`` in full, the rest as one table, and the
first page says so. Operations come in the scan's order (finding kind in report order, then scope
and key), so a report and ``idemview scan`` list them alike, and the first ``full`` are known as the
findings stream in (nothing is sorted over all of them).

Promises, each kept by one chokepoint:

- **masked**: every value that comes from the ledger reaches the page through :class:`Sink`, which
  formats it with the CSV export's own cell formatters (``writer._make_formatter``: the same Masker
  call per column name, the same text form, the same formula guard) and then HTML-escapes it. The
  page's own words are literals; SVG text goes through ``svg.Svg`` (escaped) and carries only times,
  numbers and outcome words.
- **no request anywhere**: no script, no ``href``/``src`` at all, styles and SVG inline, and a
  ``Content-Security-Policy`` of ``default-src 'none'; style-src 'unsafe-inline'; img-src data:``.
- **bounded memory**: findings are read kind by kind (``FindingEngine.iter_run``); full ``Finding``
  objects are kept for the first ``full`` operations only, a compact row (kind, severity, key, time,
  masked explanation) for the rest; each operation's records, attempts and effect records are read,
  written and dropped one operation at a time; HTML is written out in ~1 MB pieces while it is hashed.
- **complete or absent**: written under a temporary name and moved into place with its manifest only
  when complete (``writer.publish_with_manifest``, the CSV export's code).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from idemview import __version__
from idemview.config import new_masker
from idemview.domain.filters import Filter
from idemview.domain.model import LEDGER_KINDS, SEVERITY_ORDER, Finding, FindingKind, Severity
from idemview.domain.palette import KIND_WORDS, SEVERITY_COLOURS, SEVERITY_GLYPHS, STATUS_WORDS, light
from idemview.evidence.plan import MASKING_KEYS, check_target, ledger_description
from idemview.evidence.svg import overview_svg, timeline_svg
from idemview.evidence.writer import (
    ColumnSpec,
    ExportCancelled,
    VerifyReport,
    _make_formatter,
    _mask_uncounted,
    _plain,
    _sanitize_ledger,
    _strip_urls,
    _unlink_quiet,
    _utc_now_iso,
    publish_with_manifest,
    verify_evidence,
)
from idemview.findings.engine import FindingEngine
from idemview.ledger.batch import for_batch
from idemview.ledger.reader import Ledger, histogram, time_span
from idemview.ledger.times import iso
from idemview.masking.masker import Masker

UTC = UTC
__all__ = ["DEFAULT_FULL", "CSP", "ReportResult", "Sink", "verify_report", "write_report"]

DEFAULT_FULL = 200
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
MANIFEST_FORMAT = "idemview-report-manifest/1"
FLUSH_BYTES = 1 << 20
#: Evidence rows shown per finding (a retry storm may carry hundreds; the CSV export has them all).
EVIDENCE_ROWS = 50
#: Characters of an operation's stored error shown (masked first; the CSV export has it whole).
PAYLOAD_CHARS = 1000
#: Attempts drawn and listed per operation.
ATTEMPT_ROWS = 200
#: Findings listed in the closing table at most (the rest are counted; the evidence CSV has every row):
#: what the report holds beyond the first ``full`` operations stays bounded however large the ledger.
TABLE_ROWS = 10_000


@dataclass(frozen=True)
class ReportResult:
    """What :func:`write_report` wrote: final paths, SHA-256 (hex) and size (bytes) of the HTML, the
    number of operations with findings (``operations``), how many are shown in full (``in_full``),
    the number of findings, and the masking counts (kind → values masked) of this report."""

    path: str
    manifest_path: str
    sha256: str
    size: int
    operations: int
    in_full: int
    findings: int
    masking: dict[str, int] = field(default_factory=dict)


class Sink:
    """The one way a ledger value reaches the report: masked and formatted by the CSV export's cell
    formatter for its column name and kind (``text``, ``instant``, ``json``, ``integer``; one
    formatter per (name, kind), made once), then HTML-escaped (``&<>"'``). ``None`` is ``—``."""

    NULL = "—"

    def __init__(self, masker: Masker):
        self.masker = masker
        self._fmts: dict[tuple[str, str], Callable[[Any], str]] = {}

    def __call__(self, value: Any, column: str = "value", kind: str | None = None, limit: int | None = None) -> str:
        """``value`` masked, formatted and escaped; ``limit``: at most that many characters of the
        formatted text (cut after masking, before escaping, with "…")."""
        if value is None:
            return self.NULL
        if kind is None:
            kind = "json" if isinstance(value, (dict, list, tuple)) else "text"
        f = self._fmts.get((column, kind))
        if f is None:
            f = self._fmts[(column, kind)] = _make_formatter(ColumnSpec(column, kind), self.masker, "")
        text = f(value)
        if limit is not None and len(text) > limit:
            text = text[:limit] + "…"
        return html.escape(text, quote=True)

    def when(self, t: datetime | None, column: str = "at") -> str:
        """An instant in UTC to the millisecond (``2026-11-30 11:58:03.120 UTC``), through the
        formatter like any other cell (a column sensitive by name comes back masked, as text)."""
        if t is None:
            return self.NULL
        s = self(t, column, "instant")
        try:
            v = datetime.fromisoformat(html.unescape(s))
        except ValueError:  # masked: the tag is the text
            return s
        if v.tzinfo is not None:
            v = v.astimezone(UTC)
        ms = f".{v.microsecond // 1000:03d}" if v.microsecond else ""
        # date and time each kept on one line; a narrow column wraps between them
        zone = " UTC" if v.tzinfo is not None else ""
        return f"<span class=nw>{v:%Y-%m-%d}</span> <span class=nw>{v:%H:%M:%S}{ms}{zone}</span>"


_STYLE = """
:root{color-scheme:light}
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#212121;
margin:24px auto;max-width:1000px;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:24px 0 8px;border-bottom:1px solid #e0e0e0}
h3{font-size:14px;margin:16px 0 4px;text-transform:uppercase;letter-spacing:.04em;color:#616161}
.sentence{font-size:16px;font-weight:600;margin:8px 0}
.muted{color:#616161}.notice{background:#fff8e1;border-left:4px solid #a66c00;padding:8px 12px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.meta dt{color:#616161}dl.meta dd{margin:0}
table{border-collapse:collapse;margin:4px 0 8px;font-size:12.5px}
th,td{border:1px solid #e0e0e0;padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}
td.w{overflow-wrap:anywhere;min-width:12em}
th{background:#fafafa;font-weight:600}td.t{min-width:6.5em}.nw{white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums}
td code,dd code{font:12px ui-monospace,'DejaVu Sans Mono',monospace}
.finding{border-left:4px solid #9e9e9e;padding:4px 10px;margin:8px 0}
.sev{font-weight:700;white-space:nowrap}
section.op{margin-top:28px}
.op-head{display:flex;justify-content:space-between;gap:12px;align-items:baseline}
.wide{overflow-x:auto}
footer{margin-top:32px;font-size:12px;color:#616161}
@media print{
 body{margin:0;max-width:none;font-size:11pt}
 section.op,section.rest{break-before:page;page-break-before:always}
 .finding,table,svg{break-inside:avoid;page-break-inside:avoid}
 .wide{overflow:visible}
 @page{margin:15mm}
}
"""


def _sev_chip(sev: Severity) -> str:
    return f'<span class="sev" style="color:{light(SEVERITY_COLOURS, sev)}">{SEVERITY_GLYPHS[sev]} {sev.value}</span>'


@dataclass(slots=True)
class _Brief:
    """A finding of an operation beyond the first ``full``: what the closing table shows of it."""

    kind: FindingKind
    severity: Severity
    action: str | None
    at: datetime | None
    explanation: str  # already masked and escaped


class _Out:
    """HTML text written to a binary file in pieces, hashed as written."""

    def __init__(self, f):
        self.f, self.h, self.size, self.buf, self.pending = f, hashlib.sha256(), 0, [], 0

    def w(self, s: str) -> None:
        self.buf.append(s)
        self.pending += len(s)
        if self.pending >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        data = "".join(self.buf).encode("utf-8")
        self.buf, self.pending = [], 0
        self.h.update(data)
        self.f.write(data)
        self.size += len(data)


def write_report(
    ledger: Ledger,
    flt: Filter | None,
    out_path: str | Path,
    *,
    now: datetime | None = None,
    full: int = DEFAULT_FULL,
    connection_name: str | None = None,
    masker: Masker | None = None,
    masking_key: str = "export",
    sentence_shown: str | None = None,
    overwrite: bool = False,
    progress: Callable[[str, int], Any] | None = None,
    cancel: Callable[[], bool] | None = None,
    timeout_s: float | None = None,
) -> ReportResult:
    """Write the incident report of what ``flt`` shows of ``ledger`` to ``out_path`` (HTML) and
    ``out_path + ".manifest.json"``; see the module docstring for what it holds.

    ``now`` (aware; default the current time) is the instant findings are computed for. ``full``
    (>= 0): operations shown in full; the rest are a table. ``masker`` defaults to a fresh one (a
    random key for this report); ``masking_key`` (``"export"`` or ``"session"``) and
    ``sentence_shown`` are recorded as in :func:`idemview.evidence.plan.export_evidence`.
    ``progress(phase, n)`` is called as findings are read (``"findings"``, findings so far) and
    operations written (``"operations"``, operations written); ``cancel()`` is polled at the same
    points. Batch work: ``timeout_s`` bounds each statement (``None``: no bound).

    Raises :class:`~idemview.errors.TargetExists` / :class:`~idemview.errors.TargetRefused` for a
    target :func:`~idemview.evidence.plan.check_target` refuses, ``ValueError`` for ``full < 0``,
    :class:`~idemview.evidence.writer.ExportCancelled` on cancel, and
    :class:`~idemview.evidence.writer.FinalNameTaken` when the name appeared meanwhile; database
    errors propagate. In every failure no file is left under the final names."""
    if full < 0:
        raise ValueError("full must be >= 0")
    out = check_target(out_path, ledger, overwrite=overwrite)
    ledger = for_batch(ledger, timeout_s)
    flt = flt or Filter()
    now = (now or datetime.now(UTC)).astimezone(UTC)
    masker = masker or new_masker()
    before = masker.counts
    sink = Sink(masker)

    def check() -> None:
        if cancel is not None and cancel():
            raise ExportCancelled("report cancelled; no file written")

    fe = FindingEngine(ledger, now)
    unsupported = fe.unsupported()  # kinds this layout or schema cannot have, and why
    got = _collect(fe, flt, full, sink, check, progress, timeout_s)
    # the page, streamed into a temporary file, then published with its manifest
    directory, base = str(out.parent), out.name
    tmp: str | None
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            o = _Out(fh)
            ident = ledger_description(ledger, connection_name)
            _write_page(o, sink, ledger, flt, now, ident, sentence_shown, unsupported, got, full, base, check, progress)
            o.flush()
            fh.flush()
            os.fsync(fh.fileno())
        check()
        sha, size = o.h.hexdigest(), o.size
        after = masker.counts
        counts = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}
        doc = _manifest(
            ledger, flt, now, ident, masker, masking_key, sentence_shown, counts, base, sha, size, got.summary(full)
        )
        mtext = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        t, tmp = tmp, None
        final = os.path.abspath(out)
        mpath = publish_with_manifest(t, mtext.encode("utf-8"), final, overwrite=overwrite)
    except BaseException:
        _unlink_quiet(tmp)
        raise
    n_ops = len(got.order)
    if progress is not None:
        progress("operations", n_ops)
    return ReportResult(final, mpath, sha, size, n_ops, min(full, n_ops), got.n_findings, counts)


@dataclass
class _Collected:
    """What phase 1 of :func:`write_report` gathered from the findings, for the page and the manifest."""

    order: list[tuple[str, str]] = field(default_factory=list)  # operations in the order first found
    detailed: dict[tuple[str, str], list[Finding]] = field(default_factory=dict)  # the first ``full``
    briefs: dict[tuple[str, str], list[_Brief]] = field(default_factory=dict)  # the rest, up to TABLE_ROWS
    per_kind: dict[FindingKind, int] = field(default_factory=dict)
    per_action: dict[str, int] = field(default_factory=dict)
    markers: list[tuple[datetime, Severity, str]] = field(default_factory=list)
    audit: list[Finding] = field(default_factory=list)  # about the ledger itself, not about an operation
    n_findings: int = 0
    n_briefs: int = 0

    def add(self, kind: FindingKind, f: Finding, full: int, sink: Sink) -> None:
        """Count ``f`` (of ``kind``) and keep it in full (first ``full`` operations) or as a brief."""
        self.n_findings += 1
        self.per_kind[kind] = self.per_kind.get(kind, 0) + 1
        if f.kind in LEDGER_KINDS:
            self.audit.append(f)  # one per column: bounded by the ledger's schema, not its size
            return
        ref = (f.scope, f.key)
        action = getattr(f, "action", None)
        if action is not None:
            self.per_action[str(action)] = self.per_action.get(str(action), 0) + 1
        if f.at is not None and len(self.markers) < 20000:
            self.markers.append((f.at, f.severity, KIND_WORDS[f.kind]))
        if ref in self.detailed:
            self.detailed[ref].append(f)
            return
        if ref not in self.briefs:
            self.order.append(ref)
            if len(self.detailed) < full:
                self.detailed[ref] = [f]
                return
            self.briefs[ref] = []
        if self.n_briefs < TABLE_ROWS:
            self.briefs[ref].append(_brief(f, action, sink))
            self.n_briefs += 1

    def summary(self, full: int) -> dict:
        """The manifest's ``report`` object."""
        n = len(self.order)
        return {
            "operations": n,
            "in_full": min(full, n),
            "as_table": max(0, n - full),
            "table_rows": self.n_briefs,
            "full_limit": full,
            "findings": self.n_findings,
            "counts": {k.value: c for k, c in self.per_kind.items()},
            **({"actions": self.per_action} if self.per_action else {}),
        }


def _collect(fe: FindingEngine, flt: Filter, full: int, sink: Sink, check, progress, timeout_s) -> _Collected:
    """Phase 1 of :func:`write_report`: findings, kind by kind — full Findings for the first ``full``
    operations, briefs for the rest."""
    got = _Collected()
    rest = flt.without(findings=True)
    kinds = list(flt.findings) or None
    for kind, fs in fe.iter_run(kinds, rest if not rest.is_empty() else None, timeout_s=timeout_s):
        check()
        for f in fs:
            got.add(kind, f, full, sink)
        del fs
        if progress is not None:
            progress("findings", got.n_findings)
    return got


def _write_page(o, sink, ledger, flt, now, ident, sentence_shown, unsupported, got, full, base, check, progress):
    """Phase 2 of :func:`write_report`: the whole HTML page into ``o`` (the operations in full are
    taken out of ``got.detailed`` as they are written)."""
    masker = sink.masker
    shown_ident = _mask_uncounted(masker, _strip_urls(_sanitize_ledger(_plain(ident))))
    _head(o, sink, ledger, flt, now, shown_ident, sentence_shown)
    detailed, order = got.detailed, got.order
    unlisted = got.n_findings - sum(len(v) for v in detailed.values()) - got.n_briefs  # not in the table either
    asked = set(flt.findings) if flt.findings else set(unsupported)
    why_not = {k: masker.mask_text(v, count=False) for k, v in unsupported.items() if k in asked}
    _summary(o, ledger, order, full, got.n_findings, got.per_kind, got.per_action, unlisted, why_not)
    _audit(o, sink, got.audit)
    _overview(o, ledger, flt, now, got.markers)
    got.markers = []
    written = 0
    for i, ref in enumerate(order):
        if ref not in detailed:
            continue
        fs = detailed.pop(ref)
        check()
        _operation(o, sink, ledger, ref, fs, now, i + 1, min(full, len(order)))
        written += 1
        if progress is not None and written % 10 == 0:
            progress("operations", written)
    _rest_table(o, sink, order, got.briefs)
    o.w(
        "<footer><p>Written by idemview "
        + html.escape(__version__)
        + " at "
        + html.escape(_utc_now_iso())
        + ". Masked: secrets are replaced by a kind and a short tag, equal for equal values in this "
        "report. The SHA-256 of this file is in "
        + html.escape(base)
        + ".manifest.json beside it; <code>idemview.read_report(PATH)</code> checks it.</p></footer>"
        "</body></html>\n"
    )


def _brief(f: Finding, action: str | None, sink: Sink) -> _Brief:
    return _Brief(f.kind, f.severity, action, f.at, sink(f.explanation, "explanation"))


def _head(o: _Out, sink: Sink, ledger: Ledger, flt: Filter, now: datetime, ident: dict, shown: str | None) -> None:
    name = ident.get("connection") or ledger.name
    o.w(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Incident report: {sink(name, 'ledger')}</title><style>{_STYLE}</style></head><body>"
        f"<header><h1>Incident report: {sink(name, 'ledger')}</h1>"
        f'<p class="sentence">{sink(flt.sentence(), "filter")}</p>'
    )
    if shown and shown != flt.sentence():
        o.w(f'<p class="muted">As shown on screen: {sink(shown, "filter")}</p>')
    rows = [
        ("Findings as of", f"<b>{sink.when(now, 'now')}</b> (the <code>now</code> every finding is computed for)"),
        ("Ledger", ", ".join(f"{html.escape(str(k))} {sink(v, 'ledger')}" for k, v in ident.items() if v)),
        (
            "Layout",
            f"{sink(ledger.layout.name, 'layout')} <span class=muted>(sha256 "
            f"{sink(str(ledger.layout.hash)[:16], 'layout')}…)</span>",
        ),
        ("Written", f"{html.escape(_utc_now_iso())} by idemview {html.escape(__version__)}"),
    ]
    fx = getattr(ledger, "effects", None)
    if fx is not None:
        d = fx.describe()
        rows.append(
            (
                "Effect records",
                f"{sink(d.get('table'), 'table')} ({sink(d.get('dialect'), 'dialect')} "
                f"{sink(d.get('database') or d.get('host'), 'database')})",
            )
        )
    o.w('<dl class="meta">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>")


def _summary(o, ledger, order, full, n_findings, per_kind, per_action, unlisted=0, why_not=None) -> None:
    n_ops = len(order)
    if why_not:  # said first: "no findings" must not read as "checked and clean"
        o.w(
            '<p class="notice">Not checkable with this layout: '
            + "; ".join(f"<b>{KIND_WORDS[k]}</b> ({html.escape(v)})" for k, v in why_not.items())
            + ".</p>"
        )
    if not n_ops:
        o.w(
            '<p class="notice">No findings for this filter'
            + (" among the kinds this layout can check" if why_not else "")
            + ".</p>"
        )
    elif n_ops > full:
        o.w(
            f'<p class="notice"><b>{_n(n_ops, "operation")}</b> with {_n(n_findings, "finding")}. The first {full:,} '
            f"are shown in full (findings, timeline, attempts, records, effect records); the other "
            f"{n_ops - full:,} are listed in one table at the end"
            + (f" (its first {TABLE_ROWS:,} findings; {unlisted:,} more are counted, not listed)" if unlisted else "")
            + ". The evidence CSV (<code>idemview export --rows findings</code>) holds every row.</p>"
        )
    else:
        o.w(
            f'<p class="notice"><b>{_n(n_ops, "operation")}</b> with {_n(n_findings, "finding")}, '
            + ("each " if n_ops > 1 else "")
            + "shown in full below.</p>"
        )
    o.w(
        '<p class="muted">Operations are in the scan\'s order: by finding kind in the order of the table '
        "below, then scope and idempotency key.</p></header>"
    )
    if per_kind:
        o.w("<h2>Findings by kind</h2><table><tr><th>kind</th><th>severity (default)</th><th>findings</th></tr>")
        from idemview.domain.model import DEFAULT_SEVERITY

        for k, n in per_kind.items():
            o.w(f"<tr><td>{KIND_WORDS[k]}</td><td>{_sev_chip(DEFAULT_SEVERITY[k])}</td><td class=n>{n:,}</td></tr>")
        o.w("</table>")
    if per_action:  # findings carry an action class (DESIGN §5.1) once the scan assigns one
        o.w("<h2>Findings by action class</h2><table><tr><th>action class</th><th>findings</th></tr>")
        for a, n in sorted(per_action.items(), key=lambda kv: -kv[1]):
            o.w(f"<tr><td>{html.escape(a)}</td><td class=n>{n:,}</td></tr>")
        o.w("</table>")


def _audit(o: _Out, sink: Sink, audit: list[Finding]) -> None:
    """The ledger audit (``secret_at_rest``, DESIGN §5): one row per column (and JSON path) that keeps
    secrets in plain text, with the explanation (counts, kinds, what to change); never a value."""
    if not audit:
        return
    o.w(
        "<h2>Ledger audit</h2><p class=muted>What the ledger itself stores in plain text, from a sample of its "
        "newest rows: the columns to change, not operations.</p>"
        "<table><tr><th>severity</th><th>column</th><th>what it keeps, and what to change</th></tr>"
    )
    for f in audit:
        col = getattr(f, "column", None) or ""
        o.w(
            f"<tr><td>{_sev_chip(f.severity)}</td><td><code>{sink(col, 'column')}</code></td>"
            f"<td>{sink(f.explanation, 'explanation')}</td></tr>"
        )
    o.w("</table>")


def _overview(o: _Out, ledger: Ledger, flt: Filter, now: datetime, markers) -> None:
    o.w("<h2>Incident overview</h2>")
    lo, hi = time_span(ledger)
    found = [m[0] for m in markers]
    if found and not flt.without(findings=True, times=True).is_empty():
        # a narrow filter (a key, a kind): the chart spans its findings, not the whole ledger
        a, b = min(found), max(found)
        pad = max(b - a, timedelta(minutes=10)) / 4
        lo, hi = a - pad, b + pad
    if flt.since is not None:
        lo = max(lo, flt.since) if lo is not None else flt.since
    if flt.until is not None:
        hi = min(hi, flt.until) if hi is not None else flt.until
    if lo is None or hi is None:
        o.w('<p class="muted">The ledger keeps no attempt or creation times to draw.</p>')
        return
    if hi <= lo:
        hi = lo + timedelta(seconds=60)
    hi = hi + (hi - lo) / 200  # the last attempt inside the last bucket
    h = histogram(ledger, lo, hi, buckets=120, flt=flt.without(times=True), now=now)
    what = "Attempts started" if h.source == "attempts" else "Operations created"
    o.w(
        f'<p class="muted">{what} per interval of {_dur((hi - lo).total_seconds() / 120)}, stacked by outcome, '
        "for the filtered operations; a triangle marks each finding (its colour: severity). Times in UTC.</p>"
    )
    o.w('<div class="wide">' + overview_svg(h.edges, h.counts, h.source, markers) + "</div>")


def _n(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _dur(s: float) -> str:
    from idemview.ledger.times import human_duration

    return human_duration(s)


def _operation(o: _Out, sink: Sink, ledger: Ledger, ref, fs: list[Finding], now, i: int, n: int) -> None:
    """One operation in full: its facts, findings, timeline, attempts, records and effect records."""
    scope, key = ref
    recs = ledger.records(scope, key)
    atts = ledger.attempts(scope, key, recs)
    rec = recs[0] if recs else None
    worst = min((f.severity for f in fs), key=lambda s: SEVERITY_ORDER[s])
    o.w(
        f'<section class="op"><div class="op-head"><h2>{i:,}. <code>{sink(key, "idempotency_key")}</code></h2>'
        f"<span>{_sev_chip(worst)} · operation {i:,} of {n:,}</span></div>"
    )
    facts = _facts(sink, scope, rec, recs, atts)
    o.w('<dl class="meta">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>")
    o.w("<h3>Findings</h3>")
    for f in fs:
        _finding(o, sink, f)
    o.w("<h3>Timeline</h3>")
    created = rec.created_at if rec else None
    expires = rec.expires_at if rec else None
    o.w('<div class="wide">' + timeline_svg(atts[:ATTEMPT_ROWS], created, expires, now) + "</div>")
    if atts:
        o.w("<h3>Attempts</h3>")
        _rows_table(o, sink, (_attempt_row(a) for a in atts[:ATTEMPT_ROWS]))
    if len(recs) > 1:
        o.w("<h3>Records for this key</h3>")
        _rows_table(o, sink, (_record_row(r) for r in recs))
    fx = getattr(ledger, "effects", None)
    if fx is not None:
        effects = fx.records_of_operation(scope, key)
        o.w("<h3>Effect records</h3>")
        if not effects:
            o.w('<p class="muted">No effect record downstream for this operation.</p>')
        else:
            _rows_table(
                o,
                sink,
                (
                    {"effect_record": e.record_id, "reference": e.reference, "at": e.at, **e.shown}
                    for e in effects[:ATTEMPT_ROWS]
                ),
            )
    o.w("</section>")


def _facts(sink: Sink, scope: str, rec, recs: list, atts: list) -> list[tuple[str, str]]:
    """(label, HTML) pairs of an operation's head: its first record's fields, masked."""
    facts = [("Scope", sink(scope or None, "scope"))]
    if rec is None:
        facts.append(("Record", "no longer in the ledger (it may have been purged)"))
        return facts
    facts += [
        ("Kind", sink(rec.kind, "kind")),
        ("Status", f"{STATUS_WORDS[rec.status]} (ledger: {sink(rec.raw_status, 'raw_status')})"),
        ("Created", sink.when(rec.created_at, "created_at")),
        ("Expires", sink.when(rec.expires_at, "expires_at")),
        ("Intent", f"<code>{sink(rec.intent_ref, 'intent_ref')}</code>"),
        ("Effect", f"<code>{sink(rec.effect_ref, 'effect_ref')}</code>"),
        *([("Error", f"<code>{sink(rec.error, 'error', limit=PAYLOAD_CHARS)}</code>")] if rec.error else []),
        (
            "Attempts",
            f"{rec.attempt_count if rec.attempt_count is not None else len(atts):,}"
            + (f" · {len(recs)} records for this key" if len(recs) > 1 else ""),
        ),
    ]
    return facts


def _finding(o: _Out, sink: Sink, f: Finding) -> None:
    """One finding of an operation: its chip, sentence and (at most EVIDENCE_ROWS) evidence rows."""
    col = light(SEVERITY_COLOURS, f.severity)
    action = getattr(f, "action", None)
    o.w(
        f'<div class="finding" style="border-color:{col}"><div>{_sev_chip(f.severity)} · '
        f"<b>{KIND_WORDS[f.kind]}</b>"
        + (f" · {html.escape(str(action))}" if action else "")
        + (f' <span class="muted">at {sink.when(f.at)}</span>' if f.at else "")
        + f"</div><p>{sink(f.explanation, 'explanation')}</p>"
    )
    _rows_table(o, sink, f.evidence[:EVIDENCE_ROWS])
    if len(f.evidence) > EVIDENCE_ROWS:
        o.w(f'<p class="muted">… and {len(f.evidence) - EVIDENCE_ROWS:,} more evidence rows (in the CSV).</p>')
    o.w("</div>")


def _attempt_row(a) -> dict:
    return {
        "number": a.number,
        "started_at": a.started_at,
        "finished_at": a.finished_at,
        "outcome": a.outcome.value,
        "raw_outcome": a.raw_outcome,
        "effect_ref": a.effect_ref,
        "worker": a.worker,
        "error": a.error,
    }


def _record_row(r) -> dict:
    return {
        "record_id": r.row_id,
        "status": r.status.value,
        "raw_status": r.raw_status,
        "created_at": r.created_at,
        "completed_at": r.completed_at,
        "expires_at": r.expires_at,
        "fingerprint": r.fingerprint,
        "intent_ref": r.intent_ref,
        "effect_ref": r.effect_ref,
    }


def _rows_table(o: _Out, sink: Sink, rows: Iterable[dict]) -> None:
    """Rows (dicts) as a table: columns are the union of their keys in first-seen order, each cell
    through the sink under its column name (instants as instants, structures as JSON)."""
    rows = list(rows)
    if not rows:
        return
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    o.w('<div class="wide"><table><tr>' + "".join(f"<th>{sink(c, 'column')}</th>" for c in cols) + "</tr>")
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            if isinstance(v, datetime):
                cells.append(f"<td class=t>{sink.when(v, c)}</td>")
            elif isinstance(v, int) and not isinstance(v, bool):
                cells.append(f"<td class=n>{sink(v, c, 'integer')}</td>")
            else:
                t = sink(v, c)
                cells.append(f"<td class=w>{t}</td>" if len(t) > 40 else f"<td>{t}</td>")  # long: wrap anywhere
        o.w("<tr>" + "".join(cells) + "</tr>")
    o.w("</table></div>")


def _rest_table(o: _Out, sink: Sink, order, briefs: dict) -> None:
    if not briefs:
        return
    o.w(
        f'<section class="rest"><h2>The other {len(briefs):,} operations</h2>'
        '<p class="muted">One row per finding, in the scan\'s order.</p><div class="wide"><table>'
        "<tr><th>#</th><th>severity</th><th>kind</th><th>scope</th><th>idempotency key</th><th>at</th>"
        "<th>explanation</th></tr>"
    )
    i = 0
    for ref in order:
        bs = briefs.get(ref)
        if bs is None:
            i += 1
            continue
        i += 1
        if not bs:
            continue
        for b in bs:
            o.w(
                f"<tr><td class=n>{i:,}</td><td>{_sev_chip(b.severity)}</td><td>{KIND_WORDS[b.kind]}"
                + (f" · {html.escape(str(b.action))}" if b.action else "")
                + f"</td><td>{sink(ref[0] or None, 'scope')}</td>{_key_cell(sink(ref[1], 'idempotency_key'))}"
                f"<td class=t>{sink.when(b.at)}</td><td class=w>{b.explanation}</td></tr>"
            )
    o.w("</table></div></section>")


def _key_cell(k: str) -> str:
    return f"<td{' class=w' if len(k) > 40 else ''}><code>{k}</code></td>"


def _manifest(ledger, flt, now, ident, masker, masking_key, shown, counts, base, sha, size, report) -> dict:
    from idemview.evidence.plan import _tables_read

    caller = {
        "ledger": _sanitize_ledger(_plain(ident)),
        "layout": {"name": ledger.layout.name, "sha256": ledger.layout.hash, **_tables_read(ledger)},
        "filter": {
            "structured": flt.to_dict(),
            "sentence": flt.sentence(),
            **({"sentence_shown": shown} if shown else {}),
        },
        "now": iso(now),
        "masking_key": MASKING_KEYS[masking_key],
    }
    fx = getattr(ledger, "effects", None)
    if fx is not None:
        caller["effects"] = fx.describe()
    caller = {k: _mask_uncounted(masker, _strip_urls(_plain(v))) for k, v in caller.items()}
    # idemview's own counts, not ledger data: never masked ("secret_at_rest" as a key read as a secret)
    caller["report"] = report
    return {
        "format": MANIFEST_FORMAT,
        "tool": {"name": "idemview", "version": __version__},
        "exported_at": _utc_now_iso(),
        **caller,
        "masking": {"enabled": True, "rules": masker.rules.describe(), "counts": dict(sorted(counts.items()))},
        "html": {
            "file": base,
            "sha256": sha,
            "bytes": size,
            "encoding": "utf-8",
            "content_security_policy": CSP,
            "self_contained": "no script; styles and pictures (SVG) inline; no reference to any other address",
        },
    }


def verify_report(path: str | os.PathLike[str]) -> VerifyReport:
    """Recompute the report's SHA-256 and size and compare them with ``PATH.manifest.json`` (the
    CSV export's check, :func:`~idemview.evidence.writer.verify_evidence`, which reads a manifest's
    ``html`` section as it reads ``csv``). Truthy when they match; problems are listed, not raised."""
    return verify_evidence(path)
