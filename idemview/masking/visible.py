"""The display sink (issue 19 item 10): every text idemview shows or prints makes control, bidi and
invisible characters visible, so a terminal escape in a table name cannot drive the terminal and two
keys that differ by a right-to-left override or a zero-width space never look equal.

The rule is the one the scan's text output already followed through ``repr`` (``who()`` in
:mod:`idemview.findings.common`): a character is shown as is when :meth:`str.isprintable` says so, and
escaped otherwise. ``isprintable`` is False for the Unicode categories Cc (C0/C1 controls, ESC, DEL),
Cf (format: U+202A-U+202E and U+2066-U+2069 bidi controls, U+200B-U+200F zero-width and marks, U+FEFF,
U+00AD), Cs (lone surrogates: bytes kept by ``surrogateescape``), Co/Cn (private use, unassigned), Zl/Zp
(U+2028/U+2029) and Zs other than the ASCII space (U+00A0, U+3000...).

Escapes are JSON's: ``\\u202e``, ``\\u001b``, a surrogate pair for code points above U+FFFF, so text
written inside a JSON string stays valid JSON and decodes to the exact value. A backslash already in the
text is left alone (ledger JSON is full of them). Stored values are never changed: the CSV keeps the exact
value, and :func:`has_hidden` lets the writer's manifest say which rows hold such characters.
"""

from __future__ import annotations

import io
from typing import Any

__all__ = ["visible", "has_hidden", "VisibleWriter", "HiddenRows", "LINE_BREAKS"]

#: Characters multi-line views (detail panes, stdout) keep as they are.
LINE_BREAKS = "\n\t"


def _esc(ch: str) -> str:
    o = ord(ch)
    if o > 0xFFFF:
        o -= 0x10000
        return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"
    return f"\\u{o:04x}"


def visible(text: Any, keep: str = "") -> str:
    """``text`` (``str``; anything else through ``str``) with every non-printable character escaped
    (``\\u202e``), except those in ``keep`` (e.g. :data:`LINE_BREAKS` for a multi-line pane). Returns
    ``text`` itself when nothing needs escaping (the common case, decided in C)."""
    if not isinstance(text, str):
        text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else _esc(ch) for ch in text)


def has_hidden(text: str) -> bool:
    """True when ``text`` holds a character :func:`visible` would escape other than a line break, tab
    or carriage return (those are visible as such in a spreadsheet cell)."""
    if text.isprintable():
        return False
    return not text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable()


class VisibleWriter(io.TextIOBase):
    """A text stream that passes every write through :func:`visible` on its way to ``stream``.

    ``keep``: characters written as they are (stdout keeps line breaks and tabs). With
    ``one_line=True`` (stderr: one message per line, DESIGN §9) a write's own trailing ``\\n`` is kept
    and any other line break inside it is escaped, so a table name holding ``\\n`` cannot forge a
    second message line. Everything else (``flush``, ``fileno``, ``isatty``, ``encoding``) is the
    wrapped stream's."""

    def __init__(self, stream: Any, keep: str = LINE_BREAKS, one_line: bool = False):
        super().__init__()
        self._stream = stream
        self._keep = keep.replace("\n", "") if one_line else keep
        self._one_line = one_line

    def write(self, s: str) -> int:
        if self._one_line and s.endswith("\n"):
            self._stream.write(visible(s[:-1], self._keep) + "\n")
        else:
            self._stream.write(visible(s, self._keep))
        return len(s)

    def flush(self) -> None:
        self._stream.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(getattr(self._stream, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def wrapped(self) -> Any:
        """The stream written to."""
        return self._stream


class HiddenRows:
    """Which rows of an export hold a character :func:`has_hidden` flags (control, bidi, zero-width…):
    the CSV keeps the exact value, the manifest says where (issue 19 item 10). Row numbers are 1-based
    data rows (the header is row 0); at most :attr:`LIMIT` are kept, the count is exact."""

    LIMIT = 100

    def __init__(self) -> None:
        self.count = 0
        self.rows: list[int] = []
        self._last = 0

    def note(self, columns: list[list[str]], first_row: int) -> None:
        """Check one chunk: ``columns`` (formatted CSV cells, column by column) whose first row is data
        row ``first_row + 1``. Decided per column in C (``isprintable`` over the joined chunk); only a
        column that fails is looked at cell by cell."""
        hits: set[int] = set()
        for col in columns:
            if "".join(col).isprintable():
                continue
            for i, cell in enumerate(col):
                if has_hidden(cell):
                    hits.add(first_row + i + 1)
        for r in sorted(hits):
            self.count += 1
            if len(self.rows) < self.LIMIT:
                self.rows.append(r)

    def describe(self) -> dict[str, Any]:
        """``{"rows": count, "row_numbers": [...], "truncated": bool, "what": ...}`` for the manifest."""
        return {
            "rows": self.count,
            "row_numbers": list(self.rows),
            "truncated": self.count > len(self.rows),
            "what": "control, bidi or invisible characters (Unicode Cc/Cf/Cs/Co/Cn/Zl/Zp, Zs but space), "
            "kept exactly in the CSV; shown escaped (\\u202e) by idemview",
        }
