"""The connection manager: add, edit, duplicate, delete and test saved connections (DESIGN §8).

Connections are saved by :class:`idemview.config.ConnectionStore` (TOML, never a secret); the password
goes to the OS keyring through :class:`idemview.config.CredentialStore`. When no keyring works the
dialog says so (``CredentialStore.notice``) and keeps the password for this session only. A pasted
SQLAlchemy URL is split into the fields (:meth:`Connection.from_url`), so nobody has to hand-escape a
password. Test and layout detection run on a worker thread: a dead host never freezes the dialog.

The "Database" list and each type's fields come from the backends (:mod:`idemview.backends`:
``Backend.choices`` and ``Backend.fields``): SQLite, PostgreSQL, MySQL, MariaDB, Redis, DynamoDB (table,
region, endpoint URL; credentials from the AWS chain), a dump file or folder, and any third party's.
"""

from __future__ import annotations

import re
from dataclasses import replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from idemview.backends import Field, backend_for, backend_for_dialect, backends
from idemview.config import Connection, ConnectionStore, CredentialStore
from idemview.domain.actions import ACTIONS, ActionRuleError, ActionRules
from idemview.domain.model import Outcome, Status
from idemview.layouts.layout import all_presets
from idemview.ledger.tunnel import DEFAULT_PORTS
from idemview.qt import theme
from idemview.qt.workers import JobError, Runner
from idemview.services.opener import editor_engine
from idemview.services.opener import test_connection as opener_test
from idemview.services.session import OpenSpec, SharedMasker, spec_for_connection


def _map_text(m: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in (m or {}).items())


def parse_map_text(text: str, target, what: str) -> tuple[dict[str, str], str | None]:
    """``"RAW=STATUS, RAW2=STATUS"`` (the dialog's field) as a dict of the valid pairs, and the first
    problem in words (or ``None``). Each pair is checked by the core's ``parse_value_map`` (the CLI's
    ``--map-status`` rule); spaces around ``=`` are dropped. A raw value holding a comma, or spaces at
    its ends, is written in connections.toml instead."""
    from idemview.layouts.layout import LayoutError, parse_value_map

    out: dict[str, str] = {}
    problem = None
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        raw, eq, value = item.partition("=")
        item = f"{raw.strip()}={value.strip()}" if eq else item  # "a = b" as typed means a=b
        try:
            out.update(parse_value_map([item], target, what))
        except LayoutError as e:
            problem = problem or str(e).replace(f"--map-{what} ", f"{what} value ")
    return out, problem


def test_connection(conn: Connection, password: str | None, layout: str, token, ssh_secret: str | None = None) -> str:
    """The Test button's job (on a worker thread): :func:`idemview.services.opener.test_connection` for the
    connection as the fields describe it (its backend's own test, through its SSH tunnel if any)."""
    return opener_test(conn, password, layout, ssh_secret)


REMEMBER_TEXT = "Remember in the OS keyring"
SESSION_ONLY_TEXT = "Remember in the OS keyring — unavailable: this session only"  # why: its tooltip, the notice


def show_keyring_notice(label: QLabel, credentials: CredentialStore) -> None:
    """Show ``credentials.notice`` in ``label`` when no keyring can be used, hide it otherwise. The one
    rendering of the notice, used by the connection dialog and the main window alike."""
    if not credentials.available and credentials.notice:
        label.setText("⚠ " + credentials.notice)
        label.setWordWrap(True)
        label.setToolTip(f"keyring backend tried: {credentials.backend}")
        label.setStyleSheet(
            "padding:4px; border-radius:3px; color:black; background:"
            + theme.colour(theme.SEVERITY_COLOURS, theme.Severity.MEDIUM).name()
        )
        label.show()
    else:
        label.clear()
        label.hide()


class ConnectionDialog(QDialog):
    """Saved connections on the left, the selected one's fields on the right. ``spec`` is set when
    the user presses Connect."""

    keyring_changed = Signal()  # emitted (from any thread) when the keyring turns out unusable

    def __init__(
        self, credentials: CredentialStore, masker: SharedMasker, parent=None, store: ConnectionStore | None = None
    ):
        super().__init__(parent)
        self.setWindowTitle("Connections")
        self.credentials, self.masker = credentials, masker
        self.store = store or ConnectionStore()
        self.runner = Runner(self)
        self.spec: OpenSpec | None = None
        self.conns: list[Connection] = self.store.load()
        self._current: Connection | None = None
        self._loading = False
        outer = QVBoxLayout(self)
        self.notice = QLabel()
        self.notice.setWordWrap(True)
        outer.addWidget(self.notice)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self._build_list())
        right = QWidget()
        form = QFormLayout(right)
        self.form = form
        self._reading: list[tuple[QLabel, QWidget]] = []  # rows of the backend's "reading" fields
        self._dialect_shown: str | None = None  # the type the rows were last made for
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        self._build_source_rows(form)
        self._build_server(form)
        self._build_layout_rows(form)
        self._build_value_rows(form)
        # The fields scroll when the screen is too short for them (a rediss connection with an SSH
        # tunnel has 20 rows): without this the dialog fitted to a 1280×800 screen squeezed the server
        # box's rows onto each other.
        self.fields_scroll = QScrollArea()
        self.fields_scroll.setWidgetResizable(True)
        self.fields_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.fields_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.fields_scroll.setWidget(right)
        split.addWidget(self.fields_scroll)
        split.setSizes([220, 560])
        outer.addWidget(split, 1)
        outer.addLayout(self._build_buttons())
        self.resize(880, 600)
        for sig in (
            self.type.currentIndexChanged,
            self.file.textChanged,
            self.host.textChanged,
            self.dbname.textChanged,
        ):
            sig.connect(self._live_list_text)
        self.keyring_changed.connect(self._sync_keyring)
        self._keyring_listener = self.keyring_changed.emit
        credentials.listeners.append(self._keyring_listener)
        self._sync_keyring()
        self._reload_list()
        if self.conns:
            self.list.setCurrentRow(0)
        else:
            self.new()

    def _build_list(self) -> QWidget:
        """The left side: the saved connections and New / Duplicate / Delete."""
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.list = QListWidget()
        self.list.currentRowChanged.connect(self._select)
        lv.addWidget(self.list, 1)
        lb = QHBoxLayout()
        self.new_btn = QPushButton("New")
        self.dup_btn = QPushButton("Duplicate")
        self.del_btn = QPushButton("Delete")
        self.new_btn.clicked.connect(self.new)
        self.dup_btn.clicked.connect(self.duplicate)
        self.del_btn.clicked.connect(self.delete)
        for b in (self.new_btn, self.dup_btn, self.del_btn):
            lb.addWidget(b)
        lv.addLayout(lb)
        return left

    def _build_source_rows(self, form: QFormLayout) -> None:
        """Name, the URL to paste, and the database type (every backend's choices)."""
        self.name = QLineEdit()
        self.name.textChanged.connect(self._live_list_text)
        form.addRow("Name", self.name)
        paste = QHBoxLayout()
        self.url = QLineEdit()
        self.url.setPlaceholderText(
            "Paste a URL or a dump's path, e.g. postgresql://app@db.internal:5432/payments, dynamodb://TABLE?region=R"
        )
        self.url.setEchoMode(QLineEdit.EchoMode.Normal)
        self.split_btn = QPushButton("Fill fields")
        self.split_btn.setToolTip("Split the URL into the fields below (the password goes to the password field)")
        self.split_btn.clicked.connect(self.split_url)
        paste.addWidget(self.url, 1)
        paste.addWidget(self.split_btn)
        form.addRow("URL", paste)
        self.type = QComboBox()
        for backend in sorted(backends(), key=lambda x: (x.priority, x.name)):  # SQL first: the most used
            for choice in backend.choices:
                self.type.addItem(choice.label, choice.dialect)
        self.type.currentIndexChanged.connect(self._type_changed)
        form.addRow("Database", self.type)

    def _build_server(self, form: QFormLayout) -> None:
        """The server group and the editors of the common keys, hidden until a backend's fields show them."""
        # The backend's fields (Backend.fields), rebuilt when the type changes. The editors of the
        # common keys are made once and kept (their values survive a change of type and back).
        self.server = QGroupBox("Server")
        self.server_form = QFormLayout(self.server)
        self.server_form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        fileh = QHBoxLayout()
        self.file = QLineEdit()
        self.file.setPlaceholderText("/path/to/ledger.db")
        self.browse = QPushButton("Browse…")
        self.browse.clicked.connect(self._browse)
        self.browse_dir = QPushButton("Folder…")
        self.browse_dir.setToolTip("Choose a folder holding one file per table")
        self.browse_dir.clicked.connect(self._browse_folder)
        fileh.addWidget(self.file, 1)
        fileh.addWidget(self.browse)
        fileh.addWidget(self.browse_dir)
        self.file_row = QWidget()
        self.file_row.setLayout(fileh)
        fileh.setContentsMargins(0, 0, 0, 0)
        self.host = QLineEdit()
        self.port = QSpinBox()
        self.port.setRange(0, 65535)
        self.dbname = QLineEdit()
        self.user = QLineEdit()
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.remember = QCheckBox(REMEMBER_TEXT)
        self.sslmode = QComboBox()
        # SSH tunnel (DESIGN §5.3): host/port above are then as seen from the SSH host
        self.ssh = QLineEdit()
        self.ssh.setPlaceholderText("USER@HOST[:PORT] — empty: connect directly")
        self.ssh_key = QLineEdit()
        self.ssh_key.setPlaceholderText("private key file, e.g. ~/.ssh/id_ed25519 (empty: agent / ~/.ssh keys)")
        self.ssh_secret = QLineEdit()
        self.ssh_secret.setEchoMode(QLineEdit.EchoMode.Password)
        self.ssh_secret.setPlaceholderText("key passphrase or SSH password (kept in the OS keyring)")
        self.options: dict[str, QLineEdit] = {}  # a backend's own URL options (tls.NAME), made when first shown
        self.notes: list[QLabel] = []
        for w in (self.file_row, self.host, self.port, self.dbname, self.user, self.password, self.remember):
            w.hide()
        for w in (self.sslmode, self.ssh, self.ssh_key, self.ssh_secret):
            w.hide()
        self._fields: tuple[Field, ...] = ()
        form.addRow(self.server)

    def _build_layout_rows(self, form: QFormLayout) -> None:
        """The layout (presets of every backend, or a file) with Edit layout…, and the zone of naive times."""
        self.layout_box = QComboBox()
        self.layout_box.addItem("Detect automatically", "")
        for lay in all_presets():
            self.layout_box.addItem(f"{lay.name} — {lay.title}", lay.name)
        from idemview.layouts.kv import all_kv_presets

        for kv in all_kv_presets():  # key-value layouts, for Redis connections
            self.layout_box.addItem(f"{kv.name} — {kv.title} (Redis)", kv.name)
        from idemview.layouts.dynamodb import all_dynamodb_presets

        for dl in all_dynamodb_presets():  # DynamoDB layouts, for DynamoDB connections
            self.layout_box.addItem(f"{dl.name} — {dl.title} (DynamoDB)", dl.name)
        # long preset titles ("… — … (DynamoDB)") made the combo, and so the dialog, 1,000 px wide
        self.layout_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.layout_box.setMinimumContentsLength(24)
        self.layout_box.view().setMinimumWidth(self.layout_box.view().sizeHintForColumn(0) + 24)  # its list: whole
        self.edit_layout_btn = QPushButton("Edit layout…")
        self.edit_layout_btn.setToolTip(
            "Map or adjust the layout against this database (opened read-only), starting from the chosen preset"
        )
        self.edit_layout_btn.clicked.connect(self.edit_layout)
        lay_row = QHBoxLayout()
        lay_row.addWidget(self.layout_box, 1)
        lay_row.addWidget(self.edit_layout_btn)
        form.addRow("Layout", lay_row)
        self.layout_editor = None
        self._file_items = 0  # layout files added after the presets
        self.zone = QLineEdit("UTC")
        self.zone.setToolTip("IANA zone in which the ledger wrote naive timestamps")
        form.addRow("Naive times in", self.zone)

    def _build_value_rows(self, form: QFormLayout) -> None:
        """Schema, extra status/outcome values, action rules, their problem line, and the result line."""
        # Where the tables are, and raw values the preset does not know (issue 12): kept with the
        # connection, so a preset is never edited for one installation.
        self.schema = QLineEdit()
        self.schema.setPlaceholderText("the preset's schema; else found as detection finds the tables")
        self.schema.setToolTip("Schema (PostgreSQL) or database holding the layout's tables, e.g. jobs")
        form.addRow("Schema", self.schema)
        self.status_map = QLineEdit()
        self.status_map.setPlaceholderText("RAW=STATUS, … e.g. PAUSED=in_progress, archived=completed")
        self.status_map.setToolTip(
            "Raw status values this ledger writes that the layout does not map, as RAW=STATUS pairs separated "
            "by commas; STATUS is one of " + ", ".join(s.value for s in Status)
        )
        form.addRow("Extra status values", self.status_map)
        self.outcome_map = QLineEdit()
        self.outcome_map.setPlaceholderText("RAW=OUTCOME, … e.g. aborted=failed")
        self.outcome_map.setToolTip(
            "Raw attempt outcomes the layout does not map, RAW=OUTCOME pairs; OUTCOME is one of "
            + ", ".join(o.value for o in Outcome)
        )
        form.addRow("Extra outcome values", self.outcome_map)
        # What each kind does (DESIGN §5.1): tried before the layout's rules and the shipped vocabulary.
        self.action_rules = QLineEdit()
        self.action_rules.setPlaceholderText("CLASS=REGEX ; … e.g. money=^billing\\. ; regulated=money")
        self.action_rules.setToolTip(
            "This connection's own action classes: CLASS=REGEX entries (first match on the kind wins) and "
            "regulated=CLASS,… (a person decides on them); CLASS is one of " + ", ".join(ACTIONS)
        )
        form.addRow("Action rules", self.action_rules)
        self.map_problem = QLabel()
        self.map_problem.setWordWrap(True)
        self.map_problem.setStyleSheet("color: #b00020")
        self.map_problem.hide()
        form.addRow(self.map_problem)
        for ed in (self.status_map, self.outcome_map, self.action_rules):
            ed.textChanged.connect(self._check_maps)
        # how this type of store is kept read-only (Backend.read_only_note): a database session, an
        # allowlist of commands, a hook in the AWS client, DuckDB's settings — set by _type_changed
        self.read_only = QLabel()
        self.read_only.setObjectName("readOnlyNote")
        self.read_only.setWordWrap(True)
        form.addRow(self.read_only)
        self.result = QLabel()
        self.result.setWordWrap(True)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow(self.result)

    def _build_buttons(self) -> QHBoxLayout:
        """Test on the left; Save, Connect and Close on the right."""
        bottom = QHBoxLayout()
        self.test_btn = QPushButton("Test")
        self.test_btn.setToolTip("Connect read-only, confirm the session refuses writes, detect the layout")
        self.test_btn.clicked.connect(self.test)
        self.save_btn = QPushButton("Save")
        self.save_btn.clicked.connect(self.save)
        self.connect_btn = QPushButton("Connect")
        self.connect_btn.setDefault(True)
        self.connect_btn.clicked.connect(self.connect_)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        bottom.addWidget(self.test_btn)
        bottom.addStretch(1)
        bottom.addWidget(self.save_btn)
        bottom.addWidget(self.connect_btn)
        bottom.addWidget(close)
        return bottom

    def _sync_keyring(self):
        """Notice and "Remember" box follow the keyring's state: usable → box enabled and checked;
        not usable (none, locked) → the notice, and the box disabled, unchecked, saying session only."""
        show_keyring_notice(self.notice, self.credentials)
        ok = self.credentials.available
        self.remember.setEnabled(ok)
        self.remember.setChecked(ok)
        self.remember.setText(REMEMBER_TEXT if ok else SESSION_ONLY_TEXT)
        self.remember.setToolTip("" if ok else (self.credentials.notice or ""))

    # --------------------------------------------------------------------------------- list

    def _reload_list(self, select_id: str | None = None):
        from idemview.qt.opening import order_connections

        self.conns = order_connections(self.conns)  # the start page's order: last opened first, then name
        self.list.blockSignals(True)
        self.list.clear()
        row = 0
        for i, c in enumerate(self.conns):
            it = QListWidgetItem(self._list_text(c))
            self.list.addItem(it)
            if c.id == select_id:
                row = i
        self.list.blockSignals(False)
        if self.conns:
            self.list.setCurrentRow(row)

    @staticmethod
    def _list_text(c: Connection) -> str:
        keys = {f.key for f in backend_for_dialect(c.dialect).fields(c.dialect)}
        where = f"{c.host}/{c.database}" if "host" in keys else c.database
        return f"{c.name}\n  {c.dialect} · {where}"

    def _live_list_text(self, *_):
        """The list entry of the connection being edited follows the form as it is typed."""
        if self._loading or self._current is None:
            return
        row = next((i for i, c in enumerate(self.conns) if c.id == self._current.id), -1)
        if 0 <= row < self.list.count():
            self.list.item(row).setText(self._list_text(self.form_connection()))

    def _select(self, row: int):
        for i, c in enumerate(self.conns[: self.list.count()]):  # unsaved edits of the one left behind
            self.list.item(i).setText(self._list_text(c))
        if 0 <= row < len(self.conns):
            self._show(self.conns[row])

    def _show(self, c: Connection):
        self._loading = True
        self._current = c
        self.name.setText(c.name)
        self.url.clear()
        i = self.type.findData(c.dialect)
        self.type.setCurrentIndex(i if i >= 0 else 1)
        self._type_changed()  # the backend's rows before their values
        fields = {f.key: f for f in backend_for_dialect(c.dialect).fields(c.dialect)}
        in_file = "database" in fields and fields["database"].kind in ("file", "path")
        self.file.setText(c.database if in_file else "")
        self.host.setText(c.host)
        self.port.setValue(c.port or DEFAULT_PORTS.get(c.dialect, 0))
        self.dbname.setText(c.database if not in_file else "")
        for key, ed in self.options.items():
            ed.setText(str((c.tls or {}).get(key, "")))
        self.user.setText(c.user)
        self.password.setText(self.credentials.get(c.id) or "")
        self.sslmode.setCurrentText(str(c.tls.get("sslmode", "")))
        self.ssh.setText(c.ssh)
        self.ssh_key.setText(c.ssh_key)
        self.ssh_secret.setText(self.credentials.get(f"{c.id}:ssh") or "")
        self._set_layout(c.layout)
        self.zone.setText(c.naive_zone or "UTC")
        self.schema.setText(c.schema or "")
        self.status_map.setText(_map_text(c.status_map))
        self.outcome_map.setText(_map_text(c.outcome_map))
        self.action_rules.setText(ActionRules.from_dict(c.actions).to_text() if _rules_ok(c.actions) else "")
        self._loading = False
        self._type_changed()
        self._live_list_text()

    def _set_layout(self, layout: str):
        """Select ``layout`` (a preset name, a key-value preset under a key prefix ``NAME@PREFIX`` or a
        layout file) in the combo, adding it if needed."""
        j = self.layout_box.findData(layout or "")
        if layout and (j < 0 or j >= self.layout_box.count() - self._file_items):
            from pathlib import Path

            from idemview.layouts.kv import kv_preset_names
            from idemview.layouts.layout import LayoutError, load_layout

            name, _, prefix = layout.partition("@")
            if prefix and name in kv_preset_names() and not Path(layout).is_file():
                text = f"{name} — key prefix {prefix!r} (Redis)"  # redis_kv.detect.load_kv_choice
            else:
                try:  # a small local file: reading its name here does not touch the database
                    text = f"{load_layout(layout).name} — file {layout}"
                except (LayoutError, OSError, ValueError):
                    text = f"{Path(layout).stem} (unreadable) — file {layout}"
            if j < 0:
                self.layout_box.addItem("", layout)
                self._file_items += 1
                j = self.layout_box.count() - 1
            self.layout_box.setItemText(j, text)
        self.layout_box.setCurrentIndex(max(j, 0))

    def backend(self):
        """The backend of the type chosen (:func:`idemview.backends.backend_for_dialect`)."""
        return backend_for_dialect(self.type.currentData() or "sqlite")

    def _editor(self, f: Field) -> QWidget:
        """The editor of field ``f`` (the common keys' editors are kept; an option's is made once)."""
        if f.kind in ("file", "path"):
            self.file.setPlaceholderText(f.placeholder or "/path/to/ledger.db")
            self.file.setToolTip(f.help)
            self.browse_dir.setVisible(f.kind == "path")
            return self.file_row
        known = {
            "host": self.host,
            "port": self.port,
            "database": self.dbname,
            "user": self.user,
            "password": self.password,
            "tls.sslmode": self.sslmode,
        }
        w: QWidget | None = known.get(f.key)
        if w is None and f.key.startswith("tls."):
            w = self.options.get(f.key[4:])
            if w is None:
                w = self.options[f.key[4:]] = QLineEdit()
                w.textChanged.connect(self._live_list_text)
        if w is None:
            w = QLineEdit()  # a third party's field of a kind this dialog does not know: text
            self.options[f.key] = w
        if isinstance(w, QLineEdit):
            w.setPlaceholderText(f.placeholder)
        if isinstance(w, QComboBox) and f.choices and w.count() != len(f.choices):
            w.clear()
            w.addItems(list(f.choices))
        w.setToolTip(f.help)
        return w

    def _build_fields(self, fields: tuple[Field, ...]) -> None:
        """The server box's rows for ``fields``, in their order (the previous rows taken out; their
        editors kept, hidden)."""
        sf = self.server_form
        while sf.rowCount():
            row = sf.takeRow(0)
            for item in (row.labelItem, row.fieldItem):
                w = item.widget() if item is not None else None
                if w is None:
                    continue
                w.hide()  # a deleteLater alone leaves it painted until the event loop runs
                if isinstance(w, QLabel) and w not in self.notes:
                    w.deleteLater()  # the row's label
        for n in self.notes:
            n.hide()
            n.deleteLater()
        self.notes = []
        for label, w in self._reading:
            self.form.takeRow(w)
            w.hide()
            label.hide()
            label.deleteLater()
        self._reading = []
        for f in fields:
            if f.section == "reading":  # beside the layout and the zone: how the records are read
                self._add_reading_row(f)
                continue
            if f.kind == "note":
                note = QLabel(f.label)
                note.setWordWrap(True)
                note.setStyleSheet("color: palette(mid)")
                self.notes.append(note)
                sf.addRow(note)
                continue
            if f.kind == "ssh":
                for label, w in (
                    ("SSH tunnel", self.ssh),
                    ("SSH key", self.ssh_key),
                    ("SSH passphrase", self.ssh_secret),
                ):
                    sf.addRow(label, w)
                    w.show()
                continue
            w = self._editor(f)
            sf.addRow(f.label, w)
            w.show()
            if f.kind == "password":
                sf.addRow("", self.remember)
                self.remember.show()
        self._fields = fields

    def _add_reading_row(self, f: Field) -> None:
        """Field ``f`` (``section="reading"``) as a row of the main form under "Naive times in"."""
        w = self._editor(f)
        label = QLabel(f.label)
        label.setToolTip(f.help)
        row, _role = self.form.getWidgetPosition(self.zone)
        self.form.insertRow(row + 1 + len(self._reading), label, w)
        label.show()  # else shown only when the event loop runs (a queued show of a layout's new child)
        w.show()
        self._reading.append((label, w))

    def _type_changed(self, *_):
        b, d = self.backend(), self.type.currentData()
        fields = b.fields(d)
        if fields != self._fields:
            self._build_fields(fields)
        self.server.setTitle(b.title if b.name != "sql" or d != "sqlite" else "SQLite file")
        self.read_only.setText(b.read_only_note)
        # only the fields that apply: a key-value or DynamoDB ledger has no SQL schema
        self.form.setRowVisible(self.schema, "sql" in b.layout_kinds)
        keys = {f.key for f in fields}
        # the previous type's default port is no port the user chose: PostgreSQL → Redis read 5432
        before = DEFAULT_PORTS.get(self._dialect_shown or "", 0)
        if not self._loading and "port" in keys and self.port.value() in (0, before):
            self.port.setValue(DEFAULT_PORTS.get(d, 0))
        self._dialect_shown = d
        if self.isVisible():
            self._grow_to_fields()

    def showEvent(self, ev):  # noqa: N802 - Qt override
        super().showEvent(ev)
        self._grow_to_fields()

    def _grow_to_fields(self) -> None:
        """Make the fields' side as wide as its rows need (they scroll only up and down) and the dialog
        tall enough that they need no scrolling, within its screen (never shorter: a type with fewer
        rows leaves it as it is)."""
        from idemview.qt.fit import FRAME_H, _avail

        right = self.fields_scroll.widget()
        bar = self.fields_scroll.verticalScrollBar().sizeHint().width()
        self.fields_scroll.setMinimumWidth(right.minimumSizeHint().width() + bar)
        right.adjustSize()
        missing = right.sizeHint().height() - self.fields_scroll.viewport().height()
        if missing <= 0:
            return
        frame = (self.frameGeometry().height() - self.height()) or FRAME_H
        room = _avail(self).height() - frame
        h = min(self.height() + missing, room)
        if h > self.height():
            self.resize(self.width(), h)
            g, avail = self.frameGeometry(), _avail(self)
            if g.bottom() > avail.bottom():  # moved up to stay on the screen
                self.move(self.x(), max(avail.top(), self.y() - (g.bottom() - avail.bottom())))

    def _field_keys(self) -> dict[str, Field]:
        return {f.key: f for f in self.backend().fields(self.type.currentData())}

    def _browse(self):
        f = self._field_keys().get("database")
        filt = (f.filter if f is not None else "") or "All files (*)"
        p, _ = QFileDialog.getOpenFileName(self, f.label if f is not None else "File", self.file.text(), filt)
        if p:
            self.file.setText(p)

    def _browse_folder(self):
        p = QFileDialog.getExistingDirectory(self, "Folder with one file per table", self.file.text())
        if p:
            self.file.setText(p)

    # -------------------------------------------------------------------------------- editing

    def form_connection(self) -> Connection:
        """The connection as the fields describe it (id kept from the selected one): only the fields its
        backend shows (:meth:`Backend.fields`) are read; the others are left empty."""
        base = self._current or Connection(name="")
        d = self.type.currentData()
        keys = self._field_keys()
        db = keys.get("database")
        in_file = db is not None and db.kind in ("file", "path")
        sslmode = self.sslmode.currentText() if "tls.sslmode" in keys else ""
        options = {
            k[4:]: self.options[k[4:]].text().strip()
            for k in keys
            if k.startswith("tls.") and k[4:] in self.options and self.options[k[4:]].text().strip()
        }
        return replace(
            base,
            name=self.name.text().strip() or "unnamed",
            dialect=d,
            driver=base.driver if base.dialect == d else "",
            host=self.host.text().strip() if "host" in keys else "",
            port=(self.port.value() or None) if "port" in keys else None,
            database=(self.file.text().strip() if in_file else self.dbname.text().strip()) if db is not None else "",
            user=self.user.text().strip() if "user" in keys else "",
            tls=({"sslmode": sslmode} if sslmode else {}) | options,
            layout=self.layout_box.currentData() or "",
            naive_zone=self.zone.text().strip() or "UTC",
            schema=self.schema.text().strip(),
            status_map=parse_map_text(self.status_map.text(), Status, "status")[0],
            outcome_map=parse_map_text(self.outcome_map.text(), Outcome, "outcome")[0],
            actions=_rules_text(self.action_rules.text())[0],
            ssh=self.ssh.text().strip() if "ssh" in keys else "",
            ssh_key=self.ssh_key.text().strip() if "ssh" in keys else "",
        )

    def _check_maps(self, *_):
        problems = [
            p
            for p in (
                parse_map_text(self.status_map.text(), Status, "status")[1],
                parse_map_text(self.outcome_map.text(), Outcome, "outcome")[1],
                _rules_text(self.action_rules.text())[1],
            )
            if p
        ]
        self.map_problem.setText("; ".join(problems) + " (not kept)" if problems else "")
        self.map_problem.setVisible(bool(problems))

    def new(self):
        c = Connection(name="new connection", dialect="sqlite")
        self.conns.append(c)
        self._reload_list(c.id)
        self._show(c)
        self.name.setFocus()
        self.name.selectAll()

    def duplicate(self):
        c = self.form_connection()
        import uuid

        d = replace(c, id=uuid.uuid4().hex, name=c.name + " (copy)")
        pw = self.password.text()
        self.conns.append(d)
        self.store.upsert(d)
        if pw:
            self.credentials.set(d.id, pw)
        self._reload_list(d.id)

    def delete(self):
        if self._current is None:
            return
        cid = self._current.id
        self.conns = [c for c in self.conns if c.id != cid]
        self.store.delete(cid)
        self.credentials.delete(cid)
        self._current = None
        self._reload_list()
        if not self.conns:
            self.new()

    def split_url(self):
        """Fill the fields from the pasted URL (the URL field is cleared: it may hold a password)."""
        text = self.url.text().strip()
        if not text:
            return
        try:
            c, pw = backend_for(text).connection_from(self.name.text() or "pasted", text)
        except ValueError as e:
            self.result.setText("⚠ " + self.masker.free_text(str(e)))
            return
        if self._current is not None:
            c.id = self._current.id
        self._current = replace(c, layout=self.layout_box.currentData() or "")
        self._show(self._current)
        if pw:
            self.password.setText(pw)
        self.result.setText("Fields filled from the URL. Press Test to check it.")

    def _option_problem(self) -> str | None:
        """What is wrong with a shown URL option the CLI checks (the write TTL: ``--write-ttl``'s
        :func:`~idemview.ledger.inputs.write_ttl_value`), in words; ``None`` when nothing is."""
        from idemview.errors import InputError

        keys = self._field_keys()
        for name, check in _OPTION_CHECKS.items():
            f, ed = keys.get("tls." + name), self.options.get(name)
            text = ed.text().strip() if ed is not None else ""
            if f is None or not text:
                continue
            try:
                check(text, f.label)
            except InputError as e:
                return str(e)
        return None

    def _refused(self) -> bool:
        """Say a bad option (:meth:`_option_problem`) on the result line: True when there is one."""
        problem = self._option_problem()
        if problem:
            self.result.setText("⚠ " + self.masker.free_text(problem) + " (nothing saved)")
        return problem is not None

    def save(self) -> Connection | None:
        """Save the connection as the fields describe it; ``None`` (said, nothing saved) for a bad option."""
        from idemview.masking.masker import register_secret

        register_secret(self.password.text())  # never echoed by any message
        register_secret(self.ssh_secret.text())
        if self._refused():
            return None
        c = self.form_connection()
        self._current = c
        self.conns = [x for x in self.conns if x.id != c.id] + [c]
        self.store.upsert(c)
        pw = self.password.text()
        where = ""
        if pw and "password" in self._field_keys():
            if self.remember.isChecked():
                stored = self.credentials.set(c.id, pw)
                where = (
                    "; password saved in the OS keyring"
                    if stored
                    else "; password kept for this session only (no usable OS keyring: see the notice)"
                )
            else:
                self.credentials._memory[c.id] = pw  # session only, by the user's choice
                where = "; password kept for this session only" + (
                    "" if self.credentials.available else " (no usable OS keyring: see the notice)"
                )
        if self.ssh_secret.text() and c.ssh:  # the SSH passphrase / password: keyring, like the password
            self.credentials.set(f"{c.id}:ssh", self.ssh_secret.text())
        self._reload_list(c.id)
        self.result.setText(f"Saved {c.name}{where}.")
        return c

    # -------------------------------------------------------------------------------- actions

    def test(self):
        from idemview.masking.masker import register_secret

        c, pw, lay = self.form_connection(), self.password.text() or None, self.layout_box.currentData() or ""
        ssh_pw = self.ssh_secret.text() or None
        register_secret(pw)
        register_secret(ssh_pw)
        if self._refused():
            return
        self.result.setText("Testing…")
        self.test_btn.setEnabled(False)

        def done(msg):
            self.test_btn.setEnabled(True)
            self.result.setText(self.masker.free_text(msg))
            # the chosen key-value preset found only under another key prefix: choose the name carrying it
            found = re.search(r"\blayout ([^\s@]+)@(.+?) — confidence", msg)
            if found and lay == found.group(1) and self.layout_box.currentData() == lay:
                self._set_layout(f"{found.group(1)}@{found.group(2)}")

        def fail(err: JobError):
            self.test_btn.setEnabled(True)
            self.result.setText("⚠ " + self.masker.free_text(err.message))

        self.runner.submit("test", lambda tok: test_connection(c, pw, lay, tok, ssh_pw), done, fail)

    def edit_layout(self):
        """Open the layout editor on a read-only engine of this connection (opened on a worker)."""
        c = self.form_connection()
        pw = self.password.text() or self.credentials.get(c.id) or None
        start = self.layout_box.currentData() or None
        self.edit_layout_btn.setEnabled(False)
        self.result.setText("Opening the database read-only for the layout editor…")

        def job(tok):
            from idemview.layouts.layout import load_layout, preset_names

            engine = editor_engine(c, pw)
            try:
                lay = start if start is None or start in preset_names() else load_layout(start)
            except BaseException:
                engine.dispose()
                raise
            return engine, lay

        def opened(res):
            from idemview.qt.layout_editor import LayoutEditor

            engine, lay = res
            self.edit_layout_btn.setEnabled(True)
            self.result.setText("Layout editor open: Save there sets this connection's layout.")
            ed = LayoutEditor(engine, lay, c.id, parent=self)
            ed.saved.connect(self._layout_saved)
            ed.finished.connect(lambda _r: engine.dispose())
            ed.finished.connect(ed.deleteLater)
            self.layout_editor = ed
            ed.open()

        def fail(err: JobError):
            self.edit_layout_btn.setEnabled(True)
            self.result.setText("⚠ " + self.masker.free_text(err.message))

        self.runner.submit("layout", job, opened, fail)

    def _layout_saved(self, path: str):
        self._set_layout(path)
        if self._current is not None:
            self._current = replace(self.form_connection(), layout=path)
            self.conns = [self._current if x.id == self._current.id else x for x in self.conns]
        self.result.setText(f"Layout saved to {path}; Save or Connect keeps it for this connection.")

    def connect_(self):
        c = self.save()
        if c is None:  # a bad option, said: the dialog stays open
            return
        pw = self.password.text() or self.credentials.get(c.id)
        self.spec = spec_for_connection(c, pw)
        self.accept()

    def done(self, r):  # noqa: D401 - Qt override
        self.runner.cancel()
        try:
            self.credentials.listeners.remove(self._keyring_listener)
        except ValueError:
            pass
        super().done(r)


def _write_ttl(text: str, label: str) -> float:
    from idemview.ledger.inputs import write_ttl_value

    return write_ttl_value(text, label)


#: URL options (``tls.NAME`` fields) checked on Save and Test as the command line checks them
_OPTION_CHECKS = {"write_ttl": _write_ttl}


def _rules_text(text: str) -> tuple[dict, str]:
    """(the connection's ``actions`` dict, a problem in words or ""): a bad entry keeps nothing."""
    try:
        return ActionRules.from_text(text).to_dict(), ""
    except ActionRuleError as e:
        return {}, str(e)


def _rules_ok(d: dict) -> bool:
    try:
        ActionRules.from_dict(d)
        return True
    except ActionRuleError:
        return False
