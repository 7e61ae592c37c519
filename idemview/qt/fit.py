"""Every window and dialog fits the screen it opens on (issue 20 §5).

One chokepoint rather than a size per dialog: :func:`install_screen_fit` puts an application-wide event
filter in place that, when any top-level widget (a dialog, a message box, the layout editor) is about
to show, shrinks it — title bar and frame included — into the available geometry of its screen and
moves it inside. The layout editor asked for 1200×800 plus its title bar on a 1280×800 screen and cut
off Save and Close.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRect, Qt
from PySide6.QtWidgets import QApplication, QMainWindow, QWidget

#: what a window manager's title bar and borders take when the frame is not known yet (before the
#: first show, or on platforms that do not report it): enough for common desktops
FRAME_W, FRAME_H = 8, 38


def _avail(w: QWidget) -> QRect:
    scr = w.screen() or QApplication.primaryScreen()
    if w.parentWidget() is not None and w.parentWidget().window().screen() is not None:
        scr = w.parentWidget().window().screen()
    return scr.availableGeometry()


def fit_dialog(w: QWidget, avail: QRect | None = None) -> None:
    """Shrink ``w`` (a top-level widget) so that its frame fits ``avail`` (default: the available
    geometry of its screen) and move it inside; its layout's minimum is lowered where it is larger
    (the content then scrolls or squeezes rather than running off the screen)."""
    avail = avail or _avail(w)
    # the frame the window manager adds, or (not known yet, or not reported) the usual one
    fw = (w.frameGeometry().width() - w.geometry().width()) or FRAME_W
    fh = (w.frameGeometry().height() - w.geometry().height()) or FRAME_H
    max_w, max_h = max(200, avail.width() - fw), max(150, avail.height() - fh)
    lay = w.layout()
    if lay is not None:
        hint = lay.minimumSize()
        if hint.width() > max_w or hint.height() > max_h:
            from PySide6.QtWidgets import QLayout

            # the layout would otherwise force its minimum back onto the window
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
    if w.minimumWidth() > max_w or w.minimumHeight() > max_h:
        w.setMinimumSize(min(w.minimumWidth(), max_w), min(w.minimumHeight(), max_h))
    size = w.size()
    if not w.testAttribute(Qt.WidgetAttribute.WA_Resized):  # never resized: it will open at its hint
        size = w.sizeHint().expandedTo(w.minimumSize())
    if size.width() > max_w or size.height() > max_h:
        w.resize(min(size.width(), max_w), min(size.height(), max_h))
    g = w.geometry()
    x = min(max(g.x(), avail.x() + fw // 2), avail.x() + avail.width() - g.width() - fw // 2)
    y = min(max(g.y(), avail.y() + fh - fw // 2), avail.y() + avail.height() - g.height() - fw // 2)
    if w.isVisible() and (x, y) != (g.x(), g.y()):
        w.move(x, y)


def fits(w: QWidget, avail: QRect | None = None) -> bool:
    """Whether ``w``'s frame (title bar included) lies inside ``avail`` (default: its screen's)."""
    avail = avail or _avail(w)
    fr = w.frameGeometry()
    fh = fr.height() - w.geometry().height() or FRAME_H
    fw = fr.width() - w.geometry().width() or FRAME_W
    return w.width() + fw <= avail.width() and w.height() + fh <= avail.height()


class _ScreenFit(QObject):
    def eventFilter(self, obj, ev):  # noqa: N802 - Qt override
        # the main window fits itself (MainWindow.fit_to / clamp_to, remembered geometry); menus and
        # tooltips are popups Qt places itself
        if (
            ev.type() == QEvent.Type.Show
            and isinstance(obj, QWidget)
            and obj.isWindow()
            and not isinstance(obj, QMainWindow)
            and obj.windowType() not in (Qt.WindowType.Popup, Qt.WindowType.ToolTip)
        ):
            try:
                fit_dialog(obj)
            except RuntimeError:  # a widget being deleted
                pass
        return False


_FILTER: _ScreenFit | None = None


def install_screen_fit(app=None) -> None:
    """Install the filter once on the application (idempotent)."""
    global _FILTER
    app = app or QApplication.instance()
    if app is None or _FILTER is not None:
        return
    _FILTER = _ScreenFit(app)
    app.installEventFilter(_FILTER)
