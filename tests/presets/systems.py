"""Per-system fixtures for the semantics tests: the systems' own table definitions (written from their
schemas in the planted-incident test modules) and a loader that writes one record per raw state value.

Each loader takes ``(writable engine, [raw values])`` and returns ``(layout, {operation key: raw})``:
the layout as idemview would pick it for that engine, and which operation carries which raw value.
"""

from __future__ import annotations

import importlib
from datetime import timedelta

from sqlalchemy import MetaData, text

from idemview.layouts.layout import load_preset
from tests.conftest import ANCHOR
from tests.ledgers import load


def _mod(*names):
    """The first importable of ``names`` (the planted-incident modules moved into tests/presets/)."""
    for n in names:
        try:
            return importlib.import_module(n)
        except ImportError:
            continue
    raise ImportError(names[0])


QUEUES = lambda: _mod("tests.presets.test_planted_job_queues", "tests.test_presets_batch_a")  # noqa: E731
FLOWS = lambda: _mod("tests.presets.test_planted_workflows_webhooks", "tests.test_presets_batch_b")  # noqa: E731
CORE = lambda: _mod("tests.presets.test_planted_stripe_powertools_celery", "tests.test_presets_core")  # noqa: E731

NOW = ANCHOR
M = timedelta(minutes=1)
ALL = ("sqlite", "postgresql", "mysql")


def _celery(w, values):
    c = CORE()
    load(
        w,
        c.celery_md(),
        {"celery_taskmeta": [c.cel_row(i + 1, f"t-{i}", v, NOW - i * M) for i, v in enumerate(values)]},
    )
    return load_preset("celery"), {f"t-{i}": v for i, v in enumerate(values)}


def _dcr(w, values):
    a = QUEUES()
    load(
        w,
        a.dcr_md(),
        {
            "django_celery_results_taskresult": [
                a.dcr_row(i + 1, f"t-{i}", v, NOW - i * M, NOW - i * M) for i, v in enumerate(values)
            ]
        },
    )
    return load_preset("django-celery-results"), {f"t-{i}": v for i, v in enumerate(values)}


def _airflow(w, values):
    a = QUEUES()
    rows = []
    for i, v in enumerate(values):
        r = a.af_row("billing", f"task_{i}", v, 1, start=NOW - i * M)
        rows.append(r)
    load(w, a.airflow_md(), {"task_instance": rows, "task_instance_history": []})
    return load_preset("airflow"), {a.af_key("billing", f"task_{i}"): v for i, v in enumerate(values)}


def _oban(w, values):
    a = QUEUES()
    load(
        w,
        a.oban_md(),
        {"oban_jobs": [a.oban_row(i + 1, "MyApp.Workers.Charge", v, NOW - i * M) for i, v in enumerate(values)]},
    )
    return load_preset("oban"), {str(i + 1): v for i, v in enumerate(values)}


def _river(w, values):
    a = QUEUES()
    load(w, a.river_md(), {"river_job": [a.river_row(i + 1, "charge", v, NOW - i * M) for i, v in enumerate(values)]})
    return load_preset("river"), {str(i + 1): v for i, v in enumerate(values)}


def _hangfire(lower):
    def loader(w, values):
        a = QUEUES()
        schema = None
        if w.dialect.name == "postgresql":
            schema = "hangfire" if lower else "HangFire"
            with w.begin() as c:
                c.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                c.execute(text(f'CREATE SCHEMA "{schema}"'))
        a.hf_load(w, [(i + 1, [(v, None, 0)], NOW - i * M) for i, v in enumerate(values)], schema, lower)
        return load_preset("hangfire-postgresql" if lower else "hangfire"), {
            str(i + 1): v for i, v in enumerate(values)
        }

    return loader


def _pgboss(w, values):
    b = FLOWS()
    b.boss_load(w, [b.boss_row(i + 1, "charge-card", v, NOW - i * M) for i, v in enumerate(values)])
    return load_preset("pg-boss"), {f"#0b8e4c9a-9a3e-4000-8000-{i + 1:012d}": v for i, v in enumerate(values)}


def _procrastinate(w, values):
    b = FLOWS()
    p = b.Proc()
    for i, v in enumerate(values):
        p.job(i + 1, "shop.tasks.charge", v, NOW - i * M, [])
    p.load(w)
    return load_preset("procrastinate"), {str(i + 1): v for i, v in enumerate(values)}


def _dbos(w, values):
    """The DBOS system database: schema ``dbos`` on PostgreSQL, none on SQLite. The preset (schema
    ``dbos``) is returned as it ships: on SQLite its tables are found without a schema."""
    b = FLOWS()
    schema = "dbos" if w.dialect.name == "postgresql" else None
    if schema:
        with w.begin() as c:
            c.execute(text("CREATE SCHEMA IF NOT EXISTS dbos"))
    load(w, b.dbos_md(schema), {"workflow_status": [b.wf(f"wf-{i}", v, NOW - i * M) for i, v in enumerate(values)]})
    return load_preset("dbos"), {f"wf-{i}": v for i, v in enumerate(values)}


def _convoy(w, values):
    b = FLOWS()
    c = b.Convoy()
    for i, v in enumerate(values):
        c.delivery(f"d-{i}", "ep-1", v, NOW - i * M, [], key=f"k-{i}")
    c.load(w)
    return load_preset("convoy"), {f"k-{i}": v for i, v in enumerate(values)}


def _powertools(w, values):
    c = CORE()
    load(w, c.powertools_md(), {"idempotency": [c.pt_row(f"h{i}", v, NOW + M) for i, v in enumerate(values)]})
    return load_preset("powertools-sql"), {f"checkout-fn.handler#h{i}": v for i, v in enumerate(values)}


def _idemview(w, values):
    from idemview.services.demo import reference_metadata

    md: MetaData = reference_metadata()
    rows = [
        {
            "id": i + 1,
            "scope": "shop",
            "idempotency_key": f"k-{i}",
            "kind": "charge",
            "status": v,
            "created_at": (NOW - i * M).replace(tzinfo=None),
            "attempt_count": 1,
        }
        for i, v in enumerate(values)
    ]
    load(w, md, {"operations": rows})
    return load_preset("idemview"), {f"k-{i}": v for i, v in enumerate(values)}


#: preset -> (loader, engines the system runs on, can its state column hold a value outside the list?)
SYSTEMS = {
    "airflow": (_airflow, ALL, True),
    "celery": (_celery, ALL, True),
    "convoy": (_convoy, ("postgresql",), True),
    "dbos": (_dbos, ("sqlite", "postgresql"), True),
    "django-celery-results": (_dcr, ALL, True),
    "hangfire": (_hangfire(False), ALL, True),
    "hangfire-postgresql": (_hangfire(True), ("postgresql",), True),
    "idemview": (_idemview, ALL, True),
    # an enum column (PostgreSQL oban_job_state, river_job_state, job_state, procrastinate_job_status;
    # Oban's MySQL ENUM) cannot hold a value outside the system's list: only SQLite's text can
    "oban": (_oban, ALL, ("sqlite",)),
    "pg-boss": (_pgboss, ("postgresql",), False),
    "powertools-sql": (_powertools, ALL, True),
    "procrastinate": (_procrastinate, ("postgresql",), False),
    "river": (_river, ("sqlite", "postgresql"), ("sqlite",)),
}


def holds_other_values(preset: str, engine: str) -> bool:
    flag = SYSTEMS[preset][2]
    return flag is True or (isinstance(flag, tuple) and engine in flag)


def fitted(layout, engine):
    """``layout`` with its tables looked up where this database keeps them, as the CLI and the GUI do
    (a preset's schema is a default: DBOS on SQLite has none)."""
    from idemview.ledger.detect import locate

    return locate(engine, layout)


#: schemas the fixtures create on PostgreSQL (the systems' own, and one "elsewhere")
SYSTEM_SCHEMAS = ("pgboss", "convoy", "dbos", "HangFire", "hangfire", "graphile_worker", "elsewhere")


def drop_system_schemas(request) -> None:
    """Drop the systems' schemas on the test's PostgreSQL database, so that neither a leftover table nor
    its enum type reaches another test (detection looks at every schema)."""
    if "db" not in request.fixturenames:
        return
    writable, url = request.getfixturevalue("db")
    if writable.dialect.name != "postgresql":
        return
    with writable.begin() as c:
        for s in SYSTEM_SCHEMAS:
            c.execute(text(f'DROP SCHEMA IF EXISTS "{s}" CASCADE'))


__all__ = ["SYSTEMS", "holds_other_values", "fitted", "drop_system_schemas"]
