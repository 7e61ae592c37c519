"""Help in the app (issue 20 §7): what each finding kind means, its severity rule and the fields it
rests on (from :mod:`idemview.findings.definitions`, DESIGN §5's words: no second copy here), one click
from the chips, the findings panel and the detail; About (versions, paths) and the keyboard shortcuts
(the table of the main window module's docstring, the one place they are listed).
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout

from idemview.domain.model import FindingKind
from idemview.qt import theme


def findings_help_html(kind: FindingKind | None = None, finding=None) -> str:
    """The findings explained, as HTML: every kind (``kind`` first and marked), or the one ``finding``
    (with its severity and, when the finding carries one, its action class)."""
    from idemview.findings.definitions import definition
    from idemview.findings.registry import kinds, rule

    order = list(kinds())
    if kind is not None and kind in order:
        order.remove(kind)
        order.insert(0, kind)
    parts = [
        "<h3>Findings</h3><p>Evidence for a human decision, not a verdict. Each is computed for the "
        "instant shown as “Findings as of …”.</p>"
    ]
    for k in order:
        d = definition(k)
        sev = rule(k).severity
        mark = " style='background:palette(alternate-base)'" if k == kind else ""
        glyph = theme.SEVERITY_GLYPHS[sev]
        parts.append(
            f"<div{mark}><h4 id='{k.value}'>{glyph} {html.escape(theme.KIND_WORDS[k])} <code>{k.value}</code></h4>"
        )
        if d is not None:
            parts.append(f"<p><b>Definition:</b> {html.escape(d.definition)}.</p>")
            parts.append(f"<p><b>Severity:</b> {html.escape(d.severity_rule)}.</p>")
            parts.append(f"<p><b>Rests on:</b> {html.escape(', '.join(d.fields))}.</p>")
        if finding is not None and finding.kind == k:
            parts.append(f"<p><b>This finding:</b> {finding.severity.value}")
            action = getattr(finding, "action", None)
            if action is not None:
                parts.append(f" · action class <b>{html.escape(str(getattr(action, 'value', action)))}</b>")
            parts.append("</p>")
        parts.append("</div>")
    return "".join(parts)


def shortcuts(doc: str) -> list[tuple[str, str]]:
    """(keys, what) rows of the reST table in ``doc``: the main window module's docstring, where the
    shortcuts are listed once (passed in, not imported: the main window imports this module)."""
    rows, inside = [], False
    for line in (doc or "").splitlines():
        if line.startswith("===="):
            inside = not inside
            continue
        if inside and line.strip():
            keys, _sep, what = line.partition("  ")
            rows.append((keys.strip(), what.strip()))
    return rows


def about_html() -> str:
    """Versions (idemview, Python, Qt, PySide6, SQLAlchemy) and the paths (config, connections, data,
    log) — what a ticket needs."""
    import platform

    import PySide6
    import sqlalchemy
    from PySide6.QtCore import qVersion

    from idemview import __version__
    from idemview.config import CredentialStore, config_dir, data_dir
    from idemview.qt.applog import LOG_NAME, log_dir

    rows = [
        ("idemview", __version__),
        ("Python", platform.python_version()),
        ("Qt", qVersion()),
        ("PySide6", PySide6.__version__),
        ("SQLAlchemy", sqlalchemy.__version__),
        ("Keyring", CredentialStore().backend),
        ("Settings", str(config_dir())),
        ("Connections", str(config_dir() / "connections.toml")),
        ("Data (demo ledger)", str(data_dir())),
        ("Log file", str(log_dir() / LOG_NAME)),
    ]
    cells = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return (
        "<h3>idemview</h3><p>An inspector for operation ledgers: idempotency keys, attempts, outcomes "
        f"and duplicate side effects. Every connection is read-only.</p><table cellpadding=3>{cells}</table>"
    )


def shortcuts_html(doc: str) -> str:
    cells = "".join(
        f"<tr><td><code>{html.escape(k)}</code></td><td>{html.escape(w)}</td></tr>" for k, w in shortcuts(doc)
    )
    return f"<h3>Keyboard shortcuts</h3><table cellpadding=3>{cells}</table>"


class HelpDialog(QDialog):
    """A read-only page of help (HTML) with Close; window-modal, never blocking (``open()``)."""

    def __init__(self, title: str, body: str, parent=None, anchor: str | None = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("helpDialog")
        v = QVBoxLayout(self)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(False)
        self.browser.setHtml(body)
        if anchor:
            self.browser.scrollToAnchor(anchor)
        v.addWidget(self.browser)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        bb.rejected.connect(self.reject)
        v.addWidget(bb)
        self.resize(620, 560)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)


def _show(parent, title: str, body: str, anchor: str | None = None) -> HelpDialog:
    dlg = HelpDialog(title, body, parent, anchor)
    win = parent.window() if parent is not None else None
    if win is not None:
        win.help_dialog = dlg  # tests and screenshots find the one open
    dlg.show()
    return dlg


def show_findings_help(parent, kind: FindingKind | None = None, finding=None) -> HelpDialog:
    """The findings explained (``kind`` first); one click from a chip, the panel or the detail."""
    return _show(parent, "Findings explained", findings_help_html(kind, finding), kind.value if kind else None)


def show_about(parent) -> HelpDialog:
    return _show(parent, "About idemview", about_html())


def show_shortcuts(parent) -> HelpDialog:
    """The shortcuts of ``parent``'s window, from its module's docstring table."""
    import sys

    win = parent.window()
    doc = getattr(sys.modules.get(type(win).__module__), "__doc__", "") or ""
    return _show(parent, "Keyboard shortcuts", shortcuts_html(doc))
