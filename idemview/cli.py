"""The ``idemview`` command (DESIGN §9 is the contract; tests and scripts depend on it).

Exit codes: 0 success, 2 usage or input error, 3 cannot connect, 4 layout does not fit the database.
Errors are one line on stderr, never a traceback, and never contain a password.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from idemview import __version__
from idemview.errors import (
    EXIT_CONNECT,
    EXIT_LAYOUT,
    EXIT_OK,
    EXIT_USAGE,
    IdemviewError,
    InvalidLayout,
    TargetExists,
)
from idemview.urls import hide_password

UTC = UTC
__all__ = ["EXIT_CONNECT", "EXIT_LAYOUT", "EXIT_OK", "EXIT_USAGE", "CliError", "main"]


class CliError(IdemviewError):
    """An error for the user: ``code`` is the exit code, the message one clear line. The typed errors of
    :mod:`idemview.errors` carry their own exit code and need no wrapping."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = self.exit_code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: one line on stderr (DESIGN §9), exit 2
        from idemview.masking.masker import mask_message

        print(f"idemview: {mask_message(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _argtype(parse, what: str):
    """An argparse type from one of :mod:`idemview.ledger.inputs`' parsers (shared with the Python
    API): a refused value is a one-line usage error (exit 2) before anything runs."""

    def convert(text: str):
        try:
            return parse(text, what)
        except (TypeError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{what}: ")) from None

    convert.__name__ = what  # argparse names the type in its message
    return convert


def _instant(text: str) -> datetime:
    from idemview.ledger.inputs import instant_value

    return _argtype(instant_value, "instant")(text)


def _seconds(text: str) -> float:
    from idemview.ledger.inputs import seconds_value

    return _argtype(seconds_value, "seconds")(text)


def _write_ttl(text: str) -> float:
    from idemview.ledger.inputs import write_ttl_value

    return _argtype(write_ttl_value, "seconds")(text)


def _count(text: str) -> int:
    from idemview.ledger.inputs import count_value

    return _argtype(count_value, "count")(text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="idemview",
        description="Inspect operation ledgers: idempotency keys, attempts, outcomes and duplicate side effects.",
    )
    p.add_argument("--version", action="version", version=f"idemview {__version__}")
    p.add_argument("--demo", action="store_true", help="create the demo ledger if needed and open the GUI on it")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    _gui_and_file_commands(sub)

    de = sub.add_parser("detect", help="print the best-matching layout and its confidence")
    de.add_argument("url")
    ssh_arguments(de)
    _ledger_commands(sub)
    return p


def _ledger_commands(sub) -> None:
    """The commands that read a ledger's records: scan, windows, export, report."""
    s = sub.add_parser("scan", help="compute findings")
    common_arguments(s)
    s.add_argument("--format", choices=("json", "text"), default="text")
    s.add_argument("--limit", type=_count, default=20, help="findings listed per kind in text output (0: all)")
    s.add_argument(
        "--audit-rows",
        type=_count,
        default=None,
        metavar="N",
        help="newest rows per table the ledger audit (secret_at_rest) samples (default 10000; 0: no audit)",
    )

    w = sub.add_parser("windows", help="dedup windows measured from the data, per operation kind")
    common_arguments(w)
    w.add_argument("--format", choices=("json", "text"), default="text")

    e = sub.add_parser("export", help="export filtered evidence to CSV with a manifest")
    common_arguments(e)
    e.add_argument("--out", required=True, help="FILE.csv (FILE.csv.manifest.json is written beside it)")
    filters(e)
    e.add_argument("--rows", choices=("operations", "attempts", "findings", "effects"), default="operations")
    e.add_argument("--excel", action="store_true", help="UTF-8 with BOM, for spreadsheets")
    e.add_argument("--null", default="", help="literal written for NULL (default: empty field)")
    e.add_argument("--force", action="store_true", help="replace FILE.csv if it exists")

    r = sub.add_parser("report", help="write a self-contained HTML incident report with a manifest")
    common_arguments(r)
    r.add_argument("--out", required=True, help="FILE.html (FILE.html.manifest.json is written beside it)")
    filters(r)
    r.add_argument(
        "--full",
        type=_count,
        default=200,
        metavar="N",
        help="operations shown in full (default 200; the rest: a table)",
    )
    r.add_argument("--force", action="store_true", help="replace FILE.html if it exists")


def _gui_and_file_commands(sub) -> None:
    """The commands that read no ledger on the command line: demo (writes one), presets, open (the GUI),
    install-desktop."""
    d = sub.add_parser("demo", help="write a demo SQLite ledger with known incidents")
    d.add_argument("path")
    d.add_argument("--operations", type=_count, default=2000, help="ordinary operations (default 2000)")
    d.add_argument("--seed", type=int, default=7)
    d.add_argument("--force", action="store_true", help="replace PATH even if it is not a demo ledger")
    d.add_argument(
        "--anchor",
        type=_instant,
        default=None,
        help="instant the traffic leads up to (ISO-8601; default 2026-11-30T12:00:00Z)",
    )

    sub.add_parser("presets", help="list layouts")

    op = sub.add_parser("open", help="open the GUI at one operation (what the detail's Copy link gives)")
    op.add_argument("url", help="SQLAlchemy URL, SQLite file, or a saved connection's name")
    op.add_argument("--key", help="the operation's idempotency key")
    op.add_argument("--scope", help="its scope (default: whichever holds the key)")
    op.add_argument("--layout", help="preset name or layout TOML file (default: the connection's, else detect)")
    op.add_argument("--schema", help="schema holding the layout's tables (default: found)")
    op.add_argument("--now", type=_instant, default=None, help="instant the first scan computes findings for")

    ide = sub.add_parser("install-desktop", help="add idemview to the desktop's application menu (this user)")
    ide.add_argument(
        "--data-home", type=Path, default=None, help="where to write (default: $XDG_DATA_HOME, else ~/.local/share)"
    )


def common_arguments(sp) -> None:
    """The arguments of every command that reads a ledger (scan, windows, export, report): the target,
    SSH, layout, schema, value maps, ``--now``, the thresholds (``--lock-timeout``, ``--retry-threshold``,
    ``--retention``, a key-value store's ``--write-ttl``), ``--timeout`` and ``--progress``."""
    sp.add_argument("url", help="SQLAlchemy URL, SQLite file, or a saved connection's name")
    ssh_arguments(sp)
    sp.add_argument("--layout", help="preset name or layout TOML file (default: detect)")
    sp.add_argument(
        "--schema",
        help="schema holding the layout's tables (default: the preset's schema, else found as detection finds them)",
    )
    sp.add_argument(
        "--map-status",
        action="append",
        default=[],
        metavar="RAW=STATUS",
        help="map a raw status value the layout does not know (repeatable; "
        "STATUS: new, in_progress, completed, failed, unknown)",
    )
    sp.add_argument(
        "--map-outcome",
        action="append",
        default=[],
        metavar="RAW=OUTCOME",
        help="map a raw attempt outcome the layout does not know (repeatable)",
    )
    sp.add_argument("--now", type=_instant, default=None, help="instant findings are computed for (ISO-8601)")
    sp.add_argument("--lock-timeout", type=_seconds, default=None, help="seconds (overrides the layout)")
    sp.add_argument(
        "--retry-threshold",
        type=_count,
        default=None,
        help="attempts above this are a retry storm (overrides the layout; default 5)",
    )
    sp.add_argument(
        "--retention",
        type=_seconds,
        default=None,
        help="dedup window in seconds, added to the layout's retention time when the ledger "
        "has no expires_at column; also the duplicate_intent window",
    )
    sp.add_argument(
        "--write-ttl",
        type=_write_ttl,
        default=None,
        metavar="SECONDS",
        help="the TTL a Redis store sets at every write (Celery's result_expires): a record without a time "
        "of its own is dated from its remaining TTL (overrides the connection's and the layout's "
        "[expiry] write_ttl_seconds; Redis only)",
    )
    sp.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="bound each statement of this batch run (default: none; it runs until done or Ctrl-C)",
    )
    sp.add_argument(
        "--progress", action="store_true", help="report progress on stderr (default: when stderr is a terminal)"
    )


def ssh_arguments(sp) -> None:
    """``--ssh USER@HOST[:PORT]`` and ``--ssh-key PATH`` (DESIGN §5.3; idemview.ledger.tunnel)."""
    sp.add_argument(
        "--ssh",
        metavar="USER@HOST[:PORT]",
        help="reach the database through this SSH host (its host and port as seen from there; key checked "
        "against ~/.ssh/known_hosts)",
    )
    sp.add_argument("--ssh-key", metavar="PATH", help="private key for --ssh (passphrase from the keyring)")


def filters(sp) -> None:
    """The export filters (DESIGN §9), shared by ``export`` and ``report``."""
    sp.add_argument("--finding", action="append", default=[], metavar="KIND")
    sp.add_argument("--status", action="append", default=[], metavar="S")
    sp.add_argument("--kind", action="append", default=[], metavar="K", help="operation kind")
    sp.add_argument(
        "--action", action="append", default=[], metavar="CLASS", help="action class (money, access, …; repeatable)"
    )
    sp.add_argument("--key")
    sp.add_argument("--intent")
    sp.add_argument("--scope")
    sp.add_argument("--since", type=_instant)
    sp.add_argument("--until", type=_instant)


# --------------------------------------------------------------------------------- resolution


def cli_spec(args):
    """``(OpenSpec, saved Connection or None)`` for the command's ``url`` argument (a URL, a file, a dump,
    or a saved connection's name, whose fields and keyring password it brings) with the command line's
    ``--ssh``/``--ssh-key``, ``--layout``, ``--schema`` and ``--map-status``/``--map-outcome`` over the
    connection's own. Raises :class:`CliError` (exit 2) for a target that is none of these or a
    malformed value map."""
    from idemview.config import CredentialStore
    from idemview.domain.model import Outcome
    from idemview.layouts.layout import LayoutError, parse_value_map
    from idemview.masking.masker import register_secret, url_password_candidates
    from idemview.services.opener import OpenSpec, saved_connection, spec_for_connection
    from idemview.urls import looks_like_url

    url, ssh, ssh_key = args.url, getattr(args, "ssh", None), getattr(args, "ssh_key", None)
    # Whatever could be a password in the argument is known before any parser or message sees it,
    # so no message can echo it, however malformed the URL (issue #9).
    for pw in url_password_candidates(url):
        register_secret(pw)
    saved = saved_connection(url)
    if (
        saved is None
        and "://" not in url
        and not Path(url).exists()
        and not url.endswith((".db", ".sqlite", ".sqlite3"))
        and not looks_like_url(url)
    ):
        raise CliError(f"{hide_password(url)!r} is neither a database URL, a file, nor a saved connection", EXIT_USAGE)
    if ssh_key and not ssh and not (saved is not None and saved.ssh):
        raise CliError("--ssh-key needs --ssh USER@HOST[:PORT]", EXIT_USAGE)
    if saved is not None:
        stored = CredentialStore().get(saved.id)
        register_secret(stored)
        spec = spec_for_connection(saved, stored)
    else:
        spec = OpenSpec(url=url, name="")
    if ssh:
        spec.ssh = ssh
    spec.ssh_key = (ssh_key or spec.ssh_key) if spec.ssh else ""
    spec.layout = getattr(args, "layout", None) or spec.layout
    spec.schema = getattr(args, "schema", None) or spec.schema
    try:
        spec.status_map = {
            **parse_value_map(spec.status_map),
            **parse_value_map(getattr(args, "map_status", None) or []),
        }
        spec.outcome_map = {
            **parse_value_map(spec.outcome_map, Outcome, "outcome"),
            **parse_value_map(getattr(args, "map_outcome", None) or [], Outcome, "outcome"),
        }
    except LayoutError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    return spec, saved


def open_ledger(args):
    """``(Ledger, saved Connection or None)`` the arguments ask for, through the one opener
    (:func:`idemview.services.opener.open_source`): the target's backend, its SSH tunnel (closed when the
    command ends: :func:`idemview.ledger.tunnel.close_all` in :func:`main`), the layout given (or the saved
    connection's, or detected) fitted to the connection and the command line, and the thresholds
    ``--lock-timeout``/``--retry-threshold``/``--retention``/``--write-ttl``. A snapshot's progress is shown on a
    terminal; its warnings go to stderr. Raises :class:`CliError`: exit 4 when the layout does not fit
    (a detected one included), 2 for a malformed layout, map or action rule, else the typed error's code."""
    from idemview.backends import Tunables
    from idemview.backends.sql import ConnectionSettingsError
    from idemview.services.opener import open_source

    spec, saved = cli_spec(args)
    progress = None
    if sys.stderr.isatty():

        def progress(scanned, loaded):
            print(f"\rsnapshot: {scanned} scanned, {loaded} records", end="", file=sys.stderr, flush=True)

    tunables = Tunables(
        getattr(args, "lock_timeout", None),
        getattr(args, "retry_threshold", None),
        getattr(args, "retention", None),
        getattr(args, "write_ttl", None),
    )
    try:
        opened = open_source(
            spec, tunables=tunables, progress=progress, no_fit_hint="; pass --layout NAME|FILE (see `idemview presets`)"
        )
    except ConnectionSettingsError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    except InvalidLayout as e:
        # A LayoutMismatch exits 4; so does a detected preset that turns out invalid here (the database
        # chose it, not the user).
        raise CliError(str(e), EXIT_LAYOUT if not spec.layout else e.exit_code) from None
    finally:
        if progress is not None:
            print(file=sys.stderr)
    for w in opened.warnings:
        print(f"idemview: warning: {w}", file=sys.stderr)
    return opened.ledger, saved


# ------------------------------------------------------------------------------------ commands


def cmd_demo(args) -> int:
    from idemview.services.demo import DEFAULT_ANCHOR, is_demo_ledger, write_demo

    if "://" in args.path:
        raise CliError("demo PATH is a file for a new SQLite ledger, not a database URL")
    p = Path(args.path)
    if p.exists() and not args.force:
        if not p.is_file() or not is_demo_ledger(p):
            raise CliError(f"{p} exists and is not a demo ledger; refusing to replace it (--force replaces it)")
    if not p.parent.is_dir():
        raise CliError(f"the folder {p.parent} does not exist")
    planted = write_demo(args.path, operations=args.operations, seed=args.seed, anchor=args.anchor or DEFAULT_ANCHOR)
    kinds = ", ".join(f"{k} {len(v)}" for k, v in sorted(planted.incidents.items()))
    print(
        f"wrote {args.path}: {planted.operations} operations, {planted.attempts} attempts; "
        f"planted incidents: {kinds}; scan it with --now {planted.anchor.isoformat().replace('+00:00', 'Z')}"
    )
    return EXIT_OK


def cmd_presets(args) -> int:
    from idemview.layouts.kv import all_kv_presets
    from idemview.layouts.layout import all_presets

    rows = [
        (l.name, l.title, l.table + (f" + {l.attempts.table}" if l.attempts.source == "table" else ""))
        for l in all_presets()
    ]
    rows += [(k.name, k.title, f"redis {k.match}") for k in all_kv_presets()]  # key-value layouts
    from idemview.layouts.dynamodb import all_dynamodb_presets

    rows += [(d.name, d.title, f"dynamodb key ({', '.join(d.key_schema)})") for d in all_dynamodb_presets()]
    w = max(len(r[0]) for r in rows)
    w2 = max(len(r[2]) for r in rows)
    for name, title, tables in rows:
        print(f"{name:<{w}}  {tables:<{w2}}  {title}")
    return EXIT_OK


def cmd_detect(args) -> int:
    from idemview.services.opener import detect_layouts

    spec, _saved = cli_spec(args)
    backend, matches = detect_layouts(spec)
    if not matches:
        print(backend.no_fit_detect, file=sys.stderr)
        return EXIT_LAYOUT
    best = matches[0]
    print(f"{best.name}\tconfidence {best.confidence:.2f}\t{best.reason}")
    for m in matches[1:4]:
        print(f"  also: {m.name} ({m.confidence:.2f})")
    return EXIT_OK


def _progress_on(args) -> bool:
    try:
        return bool(args.progress or sys.stderr.isatty())
    except (AttributeError, ValueError):
        return bool(args.progress)


def cmd_scan(args) -> int:
    import time

    from idemview.config import new_masker
    from idemview.findings.engine import FindingEngine
    from idemview.ledger.batch import for_batch
    from idemview.ledger.queries import ledger_basics

    ledger, _saved = open_ledger(args)
    # A scan is batch work: not cut by the interactive statement timeout (--timeout bounds it).
    ledger = for_batch(ledger, args.timeout)
    if ledger.schema_note:  # which schema, and other copies (as detect says)
        note = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in ledger.schema_note)
        print(f"idemview: note: {note}", file=sys.stderr)
    fe = FindingEngine(ledger, args.now or datetime.now(UTC))
    if args.audit_rows is not None:
        fe.audit_rows = args.audit_rows
    show = _progress_on(args)
    t0 = time.monotonic()

    def kinds():
        for kind, fs in fe.iter_run():
            if show:
                print(
                    f"idemview: scan: {kind.value}: {len(fs)} ({time.monotonic() - t0:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            yield kind, fs

    # counts, unmapped raw values and stored values that are no instant (per time field): one
    # aggregate pass per table (issue 27 item 4), asked once for both formats
    basics = ledger_basics(ledger)
    write = _scan_json if args.format == "json" else _scan_text
    write(args, fe, basics, kinds(), new_masker())
    return EXIT_OK


def _scan_json(args, fe, basics, kinds, masker) -> None:
    """The scan as JSON on stdout (DESIGN §9), written as it streams: the header, then each kind's
    findings as that kind is done; the counts (known only at the end) close the object. JSON key order
    carries no meaning; beside DESIGN §9's keys: ``unmapped``, ``unknown_times``, a snapshot's
    ``server_time`` and ``snapshot``, ``effects`` and ``not_checkable`` (kind -> why,
    :func:`idemview.findings.engine.not_checkable`)."""
    from idemview.ledger.times import iso

    ledger = fe.l
    snap = ledger.source.snapshot  # a snapshot (Redis, DynamoDB): its facts, with the server's clock
    w = sys.stdout.write
    dump = json.dumps
    w(
        "{\n" + f' "now": {dump(iso(fe.now))},\n "layout": {dump(ledger.layout.name)},\n'
        f' "operations": {basics.operations},\n "attempts": {basics.attempts},\n'
    )
    um = {k: {masker.mask_text(r): n for r, n in v.items()} for k, v in basics.unmapped.items()}
    w(f' "unmapped": {dump(um, ensure_ascii=False)},\n "unknown_times": {dump(basics.unknown_times or {})},\n')
    if snap is not None:
        w(f' "server_time": {dump(iso(snap.server_time))},\n "snapshot": {dump(snap.to_json())},\n')
    if ledger.effects is not None:  # the second source the findings were reconciled with
        w(f' "effects": {dump(ledger.effects.describe(), ensure_ascii=False)},\n')
    w(' "findings": [')
    first = True
    counts: dict[str, int] = {}
    for kind, fs in kinds:
        for f in fs:
            # the line break in a write of its own: stdout's display sink (masking/visible.py) checks a
            # write with str.isprintable in C and walks it character by character only when that fails
            # (a break does): 8,001 findings cost 2.8 s of CPU that way
            w("\n  " if first else ",\n  ")
            w(dump(masker.mask_value(f.to_json()), ensure_ascii=False))
            first = False
        if fs:
            counts[kind.value] = len(fs)
            sys.stdout.flush()
    unsupported = fe.unsupported()
    w(  # "unmapped" went out with the header: written twice, parsers would keep one, silently
        ("\n ],\n" if not first else "],\n") + f' "counts": {dump(counts)},\n'
        f' "not_checkable": {dump({k.value: masker.mask_text(v) for k, v in unsupported.items()})}\n}}\n'
    )


def _scan_text(args, fe, basics, kinds, masker) -> None:
    """The scan as text on stdout: the ledger, the instant, a snapshot's ``server`` line, the size, the
    effect records, the counts per kind, unmapped values, unknown times, what is not checkable, then up
    to ``--limit`` findings per kind."""
    from idemview.ledger.times import iso

    ledger = fe.l
    print(f"ledger   {ledger.name} ({ledger.source.dialect or ledger.dialect}) with layout {ledger.layout.name}")
    print(f"now      {iso(fe.now)}")
    if ledger.source.snapshot is not None:  # each kind of snapshot says what it read its own way
        print(ledger.source.snapshot.server_line())
    print(f"size     {basics.operations} operations, {basics.attempts} attempts")
    if ledger.effects is not None:
        fx = ledger.effects.describe()
        how = "SQL joins in the ledger's database" if fx["same_database"] else "a streamed merge of two databases"
        print(f"effects  {fx['table']} ({fx['dialect']} {fx['database'] or fx['host']}), reconciled by {how}")
    per = list(kinds)
    counts = {kind.value: len(fs) for kind, fs in per if fs}
    print("findings " + (", ".join(f"{k} {n}" for k, n in counts.items()) if counts else "none"))
    unmapped, lay = basics.unmapped, ledger.layout
    for what, flag, src in (("status", "--map-status", lay.status), ("outcome", "--map-outcome", lay.attempts.outcome)):
        if unmapped[what]:
            vals = sorted(unmapped[what].items(), key=lambda kv: (-kv[1], kv[0]))
            print(
                f"unmapped {what} values (read as {src.default if src else 'unknown'}; map them with "
                f"{flag} RAW={what.upper()} or the connection's {what}_map): "
                + ", ".join(f"{masker.mask_text(r)!r} {n}" for r, n in vals[:20])
                + (f" … and {len(vals) - 20} more" if len(vals) > 20 else "")
            )
    if basics.unknown_times:
        print(
            "unknown times (stored values that are no instant, read as missing): "
            + ", ".join(f"{k} {n}" for k, n in basics.unknown_times.items())
        )
    unsupported = fe.unsupported()
    if unsupported:
        print("not checkable with this layout: " + "; ".join(f"{k.value} ({why})" for k, why in unsupported.items()))
    for kind, fs in per:
        if not fs:
            continue
        print()
        print(f"{kind.value} ({len(fs)})")
        shown = fs if args.limit == 0 else fs[: args.limit]
        for f in shown:
            print(f"  [{f.severity.value} · {f.action}] {masker.mask_text(f.explanation)}")
        if len(fs) > len(shown):
            print(f"  … and {len(fs) - len(shown)} more (--limit 0 lists all)")


def cmd_windows(args) -> int:
    """DESIGN §5.2: per kind, the window kept against the retry spans seen (masked like scan)."""
    from idemview.config import new_masker
    from idemview.findings.windows import measure_windows, render_text
    from idemview.ledger.batch import for_batch

    ledger, _saved = open_ledger(args)
    ledger = for_batch(ledger, args.timeout)
    report = measure_windows(ledger, args.now or datetime.now(UTC))
    masker = new_masker()
    if args.format == "json":
        # masked field by field (the kind apart from the rest of its sentence, see masked_sentence)
        print(json.dumps(report.to_json(mask=masker.mask_text), ensure_ascii=False, indent=1))
    else:
        sys.stdout.write(render_text(report, masker.mask_text))
    return EXIT_OK


def cmd_export(args) -> int:
    if args.since and args.until and args.since >= args.until:
        raise CliError("--since must be before --until")
    ledger, saved = open_ledger(args)
    name = saved.name if saved is not None else None
    return export_cli(args, ledger, connection_name=name)


def cmd_report(args) -> int:
    """``idemview report URL [the export filters] --out FILE.html [--full N]``: the incident report
    (DESIGN §5.4; :func:`idemview.evidence.report.write_report`), one summary line."""
    from idemview.config import new_masker
    from idemview.evidence.plan import check_target
    from idemview.evidence.report import write_report
    from idemview.evidence.writer import ExportCancelled, FinalNameTaken

    if args.since and args.until and args.since >= args.until:
        raise CliError("--since must be before --until")
    flt = filter_from_args(args)
    ledger, saved = open_ledger(args)
    name = saved.name if saved is not None else None
    try:
        out = check_target(args.out, ledger, overwrite=args.force)  # TargetRefused: exit 2
    except TargetExists as e:
        raise CliError(f"{e} (use --force to replace it)", EXIT_USAGE) from None
    masker = new_masker()
    progress = None
    if _progress_on(args):

        def progress(phase: str, n: int) -> None:
            print(f"idemview: report: {phase} {n:,}", file=sys.stderr, flush=True)

    try:
        res = write_report(
            ledger,
            flt,
            out,
            now=args.now,
            full=args.full,
            connection_name=name,
            masker=masker,
            overwrite=args.force,
            progress=progress,
            timeout_s=args.timeout,
        )
    except ExportCancelled:
        raise CliError("report cancelled; no file written") from None
    except FinalNameTaken as e:
        raise CliError(str(e)) from None
    except OSError as e:
        raise CliError(f"{_os_error_text(e)}; nothing was written under {out}") from None
    table = f", {res.operations - res.in_full} more as a table" if res.operations > res.in_full else ""
    print(
        f"wrote {res.path} ({res.size:,} bytes, sha256 {res.sha256[:16]}…) and {res.manifest_path}: "
        f"{res.findings} finding{'s' * (res.findings != 1)} on {res.operations} "
        f"operation{'s' * (res.operations != 1)} ({res.in_full} in full{table}); "
        f"filter: {masker.mask_text(flt.sentence())}"
    )
    return EXIT_OK


def cmd_install_desktop(args) -> int:
    """``idemview install-desktop``: the .desktop entry, icons and metainfo under the user's data directory,
    launching this very program (the bundle's executable, or this environment's ``idemview`` script)."""
    import shutil

    from idemview.appinfo import install_desktop_files

    if getattr(sys, "frozen", False):  # the PyInstaller bundle
        command = [str(Path(sys.executable).resolve())]
    else:
        script = Path(sys.executable).with_name("idemview")
        found = str(script) if script.is_file() else shutil.which("idemview")
        command = [found] if found else [str(Path(sys.executable).resolve()), "-m", "idemview"]
    data_home = args.data_home or Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    try:
        written = install_desktop_files(data_home, command)
    except OSError as e:
        raise CliError(f"cannot write the desktop files: {e.strerror or e}", EXIT_USAGE) from None
    print(f"installed {written[0]} (runs {' '.join(command)}), {len(written) - 1} icon and metainfo files")
    return EXIT_OK


def cmd_gui(args) -> int:
    from idemview.qt.syslibs import GuiUnavailable, check_gui_libraries

    try:
        check_gui_libraries()  # before PySide6 is imported: Qt aborts without xcb-cursor
        from idemview.qt.app import run_gui
    except ImportError as e:
        raise CliError(f"the GUI cannot start: {e}", EXIT_USAGE) from None
    except GuiUnavailable as e:
        raise CliError(str(e), EXIT_USAGE) from None
    try:
        return run_gui(demo=args.demo)
    except GuiUnavailable as e:
        raise CliError(str(e), EXIT_USAGE) from None


def _os_error_text(e: OSError, doing: str = "cannot write") -> str:
    """One line for an OS error: what failed, on which file, in words (``[Errno 28]`` is not words)."""
    what = e.strerror or type(e).__name__
    where = f" {e.filename}" if e.filename else ""
    return f"{doing}{where}: {what[:1].lower() + what[1:] if what[1:2].islower() else what}"


def cmd_open(args) -> int:
    """``idemview open URL [--key KEY] [--scope S]``: the GUI, opened at that operation."""
    if args.scope is not None and not args.key:
        raise CliError("--scope needs --key", EXIT_USAGE)
    try:
        from idemview.qt.app import run_gui
    except ImportError as e:
        raise CliError(f"the GUI cannot start: {e}", EXIT_USAGE) from None
    from idemview.services.links import DeepLink

    return run_gui(link=DeepLink(args.url, args.key, args.scope, args.layout, args.schema, args.now))


def main(argv: list[str] | None = None) -> int:
    """The command line. Everything it prints goes through the display sink
    (:class:`idemview.masking.visible.VisibleWriter`): control, bidi and invisible characters escaped."""
    from idemview.masking.visible import VisibleWriter

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = VisibleWriter(out), VisibleWriter(err, one_line=True)
    try:
        return _main(argv)
    finally:
        from idemview.ledger.tunnel import close_all

        close_all()  # an SSH tunnel lives as long as the command (DESIGN §5.3)
        if isinstance(sys.stdout, VisibleWriter):
            sys.stdout = out
        sys.stderr = err


def _main(argv: list[str] | None = None) -> int:
    import multiprocessing

    multiprocessing.freeze_support()  # a frozen bundle starts the GUI's findings process through main
    logging.basicConfig(level=logging.WARNING, format="idemview: %(levelname)s: %(message)s")
    from idemview.ledger.connect import redact
    from idemview.masking.masker import install_log_masking, register_secret, url_password_candidates

    install_log_masking()  # every log record of the process is masked (DESIGN §6)
    raw = sys.argv[1:] if argv is None else argv
    for a in raw:  # a password anywhere on the command line is never echoed
        if isinstance(a, str) and "@" in a:
            for pw in url_password_candidates(a):
                register_secret(pw)
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {
        "demo": cmd_demo,
        "presets": cmd_presets,
        "detect": cmd_detect,
        "scan": cmd_scan,
        "windows": cmd_windows,
        "export": cmd_export,
        "report": cmd_report,
        "open": cmd_open,
        "install-desktop": cmd_install_desktop,
    }
    try:
        if args.command is None:
            return cmd_gui(args)
        return handlers[args.command](args)
    except IdemviewError as e:  # CliError and every typed error: the type says the exit code
        print(f"idemview: {redact(str(e))}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # e.g. piped into `head`: not an error worth a message
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        print("idemview: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # last resort: one line, no traceback, no password
        from sqlalchemy.exc import DBAPIError, OperationalError

        from idemview.ledger.connect import short_error

        if isinstance(e, OperationalError):
            return database_failed(e, getattr(args, "timeout", None))
        if isinstance(e, DBAPIError):
            print(f"idemview: the database refused a query: {short_error(e)}", file=sys.stderr)
            return EXIT_USAGE
        from idemview.ledger.dialects import DialectNotSupported

        if isinstance(e, DialectNotSupported):  # an engine idemview has no SQL for: say so plainly
            print(f"idemview: {redact(str(e))}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(e, OSError):  # a file that cannot be read or written (disk full, permissions)
            print(f"idemview: {redact(_os_error_text(e, 'file error'))}", file=sys.stderr)
            return EXIT_USAGE
        print(f"idemview: unexpected error: {type(e).__name__}: {redact(str(e))[:300]}", file=sys.stderr)
        return EXIT_USAGE


def gui_main() -> int:
    """The ``idemview-gui`` entry point (a ``gui-scripts`` entry: no console window on Windows).

    Same arguments as ``idemview``; without a sub-command it opens the GUI."""
    return main()


if __name__ == "__main__":
    sys.exit(main())


def _say_not_checkable(ledger, flt) -> None:
    """A note on stderr per kind of the finding filter this ledger cannot check (the one list,
    :func:`idemview.findings.engine.not_checkable`): the filter selects no operation for it, and an
    empty export must not read as "none found"."""
    if not flt.findings:
        return
    from idemview.findings.engine import not_checkable

    why = not_checkable(ledger)
    for k in flt.findings:
        if k in why:
            print(
                f"idemview: note: {k.value} is not checkable on this ledger ({why[k]}): it selects nothing",
                file=sys.stderr,
            )


def export_cli(args, ledger, connection_name: str | None = None) -> int:
    """``idemview export``: build the filter from the arguments, export, print one summary line."""
    from idemview.config import new_masker
    from idemview.evidence.plan import check_target, export_evidence
    from idemview.evidence.writer import ExportCancelled, FinalNameTaken

    flt = filter_from_args(args)
    _say_not_checkable(ledger, flt)
    try:
        out = check_target(args.out, ledger, overwrite=args.force)  # TargetRefused: exit 2
    except TargetExists as e:
        raise CliError(f"{e} (use --force to replace it)", EXIT_USAGE) from None
    masker = new_masker()
    progress = None
    if _progress_on(args):
        import time

        t0, last = time.monotonic(), [0.0]

        def progress(n: int) -> None:
            t = time.monotonic()
            if t - last[0] >= 1.0:
                last[0] = t
                print(
                    f"idemview: export: {n:,} rows ({n / max(t - t0, 1e-9):,.0f} rows/s)", file=sys.stderr, flush=True
                )

    try:
        res = export_evidence(
            ledger,
            flt,
            out,
            rows=args.rows,
            now=args.now,
            excel=args.excel,
            null_literal=args.null,
            connection_name=connection_name,
            masker=masker,
            overwrite=args.force,
            progress=progress,
            timeout_s=getattr(args, "timeout", None),
        )
    except ExportCancelled:
        raise CliError("export cancelled; no file written") from None
    except FinalNameTaken as e:
        raise CliError(str(e)) from None
    except OSError as e:  # disk full, permissions: the writer has removed its temporary files
        raise CliError(f"{_os_error_text(e)}; nothing was written under {out}") from None
    print(
        f"wrote {res.rows} {args.rows} rows to {res.path} (sha256 {res.sha256[:16]}…) and "
        f"{res.manifest_path}; filter: {masker.mask_text(flt.sentence())}"
    )
    return EXIT_OK


def filter_from_args(args):
    """The :class:`Filter` of the export filters (``--finding``, ``--status``, ...); unknown kinds or
    statuses are a usage error naming the valid ones."""
    from idemview.domain.filters import Filter
    from idemview.domain.model import FindingKind, Status

    try:
        return Filter(
            findings=[FindingKind(k) for k in args.finding],
            statuses=[Status(s) for s in args.status],
            kinds=list(args.kind),
            key=args.key,
            intent=args.intent,
            scope=args.scope,
            since=args.since,
            until=args.until,
            actions=list(getattr(args, "action", None) or []),
        )
    except ValueError:
        from idemview.domain.actions import ACTIONS

        bad_a = [a for a in getattr(args, "action", None) or [] if a not in ACTIONS]
        if bad_a:
            raise CliError(f"unknown action class {bad_a[0]!r}; one of: " + ", ".join(ACTIONS)) from None
        bad_f = [k for k in args.finding if k not in {x.value for x in FindingKind}]
        if bad_f:
            raise CliError(
                f"unknown finding kind {bad_f[0]!r}; one of: " + ", ".join(k.value for k in FindingKind)
            ) from None
        bad_s = next(s for s in args.status if s not in {x.value for x in Status})
        raise CliError(
            f"unknown status {bad_s!r} (idemview's normalized statuses, not the ledger's raw "
            f"values): one of " + ", ".join(s.value for s in Status)
        ) from None


def database_failed(e: BaseException, timeout: float | None = None) -> int:
    """Print the one line for a query the database stopped or failed, and return the exit code.

    Classified by the driver's code (SQLSTATE, errno, SQLite result code; :func:`idemview.ledger.errors.classify`),
    never its words: a statement timeout (``timeout``: the ``--timeout`` seconds, if given) and a lost
    connection exit 3; a cancel exits 130 only when the user pressed Ctrl-C (the exception's context is a
    ``KeyboardInterrupt``), while a query someone else stopped (MariaDB ``KILL QUERY``, errno 1317) exits 3,
    so a script does not mistake another session's action for its own interrupt."""
    from idemview.errors import ConnectionLost, QueryCancelled, QueryTimedOut
    from idemview.ledger.connect import short_error
    from idemview.ledger.errors import classify

    msg = short_error(e)
    ctrl_c = isinstance(e.__context__, KeyboardInterrupt)
    kind = classify(e, cancel_requested=ctrl_c)
    if ctrl_c:
        print("idemview: interrupted", file=sys.stderr)
        return 130
    if isinstance(kind, QueryTimedOut):
        bound = f"--timeout {timeout:g} s" if timeout else "the statement timeout"
        print(
            f"idemview: a query ran past {bound} and was stopped (raise it, or leave --timeout out to run until done)",
            file=sys.stderr,
        )
    elif isinstance(kind, QueryCancelled):
        print(
            f"idemview: the database failed: another session stopped the query ({msg}); run it again",
            file=sys.stderr,
        )
    elif isinstance(kind, ConnectionLost):
        print(f"idemview: the database failed: the connection was lost ({msg}); run it again", file=sys.stderr)
    else:
        print(f"idemview: the database failed: {msg}", file=sys.stderr)
    return EXIT_CONNECT
