"""Messages: errors, GUI banners and log records are masked like any other value (DESIGN.md §6):
the process-wide message masker, :func:`mask_message` and the log filter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from idemview.masking.engine import Masker
from idemview.masking.rules import MaskRules
from idemview.masking.visible import visible

_MESSAGE_MASKER: Masker | None = None


class MaskingLogFilter(logging.Filter):
    """A ``logging.Filter`` that masks each record's message (after ``%`` formatting with its args),
    its formatted exception and its stack info, so no handler ever sees a secret.

    Attach it to **handlers** (``handler.addFilter(MaskingLogFilter(masker))``): a filter on a logger
    does not see records propagated from child loggers. Always returns True (never drops a record).
    """

    def __init__(self, masker: Masker | None = None, name: str = "") -> None:
        super().__init__(name)
        self.masker = masker  # None: the process-wide message masker (configured rules), at each record

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_idemview_masked", False):
            return True
        mask = (self.masker if self.masker is not None else message_masker()).mask_message
        try:
            msg = record.getMessage()
        except Exception:  # bad format args: mask what we have rather than drop the record
            msg = f"{record.msg} {record.args!r}"
        record.msg = visible(mask(msg), "\n\t")  # the display sink: no terminal escape reaches a handler
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask(record.exc_text)
        if record.stack_info:
            record.stack_info = mask(record.stack_info)
        record._idemview_masked = True
        return True


_RULES_HOOK: Callable[[], MaskRules] | None = None


def set_rules_source(hook: Callable[[], MaskRules] | None) -> None:
    """Register where the configured rules come from (``idemview.config.masking_rules``, which reads the
    settings file: a layer above this one). The message masker is rebuilt with them on next use."""
    global _RULES_HOOK, _MESSAGE_MASKER
    _RULES_HOOK = hook
    _MESSAGE_MASKER = None


def message_masker() -> Masker:
    """The process-wide Masker for messages (errors, banners, logs); random key, never stored. Its rules
    are the configured ones (:func:`set_rules_source`), so a user's ``[masking]`` patterns reach every
    error, banner and log line too; a settings file that cannot be read leaves the shipped rules here
    (the command that needed them reports the file's error)."""
    global _MESSAGE_MASKER
    rules = None
    if _RULES_HOOK is not None:
        try:
            rules = _RULES_HOOK()
        except ValueError:
            rules = None
    if _MESSAGE_MASKER is None or (rules is not None and _MESSAGE_MASKER.rules is not rules):
        _MESSAGE_MASKER = Masker(rules)
    return _MESSAGE_MASKER


def mask_message(text: Any) -> str:
    """:meth:`Masker.mask_message` with the process-wide :func:`message_masker`: the one function
    every error, banner and log path calls before showing text."""
    return message_masker().mask_message(text if isinstance(text, str) else str(text))


_LOG_INSTALLED = False


def install_log_masking(masker: Masker | None = None) -> None:
    """Mask every log record of this process: a :class:`MaskingLogFilter` on each handler of the root
    logger, and a record factory that masks records as they are made (so handlers added later, and
    records of any logger, are masked too). Idempotent."""
    global _LOG_INSTALLED
    flt = MaskingLogFilter(masker)
    root = logging.getLogger()
    for h in root.handlers:
        if not any(isinstance(f, MaskingLogFilter) for f in h.filters):
            h.addFilter(flt)
    if _LOG_INSTALLED:
        return
    _LOG_INSTALLED = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            flt.filter(record)
        except Exception:  # masking must never lose a log record
            pass
        return record

    logging.setLogRecordFactory(factory)
