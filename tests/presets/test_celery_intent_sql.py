"""Celery's SQL result backends map an intent (issue #26): the task name + arguments, computed in SQL
(``intent_ref = {hash = [...]}``, idemview.ledger.intent_sql), on every engine.

Planted: a charge re-sent under a new task id (``duplicate_intent``). Clean look-alikes: a periodic
task with no arguments run 5 times (Celery: args ``[]``, kwargs ``{}`` or NULL; django-celery-results:
``"()"`` / ``"{}"``), a beat task WITH arguments (django-celery-results marks it with
``periodic_task_name``), and the same task with other arguments."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from tests.conftest import ANCHOR
from tests.ledgers import load, scan
from tests.presets.test_planted_job_queues import dcr_md, dcr_row
from tests.presets.test_planted_stripe_powertools_celery import cel_row, celery_md

NOW = ANCHOR
M = timedelta(minutes=1)


def _cel(i, task_id, done, args=b"[]", kwargs=b"{}", name="billing.tasks.charge", status="SUCCESS"):
    r = cel_row(i, task_id, status, done)
    r.update(name=name, args=args, kwargs=kwargs)
    return r


def test_celery_charge_resent_under_a_new_task_id_is_a_duplicate_intent(dialect_db):
    """On every dialect name and driver (mysql and mariadb spellings included)."""
    writable, url = dialect_db
    rows = [
        _cel(1, "charge-first", NOW - 30 * M, args=b'["cus_9"]', kwargs=b'{"cents": 1999}'),
        _cel(2, "charge-again", NOW - 20 * M, args=b'["cus_9"]', kwargs=b'{"cents": 1999}'),  # planted
        _cel(3, "charge-other", NOW - 10 * M, args=b'["cus_9"]', kwargs=b'{"cents": 500}'),  # other amount
        _cel(
            4,
            "refund-same-args",
            NOW - 9 * M,
            args=b'["cus_9"]',
            kwargs=b'{"cents": 1999}',
            name="billing.tasks.refund",
        ),
    ]
    # a beat task with no arguments, 5 runs: [] / {}, and NULL / NULL
    rows += [_cel(10 + i, f"cleanup-{i}", NOW - i * M, name="maint.cleanup") for i in range(3)]
    rows += [_cel(20 + i, f"tick-{i}", NOW - i * M, args=None, kwargs=None, name="maint.tick") for i in range(2)]
    load(writable, celery_md(), {"celery_taskmeta": rows})
    got, fs = scan(url, "celery", NOW)
    assert got == {("duplicate_intent", "", "charge-again")}
    f = fs[0]
    assert "charge-first" in f.explanation
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("celery"))
        first, again = led.records("", "charge-first")[0], led.records("", "charge-again")[0]
        assert first.intent_ref and first.intent_ref == again.intent_ref
        assert led.records("", "charge-other")[0].intent_ref != first.intent_ref
        assert led.records("", "cleanup-1")[0].intent_ref is None
        assert led.records("", "tick-1")[0].intent_ref is None
        # the same body hash on every engine: md5 of name, args and kwargs (binary: hex) joined by 0x1F
        body = "billing.tasks.charge\x1f" + b'["cus_9"]'.hex() + "\x1f" + b'{"cents": 1999}'.hex()
        assert first.intent_ref == hashlib.md5(body.encode()).hexdigest()
    finally:
        eng.dispose()


def _dcr(i, task_id, done, args='"()"', kwargs='"{}"', periodic=None, name="shop.tasks.capture_payment"):
    r = dcr_row(i, task_id, "SUCCESS", done - M, done)
    r.update(task_name=name, task_args=args, task_kwargs=kwargs, periodic_task_name=periodic)
    return r


def test_django_celery_results_intent_and_periodic_runs(db):
    writable, url = db
    rows = [
        _dcr(1, "cap-first", NOW - 30 * M, args="\"('ord_7',)\""),
        _dcr(2, "cap-again", NOW - 25 * M, args="\"('ord_7',)\""),  # planted: re-sent under a new id
        _dcr(3, "cap-8", NOW - 20 * M, args="\"('ord_8',)\""),
    ]
    # a periodic task with no arguments run 5 times, and one started by beat WITH arguments
    rows += [_dcr(10 + i, f"beat-{i}", NOW - i * M, name="shop.tasks.cleanup") for i in range(5)]
    rows += [
        _dcr(
            20 + i, f"report-{i}", NOW - i * M, args="\"('daily',)\"", periodic="daily-report", name="shop.tasks.report"
        )
        for i in range(3)
    ]
    load(writable, dcr_md(), {"django_celery_results_taskresult": rows})
    got, _ = scan(url, "django-celery-results", NOW)
    assert got == {("duplicate_intent", "", "cap-again")}


def test_celery_without_extended_columns_maps_no_intent(db):
    writable, url = db
    rows = [cel_row(1, "a", "SUCCESS", NOW - M, extended=False), cel_row(2, "b", "SUCCESS", NOW, extended=False)]
    load(writable, celery_md(extended=False), {"celery_taskmeta": rows})
    eng = open_engine(url)
    try:
        led = Ledger(eng, load_preset("celery"))
        assert "intent_ref" not in led.layout.fields
    finally:
        eng.dispose()
