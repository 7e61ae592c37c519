"""The layout editor's mapping <-> widgets: a :class:`LayoutDraft` shown in the tabs (``set_model``) and
read back from them (``draft``, ``model``, ``layout_text``). A mixin of
:class:`~idemview.qt.layout_editor.dialog.LayoutEditor` (the attributes it reads are the dialog's)."""

from __future__ import annotations

import copy
from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
)

from idemview.domain.actions import ActionRuleError, ActionRules
from idemview.layouts.draft import AttemptsDraft, ExpiryDraft, LayoutDraft, StatusDraft, TimeDraft, ValueDraft
from idemview.layouts.layout import (
    ATTEMPT_SOURCES,
)
from idemview.ledger.builder import (
    ColumnInfo,
    TableInfo,
    find_table,
    layout_text,
)
from idemview.qt.layout_editor.common import (
    NONE,
)
from idemview.qt.layout_editor.widgets import (
    _tkey,
    _tsplit,
)


class EditorMapping:
    """Showing a draft in the widgets and reading it back."""

    masker: Any
    tables: Any
    _draft: Any
    _loading: bool

    def _table_info(self, combo: QComboBox) -> TableInfo | None:
        d = _tsplit(combo.currentData())
        if not d:
            return None
        return next((t for t in self.tables if (t.schema, t.name) == d), None)

    def _select_table(self, combo: QComboBox, name: str | None, schema: str | None):
        combo.blockSignals(True)
        t = find_table(self.tables, name, schema) if name else None
        if t is None and name:
            t = find_table(self.tables, name)
        if t is not None:
            combo.setCurrentIndex(combo.findData(_tkey(t.schema, t.name)))
        elif name:
            # Keep the missing name visible: the preview then says the table is not in the database.
            combo.addItem(f"{name}  (not in database)", _tkey(schema, name))
            combo.setCurrentIndex(combo.count() - 1)
        else:
            combo.setCurrentIndex(0)
        combo.blockSignals(False)

    def set_model(self, model: dict | LayoutDraft, guess: bool = False) -> None:
        """Show ``model`` (a :class:`LayoutDraft`, or its TOML-shaped dict) in the widgets.

        Entries the widgets do not edit (status rules, JSON paths of the attempts, ``where``, detect
        hints) are kept and saved as they were. ``guess``: suggest statuses for sampled values that the
        model does not map (used when starting from scratch)."""
        self._loading = True
        self._draft = copy.deepcopy(model) if isinstance(model, LayoutDraft) else LayoutDraft.from_model(model)
        model = self._draft.to_model()
        meta, ops = model.get("layout", {}), model.get("operations", {})
        self.name_edit.setText(meta.get("name", ""))
        self._select_table(self.table_combo, ops.get("table"), ops.get("schema"))
        self._fill_columns()
        self.key_list.set_columns(self._cols(), list(ops.get("key") or []))
        self.scope_list.set_columns(self._cols(), list(ops.get("scope") or []))
        kind = ops.get("kind")
        self.kind_combo.set_value(kind if isinstance(kind, str) else (kind or {}).get("column"), emit=False)
        self.row_id_combo.set_value(ops.get("row_id"), emit=False)

        st = ops.get("status", "unknown")
        st = st if isinstance(st, dict) else {"default": st}
        self.status_default.setCurrentText(st.get("default", "unknown"))
        rules = st.get("rules") or []
        self.status_combo.blockSignals(True)
        self.status_combo.set_columns(self._cols())
        if rules:
            self.status_combo.setItemText(0, "(ordered rules from the preset)")
            self.status_combo.set_value(None, emit=False)
            self.rules_label.setText(
                f"This layout derives the status from {len(rules)} ordered rules over columns "
                f"({', '.join(sorted({p.get('column', 'any') for r in rules for p in r.get('when', [])}))}). "
                "They are kept as they are; choose a status column to replace them with a value map."
            )
        else:
            self.status_combo.setItemText(0, NONE)
            self.status_combo.set_value(st.get("column"), emit=False)
        self.rules_label.setVisible(bool(rules))
        self.status_combo.blockSignals(False)
        self._pending_map = {"status": dict(st.get("map") or {})}
        self._pending_guess = {"status": guess}
        self.status_model.set_values([], {} if rules else self._pending_map["status"], False)
        if self.status_combo.value():
            self._sample_status()

        times = ops.get("times") or {}
        for name, row in self.time_rows.items():
            row.set_value(times.get(name))
            if row.column.value():
                self._sample_time(name, guess=False)
        fields = ops.get("fields") or {}
        for name, (cb, path) in self.value_rows.items():
            v = fields.get(name)
            cb.set_value(v if isinstance(v, str) else (v or {}).get("column"), emit=False)
            path.setText("" if isinstance(v, str) or v is None else (v.get("json_path") or ""))
        for name, (cb, enc) in self.payload_rows.items():
            v = fields.get(name)
            cb.set_value(v if isinstance(v, str) else (v or {}).get("column"), emit=False)
            enc.setCurrentText("text" if isinstance(v, str) or v is None else v.get("encoding", "text"))

        self._set_attempts(model.get("attempts") or {"source": "none"})

        exp, tun = model.get("expiry") or {}, model.get("tunables") or {}
        self.retention_spin.setValue(int(exp.get("retention_seconds") or 0))
        self.retention_from.setCurrentText(exp.get("retention_from", "created_at"))
        self.lock_spin.setValue(int(exp.get("lock_timeout_seconds") or 0))
        self.window_spin.setValue(int(exp.get("dedup_window_seconds") or 0))
        self.retry_spin.setValue(int(tun.get("retry_threshold", 5)))
        self._fill_fx(model.get("effects"))
        try:
            self.actions_edit.setText(ActionRules.from_dict(model.get("actions")).to_text())
        except ActionRuleError:
            self.actions_edit.setText("")
        self._loading = False
        self._changed()

    def _set_attempts(self, a: dict):
        src = a.get("source", "none")
        self.att_source.blockSignals(True)
        self.att_source.setCurrentText(src)
        self.att_source.blockSignals(False)
        self.att_stack.setCurrentIndex(ATTEMPT_SOURCES.index(src))
        self._select_table(
            self.att_table,
            a.get("table") if src == "table" else None,
            a.get("schema", self._draft.operations.schema),
        )
        self._fill_att_columns()
        join = list((a.get("join") or {}).items()) if src == "table" else []
        for i, (ac, oc) in enumerate(self.att_join):
            pair = join[i] if i < len(join) else (None, None)
            ac.set_value(pair[0], emit=False)
            oc.set_value(pair[1], emit=False)
        self.att_number.set_value(a.get("number"), emit=False)
        out = a.get("outcome", "unknown")
        out = out if isinstance(out, dict) else {"default": out}
        self.att_outcome.set_value(out.get("column"), emit=False)
        self.att_outcome_default.setCurrentText(out.get("default", "unknown"))
        self._pending_map["outcome"] = dict(out.get("map") or {})
        self._pending_guess["outcome"] = self._pending_guess.get("status", False)
        self.outcome_model.set_values([], self._pending_map["outcome"], False)
        if src == "table" and self.att_outcome.value():
            self._sample_outcome()
        for k, row in self.att_times.items():
            row.set_value(a.get(k))
        for k, cb in self.att_cols.items():
            cb.set_value(a.get(k), emit=False)
        where = a.get("where") or []
        self.att_where_label.setText(
            f"Only rows matching the layout's {len(where)} 'where' condition(s) count as attempts (kept)."
            if where
            else ""
        )
        self.att_where_label.setVisible(bool(where))
        self.att_json_column.set_value(a.get("column") if src == "json_array" else None, emit=False)

    def _cols(self) -> list[ColumnInfo]:
        t = self._table_info(self.table_combo)
        return list(t.columns) if t else []

    def _fill_columns(self):
        cols = self._cols()
        self.key_list.set_columns(cols, self.key_list.checked())
        self.scope_list.set_columns(cols, self.scope_list.checked())
        combos = [
            self.kind_combo,
            self.row_id_combo,
            self.status_combo,
            self.att_json_column,
            *[r.column for r in self.time_rows.values()],
            *[c for c, _p in self.value_rows.values()],
            *[c for c, _e in self.payload_rows.values()],
            *[o for _a, o in self.att_join],
        ]
        for cb in combos:
            cb.set_columns(cols)

    def _fill_att_columns(self):
        t = self._table_info(self.att_table)
        cols = list(t.columns) if t else []
        for cb in [
            self.att_number,
            self.att_outcome,
            *self.att_cols.values(),
            *[r.column for r in self.att_times.values()],
            *[a for a, _o in self.att_join],
        ]:
            cb.set_columns(cols)

    def model(self) -> dict:
        """The mapping shown, as a TOML-shaped dict (``self.draft().to_model()``)."""
        return self.draft().to_model()

    def draft(self) -> LayoutDraft:
        """The mapping shown, as a typed :class:`LayoutDraft`: the starting draft with every entry the
        widgets edit replaced by the widgets' values."""
        d = copy.deepcopy(self._draft)
        d.name = self.name_edit.text().strip()
        o = d.operations
        t = _tsplit(self.table_combo.currentData())
        o.table, o.schema = (t[1], t[0]) if t else ("", None)
        o.key = self.key_list.checked()
        o.scope = self.scope_list.checked()
        # key_required names key columns (pg-boss: the throttle slot); unchosen ones go. A key fallback
        # stays for composite keys too (a record whose key is incomplete is keyed "#<row id>").
        if o.extra.get("key_required"):
            o.extra["key_required"] = [c for c in o.extra["key_required"] if c in o.key]
        kind, old_kind = self.kind_combo.value(), o.kind
        if kind is None:
            if not (old_kind is not None and old_kind.literal is not None):
                o.kind = None  # a literal kind (no column) is kept
        elif old_kind is None or old_kind.column != kind or old_kind.literal is not None:
            o.kind = ValueDraft(kind)  # the same column keeps its JSON path
        o.row_id = self.row_id_combo.value()

        default = self.status_default.currentText()
        col = self.status_combo.value()
        if col:
            o.status = StatusDraft(column=col, map=self.status_model.mapping(default), default=default)
        elif o.status.rules:
            o.status.default = default
        else:
            o.status = StatusDraft(default=default, literal=default)

        o.times = {n: TimeDraft.from_model(v) for n, v in ((n, r.value()) for n, r in self.time_rows.items()) if v}
        fields: dict[str, ValueDraft] = {}
        for name, (cb, path) in self.value_rows.items():
            c = cb.value()
            if not c:
                continue
            old = o.fields.get(name)
            v = copy.copy(old) if old is not None and old.column == c and old.literal is None else ValueDraft(c)
            v.json_path = path.text().strip() or None
            fields[name] = v
        for name, (cb, enc) in self.payload_rows.items():
            c = cb.value()
            if c:
                fields[name] = ValueDraft(c, encoding=enc.currentText(), payload=True)
        o.fields = fields

        d.attempts = AttemptsDraft.from_model(self._attempts_model(d.attempts.to_model()))
        retention = self.retention_spin.value() or None
        d.expiry = ExpiryDraft(
            retention_seconds=retention,
            retention_from=self.retention_from.currentText() if retention else "created_at",
            lock_timeout_seconds=self.lock_spin.value() or None,
            dedup_window_seconds=self.window_spin.value() or None,
        )
        d.retry_threshold = self.retry_spin.value()
        fx = self._fx_model()
        if fx is None:
            d.extra.pop("effects", None)
        else:
            d.extra["effects"] = fx
        try:  # a rule that does not parse keeps the section as it was (the page says why)
            rules = ActionRules.from_text(self.actions_edit.text(), "action rules")
            if rules:
                d.extra["actions"] = rules.to_dict()
            else:
                d.extra.pop("actions", None)
        except ActionRuleError:
            pass
        return d

    def _attempts_model(self, old: dict) -> dict:
        src = self.att_source.currentText()
        if src in ("none", "counter"):
            return {"source": src}
        if src == "json_array":
            d = dict(old) if old.get("source") == "json_array" else {"source": src}
            d["column"] = self.att_json_column.value()
            return d
        t = _tsplit(self.att_table.currentData())
        same = old.get("source") == "table" and t and old.get("table") == t[1]
        d = dict(old) if same else {"source": "table"}
        d["table"], d["schema"] = (t[1], t[0]) if t else (None, None)
        d["join"] = {a.value(): o.value() for a, o in self.att_join if a.value() and o.value()}
        d["number"] = self.att_number.value()
        default = self.att_outcome_default.currentText()
        oc = self.att_outcome.value()
        old_out = d.get("outcome")
        if oc:
            d["outcome"] = {"column": oc, "map": self.outcome_model.mapping(default), "default": default}
        elif isinstance(old_out, dict) and old_out.get("rules"):
            d["outcome"] = dict(old_out, default=default)
        else:
            d["outcome"] = default
        for k, row in self.att_times.items():
            d[k] = row.value()
        for k, cb in self.att_cols.items():
            d[k] = cb.value()
        return d

    def layout_text(self) -> str:
        """The TOML of the mapping shown. Raises :class:`LayoutError` when it is not a valid layout."""
        return layout_text(self.model())
