#!/usr/bin/env python3
"""Render BENCHMARKS.md from one results folder of `make bench` (benchmarks/bench_all.py).

    python benchmarks/render_report.py [RESULTS_DIR] [--out BENCHMARKS.md] [--explanations PATH]

``RESULTS_DIR`` (default ``$IDEMVIEW_BENCH_CACHE/results/latest``) holds ``run.json`` (the steps: command,
start/end UTC, wall and CPU seconds, exit code, load average, timeout) and one ``<step>.json`` per step
that wrote its results. The report opens with the run (date, commit, machine, load, duration), then one
table of the issue-27 targets (target | ledger | measured | ratio/limit | ✓/✗/not measured); under it,
for every missed target, its explanation from ``benchmarks/explanations.md`` (a ``## <target id>``
section each, maintained by hand), and for every target without a result, why: the step failed, timed
out or did not run, with its stderr's tail. Then one section per step with its tables, generated from the
JSON: keys a renderer does not know are listed as they are, so a bench may add figures without a change
here. Nothing is measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# --------------------------------------------------------------------------------------- results


@dataclass
class Results:
    """One run: ``run`` is run.json, ``data[step id]`` the step's JSON (absent: not written or unreadable)."""

    dir: Path
    run: dict
    data: dict[str, object]

    def step(self, sid: str) -> dict | None:
        return next((s for s in self.run.get("steps", []) if s.get("id") == sid), None)


def load(results_dir: str | Path) -> Results:
    """Read ``run.json`` and every step's JSON of a results folder (an unreadable file counts as absent)."""
    d = Path(results_dir).resolve()  # results/latest is a link to the run's own folder
    run = json.loads((d / "run.json").read_text())
    data: dict[str, object] = {}
    for s in run.get("steps", []):
        p = d / s.get("json", f"{s.get('id')}.json")
        try:
            data[s["id"]] = json.loads(p.read_text())
        except (OSError, ValueError, KeyError):
            pass
    return Results(d, run, data)


def explanations(path: str | Path) -> dict[str, str]:
    """``{target id: text}`` of the ``## <id>`` sections of the explanations file (missing file: {})."""
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for m in re.finditer(r"^## +([\w-]+)[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        out[m.group(1)] = m.group(2).strip()
    return out


# ----------------------------------------------------------------------------------------- targets


@dataclass
class Measured:
    """A target's figure: ``ledger`` measured on, ``value`` shown, ``ratio`` against the limit, ``ok``."""

    ledger: str
    value: str
    ratio: str
    ok: bool


@dataclass
class Target:
    """One issue-27 target: ``id`` (the explanations section), ``step`` whose JSON it reads, ``measure``
    returning the figure or None when the result is absent."""

    id: str
    title: str
    step: str
    measure: Callable[[object], Measured | None]


def _num(x) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _n(rows) -> str:
    rows = int(rows)
    return f"{rows / 1e6:g}M" if rows >= 1_000_000 else f"{rows / 1000:g}k" if rows >= 1000 else str(rows)


def _cells_doc(d) -> Measured | None:
    rows = [r for r in (d or {}).get("rows", []) if r.get("shape") == "doc" and _num(r.get("peak_mb")) is not None]
    if not rows:
        return None
    r = max(rows, key=lambda r: r["peak_mb"])
    ok = r["peak_mb"] <= 300 and r.get("exit", 0) == 0
    return Measured(
        f"{r.get('ops')} × {r.get('mb'):g} MB JSON documents, {r.get('engine')}"
        + (", JSON column" if (d.get("args") or {}).get("json_column") else ""),
        f"peak RSS {r['peak_mb']:.0f} MB ({r.get('s', 0):.0f} s"
        + (f", {r['cpu_s']:.0f} s CPU)" if _num(r.get("cpu_s")) is not None else ")")
        + ("" if r.get("exit", 0) == 0 else " (failed)"),
        f"{r['peak_mb'] / 300:.2f} of ≤ 300 MB",
        ok,
    )


def _export_row(d) -> dict | None:
    rows = [e for e in (d or {}).get("exports", []) if e.get("engine") == "sqlite"] or (d or {}).get("exports", [])
    return rows[0] if rows else None


def _export_rate(d) -> Measured | None:
    e = _export_row(d)
    if not e or e["export"].get("rc") != 0:
        return None
    rate = e["rows"] / e["export"]["s"]
    return Measured(
        f"Celery {_n(e['rows'])}, {e['engine']}",
        f"{rate:,.0f} rows/s ({e['export']['s']:.1f} s, {e['export'].get('rss_mb', 0):.0f} MB)",
        f"{rate / 150_000:.2f} of ≥ 150,000 rows/s",
        rate >= 150_000,
    )


def _export_pandas(d) -> Measured | None:
    e = _export_row(d)
    if not e or e["export"].get("rc") != 0 or e.get("pandas", {}).get("rc") != 0:
        return None
    ratio = e["export"]["s"] / e["pandas"]["s"]
    return Measured(
        f"Celery {_n(e['rows'])}, {e['engine']}",
        f"export {e['export']['s']:.1f} s, pandas {e['pandas']['s']:.1f} s",
        f"{ratio:.2f}× of ≤ 2×",
        ratio <= 2.0,
    )


def _gui_memory(d: dict) -> tuple[float, str] | None:
    """GUI + findings process in MB: the largest sum at one instant when gui_stall.py sampled it
    (``rss_sum_peak_mb``), else the sum of the two processes' own peaks (``ru_maxrss``, an upper bound)."""
    both = _num(d.get("rss_sum_peak_mb"))
    if both is not None:
        return both, f"{both:.0f} MB (sum at one instant)"
    gui, scan = _num(d.get("peak_rss_mb")), _num(d.get("peak_rss_scan_process_mb"))
    if gui is None or scan is None:
        return None
    return gui + scan, f"{gui:.0f} + {scan:.0f} = {gui + scan:.0f} MB (each process's peak)"


def _gui(key: str, limit: float, unit: str, engine: str = "sqlite"):
    def one(d: dict) -> tuple[float, str] | None:
        if key == "memory":
            return _gui_memory(d)
        v = _num(d.get(key))
        if v is None:
            return None
        phase = f" ({d.get('worst_phase')})" if key == "max_stall_s" and d.get("worst_phase") else ""
        return v, f"{v:.2f} s{phase}"

    def measure(d) -> Measured | None:
        if not isinstance(d, dict):
            return None
        runs = [r for r in d.get("runs", []) if r.get("engine") == engine] if "runs" in d else [d]
        got = [(x, r) for r in runs if not r.get("error") for x in [one(r)] if x is not None]
        if not got:
            return None
        (v, shown), r = max(got, key=lambda g: g[0][0])  # the worst run of --issue27 --repeat N
        if len(runs) > 1:
            shown += f", worst of {len(runs)} runs"
        rows = r.get("ledger_rows") or r.get("rows")
        scrolled = _fmt(r.get("rows_scrolled", "?"))
        ledger = f"Celery {_n(rows) if rows else '?'}, {engine} (open, scroll {scrolled} rows, filters)"
        return Measured(ledger, shown, f"{v / limit:.2f} of ≤ {limit:g} {unit}", v <= limit)

    return measure


def _scan(preset: str, engine: str):
    def measure(d) -> Measured | None:
        rows = [r for r in (d or {}).get("scans", []) if r.get("preset") == preset and r.get("engine") == engine]
        if not rows:
            return None
        r = max(rows, key=lambda r: r.get("rows", 0))
        sc, fl = r.get("scan") or {}, r.get("floor") or {}
        if sc.get("rc") != 0 or fl.get("rc") != 0 or not fl.get("s"):
            return None
        ratio = sc["s"] / fl["s"]
        keys = r.get("keys_equal", "?")
        return Measured(
            f"{preset} {_n(r['rows'])}, {engine}",
            f"scan {sc['s']:.2f} s, floor {fl['s']:.2f} s" + ("" if keys == "yes" else f"; keys = floor: {keys}"),
            f"{ratio:.2f}× of ≤ 2×",
            ratio <= 2.0 and keys == "yes",
        )

    return measure


def _redis(key: str, limit: float, unit: str):
    def measure(d) -> Measured | None:
        v = _num((d or {}).get(key)) if isinstance(d, dict) else None
        if v is None:
            return None
        shown = f"{v:.1f} s ({d.get('total_cpu_s', '?')} s CPU)" if unit == "s" else f"{v:.0f} MB (process tree)"
        return Measured(
            f"{_fmt(d.get('keys', '?'))} Celery keys", shown, f"{v / limit:.2f} of ≤ {limit:g} {unit}", v <= limit
        )

    return measure


def _effects(d) -> Measured | None:
    runs = [r for r in (d or {}).get("runs", []) if r.get("pair") == "sqlite+postgresql" and r.get("baseline_s")]
    if not runs:
        return None
    ratios = [r["reconcile_s"] / r["baseline_s"] for r in runs]
    med = statistics.median(ratios)
    spread = f" [{min(ratios):.2f}–{max(ratios):.2f}]" if len(ratios) > 1 else ""
    ok = all(r.get("planted_ok", True) for r in runs)
    return Measured(
        f"{d.get('size', '?')} operations (SQLite) ↔ effects (PostgreSQL)",
        f"median of {len(runs)}: reconcile {statistics.median(r['reconcile_s'] for r in runs):.2f} s, "
        f"baseline {statistics.median(r['baseline_s'] for r in runs):.2f} s" + ("" if ok else "; findings ≠ planted"),
        f"{med:.2f}×{spread} of ≤ 2×",
        med <= 2.0 and ok,
    )


TARGETS = [
    Target("cells_doc_rss", "Export of 120 × 5 MB JSON documents: peak RSS ≤ 300 MB", "cells_doc", _cells_doc),
    Target("export_rate", "Export of 2M Celery rows ≥ 150,000 rows/s", "export", _export_rate),
    Target("export_vs_pandas", "Export of 2M Celery rows ≤ 2× pandas read_sql + to_csv", "export", _export_pandas),
    Target("gui_memory", "GUI + findings process ≤ 500 MB", "gui_sqlite", _gui("memory", 500, "MB")),
    Target("gui_first_rows", "GUI first rows ≤ 0.5 s", "gui_sqlite", _gui("first_rows_s", 0.5, "s")),
    Target("gui_stall", "GUI longest stall ≤ 100 ms", "gui_sqlite", _gui("max_stall_s", 0.1, "s")),
    Target("scan_celery_sqlite", "scan ≤ 2× floor: celery, SQLite", "scan", _scan("celery", "sqlite")),
    Target("scan_celery_postgresql", "scan ≤ 2× floor: celery, PostgreSQL", "scan", _scan("celery", "postgresql")),
    Target("scan_idemview_sqlite", "scan ≤ 2× floor: idemview, SQLite", "scan", _scan("idemview", "sqlite")),
    Target(
        "scan_idemview_postgresql", "scan ≤ 2× floor: idemview, PostgreSQL", "scan", _scan("idemview", "postgresql")
    ),
    Target("redis_time", "Redis 1M keys: snapshot + scan ≤ 20 s", "redis", _redis("total_s", 20, "s")),
    Target("redis_memory", "Redis 1M keys: peak RSS ≤ 500 MB", "redis", _redis("tree_peak_rss_mb", 500, "MB")),
    Target("effects", "Effects 1M ↔ 1M: reconcile ≤ 2× reading both key columns", "effects", _effects),
]


def _tail(text: str, n: int = 400) -> str:
    t = (text or "").strip()
    return ("…" + t[-n:]) if len(t) > n else t


def why_absent(res: Results, t: Target) -> str:
    """Why a target has no figure: the step did not run, timed out, failed, or wrote no such result."""
    s = res.step(t.step)
    if s is None:
        planned = t.step in res.run.get("planned", [])
        return f"step `{t.step}` " + ("did not finish (the run stopped)" if planned else "was not run")
    if s.get("timed_out"):
        why = f"step `{t.step}` timed out after {s.get('wall_s', 0):.0f} s"
    elif s.get("exit_code") not in (0, None):
        why = f"step `{t.step}` failed (exit {s.get('exit_code')})"
    elif t.step not in res.data:
        why = f"step `{t.step}` wrote no results"
    else:
        d = res.data[t.step]
        err = d.get("error") if isinstance(d, dict) else None
        why = f"step `{t.step}`: {err}" if err else f"step `{t.step}` has no result for this target"
    tail = _tail(s.get("stderr_tail", ""))
    return why + (f"; stderr: `{_one_line(tail)}`" if tail else "")


def _one_line(s: str) -> str:
    return " ⏎ ".join(x.strip() for x in s.replace("`", "'").splitlines() if x.strip())


def _measure(res: Results, t: Target) -> Measured | None:
    if t.step not in res.data:
        return None
    try:
        return t.measure(res.data[t.step])
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        return None


def render_targets(res: Results, expl: dict[str, str]) -> list[str]:
    """The targets table and, under it, an explanation per miss and a reason per absent figure."""
    L = [
        "## Issue-27 targets",
        "",
        "| target | ledger | measured | ratio / limit | |",
        "|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for t in TARGETS:
        m = _measure(res, t)
        if m is None:
            why = why_absent(res, t)
            L.append(f"| {t.title} | – | – | – | not measured |")
            notes.append(f"- **{t.title}** (`{t.id}`): not measured: {why}.")
            continue
        L.append(f"| {t.title} | {m.ledger} | {m.value} | {m.ratio} | {'✓' if m.ok else '✗'} |")
        if not m.ok:
            text = expl.get(t.id) or "(no explanation written yet: add a `## " + t.id + "` section to " \
                "benchmarks/explanations.md)"  # fmt: skip
            notes.append(f"- **{t.title}** (`{t.id}`): ✗ {m.ratio}. " + text.replace("\n", "\n  "))
    L.append("")
    if notes:
        L += ["### Misses and absent figures, explained", "", *notes, ""]
    return L


# ---------------------------------------------------------------------------------------- sections


def _fmt(v) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:,.1f}"
    if isinstance(v, list | tuple) and all(not isinstance(x, dict | list) for x in v):
        return ", ".join(_fmt(x) for x in v)
    if isinstance(v, dict | list):
        return "`" + json.dumps(v, default=str)[:300] + "`"
    return str(v).replace("|", "\\|").replace("\n", " ")


def kv_table(d: dict, skip: tuple[str, ...] = ()) -> list[str]:
    """Every key of ``d`` as a row (nested dicts of scalars one level down as ``key.sub``)."""
    L = ["| figure | value |", "|---|---|"]
    for k, v in d.items():
        if k in skip:
            continue
        if isinstance(v, dict) and v and all(not isinstance(x, dict | list) for x in v.values()):
            L += [f"| {k}.{kk} | {_fmt(vv)} |" for kk, vv in v.items()]
        else:
            L.append(f"| {k} | {_fmt(v)} |")
    return L + [""]


def table(rows: list[dict], cols: list[tuple[str, Callable[[dict], object]]]) -> list[str]:
    """A Markdown table of ``rows`` with ``(header, getter)`` columns (a getter's error shows '–')."""
    L = ["| " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for _h, f in cols:
            try:
                v = f(r)
            except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
                v = "–"
            cells.append(_fmt(v))
        L.append("| " + " | ".join(cells) + " |")
    return L + [""]


def _rc(x: dict) -> str:
    return "" if x.get("rc") == 0 else f" (exit {x.get('rc')})"


def sec_ledgers(d: dict) -> list[str]:
    rows = [{"ledger": k, **v} for k, v in d.get("ledgers", {}).items()]
    return table(rows, [("ledger", lambda r: r["ledger"]), ("generated s (0: cached)", lambda r: r["generate_s"])])


def sec_scan(d: dict) -> list[str]:
    cols = [
        ("preset", lambda r: r["preset"]),
        ("engine", lambda r: r["engine"]),
        ("rows", lambda r: _n(r["rows"])),
        ("scan s", lambda r: f"{r['scan']['s']:.2f}{_rc(r['scan'])}"),
        ("scan RSS MB", lambda r: round(r["scan"]["rss_mb"])),
        ("floor s", lambda r: f"{r['floor']['s']:.2f}{_rc(r['floor'])}"),
        ("scan/floor", lambda r: f"{r['scan']['s'] / r['floor']['s']:.2f}×"),
        ("pandas s", lambda r: f"{r['pandas']['s']:.2f}{_rc(r['pandas'])}" if r.get("pandas") else "not run"),
        ("keys = floor", lambda r: r["keys_equal"]),
        ("findings", lambda r: ", ".join(f"{k} {v}" for k, v in sorted(r.get("counts", {}).items()))),
    ]
    m = d.get("machine") or {}
    head = [f"PostgreSQL {m['postgresql']}, pandas {m.get('pandas', '?')}.", ""] if m.get("postgresql") else []
    return head + table(d.get("scans", []), cols)


def sec_export(d: dict) -> list[str]:
    cols = [
        ("engine", lambda r: r["engine"]),
        ("rows", lambda r: f"{r['rows']:,}"),
        ("export s", lambda r: f"{r['export']['s']:.1f}{_rc(r['export'])}"),
        ("rows/s", lambda r: f"{r['rows'] / r['export']['s']:,.0f}"),
        ("export RSS MB", lambda r: round(r["export"]["rss_mb"])),
        ("pandas s", lambda r: f"{r['pandas']['s']:.1f}{_rc(r['pandas'])}"),
        ("pandas RSS MB", lambda r: round(r["pandas"]["rss_mb"])),
        ("export/pandas", lambda r: f"{r['export']['s'] / r['pandas']['s']:.2f}×"),
        ("CSV MB", lambda r: round(r["csv_mb"])),
    ]
    return table(d.get("exports", []), cols)


def sec_profile(d: dict) -> list[str]:
    L = kv_table(d, skip=("mask_per_column_s", "ab"))
    per = d.get("mask_per_column_s") or {}
    if per:
        L += ["Mask + format per column (s):", ""]
        L += table([{"c": k, "s": v} for k, v in per.items()], [("column", lambda r: r["c"]), ("s", lambda r: r["s"])])
    if d.get("ab"):
        L += ["A/B rounds: " + _fmt(d["ab"]), ""]
    return L


def sec_cells(d: dict) -> list[str]:
    cols = [
        ("engine", lambda r: r["engine"]),
        ("shape", lambda r: r["shape"]),
        ("cells", lambda r: r["ops"]),
        ("MB each", lambda r: r["mb"]),
        ("s", lambda r: round(r["s"], 1)),
        ("CPU s", lambda r: round(r["cpu_s"], 1) if "cpu_s" in r else "–"),
        ("MB/s", lambda r: round(r["ops"] * r["mb"] / r["s"], 2)),
        ("peak RSS MB", lambda r: round(r["peak_mb"])),
        ("exit", lambda r: r.get("exit", "?")),
    ]
    known = {"engine", "shape", "ops", "mb", "s", "cpu_s", "peak_mb", "exit", "bytes"}
    extra = sorted({k for r in d.get("rows", []) for k in r} - known)
    cols += [(k, lambda r, k=k: r.get(k, "")) for k in extra]
    return table(d.get("rows", []), cols)


def sec_effects(d: dict) -> list[str]:
    cols = [
        ("pair", lambda r: r.get("label", r["pair"])),
        ("baseline s (CPU)", lambda r: f"{r['baseline_s']:.2f} ({r['baseline_cpu_s']:.2f})"),
        ("reconcile s (CPU)", lambda r: f"{r['reconcile_s']:.2f} ({r['reconcile_cpu_s']:.2f})"),
        ("ratio", lambda r: f"{r['reconcile_s'] / r['baseline_s']:.2f}×"),
        ("peak RSS MB (anon)", lambda r: f"{r['peak_rss_mb']:.0f} ({r['peak_anon_mb']:.0f})"),
        ("load", lambda r: round(r["load"], 1)),
        ("findings = planted", lambda r: "yes" if r["planted_ok"] else "NO"),
    ]
    return [f"Size {d.get('size')}; planted {_fmt(d.get('planted'))}.", ""] + table(d.get("runs", []), cols)


def sec_masking(d: dict) -> list[str]:
    L = [
        f"{d.get('secret_cases_ok')}/{d.get('secret_cases')} secret cases masked; "
        f"{sum(v[0] for v in d.get('lookalikes_masked', {}).values())} of {d.get('lookalike_cases')} "
        "look-alike cases changed.",
        "",
    ]
    rec = [{"k": k, "ok": v[0], "n": v[1]} for k, v in d.get("recall", {}).items() if v[0] < v[1]]
    pre = [{"k": k, "ok": v[0], "fp": v[1]} for k, v in d.get("precision", {}).items() if v[1]]
    L += [
        f"Recall: {len(d.get('recall', {})) - len(rec)} of {len(d.get('recall', {}))} secret kinds at 100 %; "
        f"precision: {len(d.get('precision', {})) - len(pre)} of {len(d.get('precision', {}))} tag kinds without "
        "a tag on a look-alike." + (" Below: the kinds short of that." if rec or pre else ""),
        "",
    ]
    if rec:
        L += table(
            rec,
            [("secret kind", lambda r: r["k"]), ("recall", lambda r: f"{r['ok'] / r['n']:.1%} ({r['ok']}/{r['n']})")],
        )
    if pre:
        L += table(
            pre, [("tag kind", lambda r: r["k"]), ("precision", lambda r: f"{r['ok'] / (r['ok'] + r['fp']):.1%}")]
        )
    return L


def sec_generic(d) -> list[str]:
    if isinstance(d, dict):
        return kv_table(d)
    return ["```", json.dumps(d, indent=1, default=str)[:3000], "```", ""]


SECTIONS: dict[str, Callable[[dict], list[str]]] = {
    "ledgers": sec_ledgers,
    "scan": sec_scan,
    "export": sec_export,
    "export_profile": sec_profile,
    "cells_doc": sec_cells,
    "cells_doc_servers": sec_cells,
    "cells_big": sec_cells,
    "cells_small": sec_cells,
    "effects": sec_effects,
    "masking_corpus": sec_masking,
}


def render_step(res: Results, s: dict) -> list[str]:
    """A step's section: how it ran, then its tables (the generic list when its shape is unknown)."""
    state = "**timed out**" if s.get("timed_out") else f"exit {s.get('exit_code')}"
    L = [
        f"## {s.get('title', s['id'])} (`{s['id']}`)",
        "",
        f"`{_short(res, s.get('command', ''))}` — {s.get('start', '?')} → {s.get('end', '?')}, "
        f"{s.get('wall_s', 0):.0f} s wall, {s.get('cpu_s', 0):.0f} s CPU, {state}, load {_load(s.get('load_start'))} → "
        f"{_load(s.get('load_end'))}.",
        "",
    ]
    if s["id"] not in res.data:
        tail = _tail(s.get("stderr_tail", ""), 1200)
        return (
            L
            + ["No results written." + (" stderr (tail):" if tail else ""), ""]
            + (["```", tail, "```", ""] if tail else [])
        )
    d = res.data[s["id"]]
    try:
        body = SECTIONS.get(s["id"], sec_generic)(d)  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as e:
        body = [f"(the renderer could not read this shape: {type(e).__name__}: {e}; as written:)", ""]
        body += sec_generic(d)
    if s.get("timed_out") or s.get("exit_code") not in (0, None):
        body = ["Partial results (the step did not finish):", ""] + body
    return L + body


def _short(res: Results, cmd: str) -> str:
    """The command with the results folder as ``$RESULTS`` and paths inside the repository relative to it."""
    cmd = cmd.replace(str(res.dir), "$RESULTS")
    root = res.run.get("root")
    return cmd.replace(root.rstrip("/") + "/", "") if root else cmd


def _load(x) -> str:
    return "/".join(f"{v:g}" for v in x) if isinstance(x, list) else "?"


def render_head(res: Results) -> list[str]:
    r, m = res.run, res.run.get("machine", {})
    led = res.data.get("ledgers")
    gen = sum(v.get("generate_s", 0) for v in led.get("ledgers", {}).values()) if isinstance(led, dict) else 0
    L = [
        "# idemview benchmarks",
        "",
        f"Rendered by `benchmarks/render_report.py` from one `make bench` run (`benchmarks/bench_all.py`; results "
        f"folder `{res.dir.name}` under `$IDEMVIEW_BENCH_CACHE/results/`, outside the repository). Earlier "
        "hand-written rounds, with their analyses: [docs/benchmarks-history.md](docs/benchmarks-history.md).",
        "",
    ]
    if r.get("quick"):
        L += [
            "> **Quick run** (`make bench BENCH_QUICK=1`): 10k–20k-row ledgers that check the orchestration. "
            "These are not the targets' ledgers: ✓/✗ below say nothing about the issue-27 targets.",
            "",
        ]
    dur = r.get("duration_s", 0)
    L += [
        f"- **Date**: {r.get('started', '?')} → {r.get('ended', 'unfinished')} (UTC); total **{dur / 60:.1f} min** "
        f"(estimate {r.get('estimate_s', 0) / 60:.0f} min, budget {r.get('budget_min', 45):g} min), of which ledger "
        f"generation {gen:.0f} s (see `ledgers`).",
        f"- **Commit**: `{m.get('commit', '?')}` ({m.get('branch', '?')}).",
        f"- **Machine**: {m.get('cores', '?')} cores, {m.get('mem_gb', '?')} GB, {m.get('platform', '?')}; Python "
        f"{m.get('python', '?')}, SQLite {m.get('sqlite', '?')}. Load average (1/5/15 min) at start "
        f"{_load(r.get('load_start'))}, at end {_load(r.get('load_end'))}.",
        "",
    ]
    return L


def render_steps_table(res: Results) -> list[str]:
    cols = [
        ("step", lambda s: f"`{s['id']}`"),
        ("wall s", lambda s: s["wall_s"]),
        ("CPU s", lambda s: s["cpu_s"]),
        ("estimate s", lambda s: s["estimate_s"]),
        ("result", lambda s: "timed out" if s["timed_out"] else f"exit {s['exit_code']}"),
        ("load start → end", lambda s: f"{s['load_start'][0]:g} → {s['load_end'][0]:g}"),
    ]
    return ["## Steps", ""] + table(res.run.get("steps", []), cols)


def render(res: Results, expl: dict[str, str]) -> str:
    """The whole report (Markdown) of a results folder."""
    L = render_head(res) + render_targets(res, expl) + render_steps_table(res)
    for s in res.run.get("steps", []):
        L += render_step(res, s)
    return "\n".join(L).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(os.environ.get("IDEMVIEW_BENCH_CACHE") or Path.home() / ".cache" / "idemview-bench")
    ap.add_argument("results", nargs="?", default=str(default / "results" / "latest"))
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--explanations", default=str(HERE / "explanations.md"))
    a = ap.parse_args(argv)
    if not (Path(a.results) / "run.json").exists():
        print(f"no run.json in {a.results}: give a results folder of benchmarks/bench_all.py", file=sys.stderr)
        return 2
    Path(a.out).write_text(render(load(a.results), explanations(a.explanations)))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
