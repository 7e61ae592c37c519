"""The typed layout draft (idemview/layouts/draft.py): lossless conversions for every preset, a layout
written in code, and validation when it becomes TOML."""

from __future__ import annotations

import tomllib

import pytest

from idemview.findings.engine import FindingEngine
from idemview.layouts.draft import (
    AttemptsDraft,
    ExpiryDraft,
    LayoutDraft,
    OperationsDraft,
    StatusDraft,
    TimeDraft,
    ValueDraft,
    model_from_layout,
)
from idemview.layouts.layout import LayoutError, all_presets, load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.services.demo import write_demo
from tests.conftest import ANCHOR


@pytest.mark.parametrize("preset", [pytest.param(p, id=p.name) for p in all_presets()])
def test_every_preset_round_trips_through_a_draft(preset):
    model = model_from_layout(preset)
    draft = LayoutDraft.from_layout(preset)
    assert draft.to_model() == model
    assert LayoutDraft.from_model(model).to_model() == model
    assert model_from_layout(draft.to_layout()) == model  # TOML text and back: the same mapping


def test_unknown_entries_are_kept():
    model = model_from_layout(load_preset("oban"))
    model["operations"]["future_option"] = {"x": 1}
    model["attempts"]["element"]["extra_key"] = "y"
    model["someday"] = {"a": [1, 2]}
    assert LayoutDraft.from_model(model).to_model() == model


def test_a_layout_written_in_code_scans_like_the_preset(tmp_path):
    times = ("created_at", "updated_at", "completed_at", "locked_at", "lock_expires_at", "expires_at")
    draft = LayoutDraft(
        name="handmade",
        operations=OperationsDraft(
            table="operations",
            row_id="id",
            key=["idempotency_key"],
            scope=["scope"],
            kind=ValueDraft("kind"),
            status=StatusDraft(
                column="status",
                map={"pending": "new", "running": "in_progress", "succeeded": "completed", "failed": "failed"},
            ),
            times={t: TimeDraft(t) for t in times},
            fields={
                "attempt_count": ValueDraft("attempt_count"),
                "fingerprint": ValueDraft("request_hash"),
                "intent_ref": ValueDraft("intent_ref"),
                "effect_ref": ValueDraft("effect_ref"),
            },
        ),
        attempts=AttemptsDraft(
            source="table",
            table="attempts",
            join={"scope": "scope", "idempotency_key": "idempotency_key"},
            number="attempt_no",
            effect_ref="effect_ref",
            fingerprint="request_hash",
            outcome=StatusDraft(
                column="outcome",
                map={
                    "succeeded": "succeeded",
                    "failed": "failed",
                    "timed_out": "timed_out",
                    "rejected": "rejected",
                    "running": "in_progress",
                },
            ),
            started_at=TimeDraft("started_at"),
            finished_at=TimeDraft("finished_at"),
        ),
        expiry=ExpiryDraft(lock_timeout_seconds=300, dedup_window_seconds=86400),
        retry_threshold=5,
    )
    toml = draft.to_toml()
    assert tomllib.loads(toml)["expiry"] == {"lock_timeout_seconds": 300, "dedup_window_seconds": 86400}
    write_demo(tmp_path / "demo.db", operations=100, seed=4)
    eng = open_engine(str(tmp_path / "demo.db"))
    try:
        mine = FindingEngine(Ledger(eng, draft.to_layout()), ANCHOR).run()
        ref = FindingEngine(Ledger(eng, load_preset("idemview")), ANCHOR).run()
    finally:
        eng.dispose()
    assert mine and {(f.kind, f.scope, f.key) for f in mine} == {(f.kind, f.scope, f.key) for f in ref}


def test_an_incomplete_draft_is_refused_with_the_reason():
    draft = LayoutDraft(name="wip", operations=OperationsDraft(table="jobs"))
    with pytest.raises(LayoutError, match="key"):
        draft.to_toml()
