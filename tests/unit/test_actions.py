"""Action classes (DESIGN §5.1): the shipped vocabulary on real kind names, user rules over it.

``data/action_names.tsv`` lists kind names in the styles of the presets' systems, with the class a person
reading the name would give under the contract's precedence (approval, access, money, inventory,
notification, record, downstream, read). Name styles read from public code: Oban workers
(timesink-dev/timesink lib/workers/send_email.ex ``Timesink.Workers.SendEmail``; Cannery/Memex
``EmailWorker``), Celery tasks (tntanvir/SmartStay-api payment/tasks.py
``send_payment_success_email_task``; DmytroKaminskiy/currency_exchange src/account/tasks.py
``send_email_async``), Temporal workflow interfaces (antmendoza/temporal_java_workshop
``MoneyTransferWorkflow``; jack08022018/spring-camel-ibmmq ``TransferMoneyWorkflow``), Stripe's REST paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from idemview.domain.actions import ACTIONS, ActionRuleError, ActionRules, Classifier, classify, stems, words

TABLE = Path(__file__).parent / "data" / "action_names.tsv"


def _rows():
    out = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, cls, system = line.split("\t")
            out.append((name, cls, system))
    return out


ROWS = _rows()


def test_table_is_large_and_spans_every_class_and_system():
    assert len(ROWS) >= 200
    assert {c for _n, c, _s in ROWS} == set(ACTIONS)
    systems = {s for _n, _c, s in ROWS}
    for s in ("celery", "oban", "hangfire", "sidekiq", "stripe", "masstransit", "temporal", "nservicebus"):
        assert s in systems


@pytest.mark.parametrize("name,expected,system", ROWS, ids=[r[0] for r in ROWS])
def test_vocabulary_table(name, expected, system):
    assert classify(name) == expected


def test_words_cut_every_naming_style():
    assert words("billing.tasks.refund_order") == ["billing", "tasks", "refund", "order"]
    assert words("ChargeCustomerCommand") == ["charge", "customer", "command"]
    assert words("HTTPRequest-send_SMS:now/x y") == ["http", "request", "send", "sms", "now", "x", "y"]
    assert words("oauth2Token") == ["oauth2", "token"]
    # stems make plurals and tenses one word
    assert stems("charges") == stems("charge") == stems("charged") == stems("charging")
    assert stems("Refunds") == ["refund"]


def test_http_method_decides_reads():
    assert classify("POST /v1/charges") == "money"
    assert classify("GET /v1/charges") == "read"
    assert classify("head /v1/refunds") == "read"
    assert classify("DELETE /v1/things/1") == "record"  # unsafe method, no word: writes something
    # a name that merely starts with a method word is not an endpoint
    assert classify("get_refund_status") == "money"


def test_precedence_earlier_class_wins():
    assert classify("approve-loan-application") == "approval"
    assert classify("send_refund_email") == "money"  # money before notification
    assert classify("grant_refund_role") == "access"  # access before money
    assert classify("render_invoice") == "money"  # money before read


def test_missing_kind_is_unknown():
    c = Classifier()
    assert c.classify(None) == "unknown"
    assert c.classify("") == "unknown"
    assert c.classify("HardWorker") == "unknown"
    assert c.classify(42) == "unknown"
    assert c.classify(["x"]) == "unknown"  # an unhashable JSON value is classified by its text


def test_user_rules_override_vocabulary_first_match_wins():
    rules = ActionRules.from_dict(
        {
            "rules": [
                {"match": r"^EmailSubscriptionApp\.", "action": "notification"},
                {"match": "(?i)report", "action": "money"},
                {"match": "report", "action": "read"},  # never reached: the earlier rule matched
            ],
            "regulated": ["money"],
        }
    )
    c = Classifier(rules)
    # the vocabulary alone says money (the module prefix carries "subscription")
    assert classify("EmailSubscriptionApp.Workers.FeaturesEmailWorker") == "money"
    assert c.classify("EmailSubscriptionApp.Workers.FeaturesEmailWorker") == "notification"
    assert c.classify("reports.tasks.render_monthly_report") == "money"
    assert c.classify("payment.capture") == "money"  # no rule matched: vocabulary
    assert c.classify("email.send") == "notification"
    assert c.is_regulated("money") and c.is_regulated("approval")
    assert not c.is_regulated("notification")
    assert not Classifier().is_regulated("money")


def test_connection_rules_come_before_layout_rules():
    conn = ActionRules.from_dict({"rules": [{"match": "sync", "action": "money"}]})
    lay = ActionRules.from_dict({"rules": [{"match": "sync", "action": "read"}], "regulated": ["record"]})
    both = conn.then(lay)
    assert Classifier(both).classify("crm.tasks.sync_contacts") == "money"
    assert Classifier(lay.then(conn)).classify("crm.tasks.sync_contacts") == "read"
    assert both.regulated == {"record"}
    assert ActionRules.from_dict(both.to_dict()) == both


@pytest.mark.parametrize(
    "bad,word",
    [
        ({"rules": [{"match": "(", "action": "money"}]}, "bad regular expression"),
        ({"rules": [{"match": "x", "action": "cash"}]}, "unknown action class 'cash'"),
        ({"rules": [{"action": "money"}]}, "needs match"),
        ({"regulated": ["secret"]}, "unknown action class 'secret'"),
    ],
)
def test_bad_rules_are_one_line_errors(bad, word):
    with pytest.raises(ActionRuleError) as ei:
        ActionRules.from_dict(bad, "layout x [actions]")
    assert word in str(ei.value) and "layout x [actions]" in str(ei.value)
    assert "\n" not in str(ei.value)


def test_memo_is_per_distinct_kind():
    c = Classifier()
    out = c.classify_many(["payment.capture", "email.send"] * 1000)
    assert out[:2] == ["money", "notification"] and len(out) == 2000
    # two distinct kinds (plus the two empty ones seeded) memoised, not 2000
    assert len(c._memo) == 4


def test_classifying_from_several_threads_at_once():
    """The GUI's workers classify concurrently: the stemmer is shared, so it must be guarded."""
    from concurrent.futures import ThreadPoolExecutor

    names = [n for n, _c, _s in ROWS] * 20
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda n: Classifier().vocab.classify(n), names))
    assert got == [c for _n, c, _s in ROWS] * 20  # every name as the table says, no stemmer crash
