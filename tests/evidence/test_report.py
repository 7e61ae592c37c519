"""The incident report (issue 24, DESIGN §5.4): structure, masking, HTML escaping, manifest
verification and tampering, truncation at N operations, the CLI, and every engine under every name.
Runs with Qt blocked (the report is core code)."""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser

import pytest

import idemview
from idemview.cli import main
from idemview.domain.filters import Filter
from idemview.domain.model import FindingKind
from idemview.errors import EvidenceMismatch
from idemview.evidence.report import CSP, write_report
from idemview.layouts.layout import load_preset
from idemview.ledger.connect import open_engine
from idemview.ledger.reader import Ledger
from idemview.masking.masker import Masker
from tests.conftest import ANCHOR
from tests.evidence.report_fixtures import LOOKALIKE, SCRIPT_KEY, leaked, secrets_ledger

NOW = "2026-11-30T12:00:00Z"


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text, of a page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(path) -> Tags:
    t = Tags()
    t.feed(open(path, encoding="utf-8").read())
    return t


@pytest.fixture
def ledger_file(tmp_path):
    p = tmp_path / "secrets.db"
    refs = secrets_ledger(p, operations=6)
    return p, refs


def report(path, out, **kw):
    eng = open_engine(str(path))
    try:
        return write_report(Ledger(eng, load_preset("idemview")), kw.pop("flt", None), out, now=ANCHOR, **kw)
    finally:
        eng.dispose()


def test_structure_self_contained_and_printable(ledger_file, tmp_path):
    db, refs = ledger_file
    res = report(db, tmp_path / "r.html")
    page = parse(res.path)
    tags = [t for t, _a in page.tags]
    # no script, nothing fetched or linked: no src/href/url() anywhere, the CSP the issue names
    assert "script" not in tags and "link" not in tags and "img" not in tags and "iframe" not in tags
    assert not [a for _t, a in page.tags if {"src", "href", "xlink:href", "srcset", "action"} & set(a)]
    raw = open(res.path, encoding="utf-8").read()
    assert "url(" not in raw and "@import" not in raw
    csp = [a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp == [CSP] == ["default-src 'none'; style-src 'unsafe-inline'; img-src data:"]
    # print stylesheet: a page break before each operation
    assert "@media print" in raw and re.search(r"section\.op[^{]*\{[^}]*break-before:page", raw)
    # one section per operation with findings: 6 unresolved failures and 1 duplicate effect
    sections = [a for t, a in page.tags if t == "section" and a.get("class") == "op"]
    assert len(sections) == res.operations == res.in_full == len(refs)
    # a timeline picture per operation plus the overview
    assert tags.count("svg") == len(refs) + 1
    text = "".join(page.text)
    assert Filter().sentence() in text and "2026-11-30 12:00:00 UTC" in text
    assert "unresolved failure" in text and "duplicate effect" in text
    assert res.findings == json.loads(open(res.manifest_path).read())["report"]["findings"]


def test_no_planted_secret_and_markup_is_text(ledger_file, tmp_path):
    db, _refs = ledger_file
    res = report(db, tmp_path / "r.html", masker=Masker(key=b"fixed-key-for-a-deterministic-test"))
    blob = open(res.path, encoding="utf-8").read() + open(res.manifest_path, encoding="utf-8").read()
    assert leaked(blob) == []
    assert LOOKALIKE in blob  # not a secret: kept readable
    assert "[bearer#" in blob and "[password#" in blob  # masked where they were, as tags
    raw = open(res.path, encoding="utf-8").read()
    assert SCRIPT_KEY not in raw and not re.search(r"<\s*script", raw, re.I)
    assert "&lt;script&gt;alert(&quot;k&quot;)&lt;/script&gt;&amp;&lt;marquee&gt;bold&lt;/marquee&gt;" in raw
    # the parsed page shows the key as text: no <marquee> element came from it
    page = parse(res.path)
    assert SCRIPT_KEY in "".join(page.text)
    assert "marquee" not in [t for t, _a in page.tags]


@pytest.mark.parametrize(
    "key",
    ['"><img src=x onerror=alert(1)>', "</style><svg onload=alert(1)>", "]]><!-- -->\u202e&#x3c;"],
)
def test_other_hostile_keys_stay_text(tmp_path, key):
    db = tmp_path / "h.db"
    secrets_ledger(db, operations=2, hostile_key=key)
    res = report(db, tmp_path / "r.html")
    page = parse(res.path)
    assert key in "".join(page.text)
    assert not [a for _t, a in page.tags if any(k.startswith("on") for k in a)]
    assert not [t for t, _a in page.tags if t in ("img", "script")]
    assert [t for t, _a in page.tags].count("style") == 1


def test_manifest_verifies_and_a_changed_byte_does_not(ledger_file, tmp_path):
    db, _refs = ledger_file
    res = report(db, tmp_path / "r.html")
    data = open(res.path, "rb").read()
    m = idemview.read_report(res.path)
    assert m["html"]["sha256"] == hashlib.sha256(data).hexdigest() == res.sha256
    assert m["html"]["bytes"] == len(data) and m["now"] == NOW
    assert m["ledger"]["dialect"] == "sqlite" and "user" not in m["ledger"] and "password" not in m["ledger"]
    assert m["report"]["operations"] == res.operations and m["report"]["counts"]["unresolved_failure"] == 6
    i = data.index(b"unresolved failure")
    (tmp_path / "r.html").write_bytes(data[:i] + b"U" + data[i + 1 :])  # one byte, same size
    with pytest.raises(EvidenceMismatch, match="SHA-256"):
        idemview.read_report(res.path)
    (tmp_path / "r.html").write_bytes(data)
    assert idemview.read_report(res.path)["html"]["sha256"] == res.sha256
    with pytest.raises(EvidenceMismatch):  # a report is not an evidence CSV
        idemview.read_evidence(res.path)


def test_more_than_n_operations_are_a_table_said_on_the_first_page(ledger_file, tmp_path):
    db, refs = ledger_file
    res = report(db, tmp_path / "r.html", full=2)
    assert (res.operations, res.in_full) == (len(refs), 2)
    page = parse(res.path)
    assert len([a for t, a in page.tags if t == "section" and a.get("class") == "op"]) == 2
    assert len([a for t, a in page.tags if t == "section" and a.get("class") == "rest"]) == 1
    raw = open(res.path, encoding="utf-8").read()
    head = raw[: raw.index("</header>")]
    assert "The first 2 are shown in full" in head and f"the other {len(refs) - 2} are listed" in head
    rest = raw[raw.index('<section class="rest">') :]
    m = idemview.read_report(res.path)
    # every operation beyond the first two is a row of the closing table, none of the first two is; the
    # ledger audit's findings (about columns, not operations) are in its own table, not among them
    audit = int(m["report"]["counts"].get("secret_at_rest", 0))
    assert audit > 0 and head.count("<h2>Ledger audit</h2>") == 0 and raw.count("<h2>Ledger audit</h2>") == 1
    assert rest.count("<tr><td class=n>") == res.findings - audit - sum(
        1 for _ in re.finditer(r'<div class="finding"', raw[: raw.index('<section class="rest">')])
    )
    assert m["report"]["in_full"] == 2 and m["report"]["as_table"] == len(refs) - 2


def test_filter_narrows_and_is_the_sentence(ledger_file, tmp_path):
    db, refs = ledger_file
    flt = Filter(findings=[FindingKind.DUPLICATE_EFFECT])
    res = report(db, tmp_path / "r.html", flt=flt)
    assert (res.operations, res.findings) == (1, 1)
    raw = open(res.path, encoding="utf-8").read()
    assert flt.sentence() in raw and "dup-" in raw and "pay-" not in raw


def test_cli_report(ledger_file, tmp_path, capsys):
    db, refs = ledger_file
    out = tmp_path / "c.html"
    assert main(["report", str(db), "--now", NOW, "--out", str(out), "--full", "3"]) == 0
    line = capsys.readouterr().out
    assert f"on {len(refs)} operations (3 in full, {len(refs) - 3} more as a table)" in line
    assert idemview.read_report(out)["report"]["full_limit"] == 3
    assert main(["report", str(db), "--now", NOW, "--out", str(out)]) == 2  # exists, no --force
    assert "--force" in capsys.readouterr().err
    assert main(["report", str(db), "--now", NOW, "--out", str(out), "--finding", "nope"]) == 2
    assert "unknown finding kind 'nope'" in capsys.readouterr().err
    assert main(["report", str(db), "--out", str(db)]) == 2  # the ledger itself
    assert not list(tmp_path.glob(".*.part"))


def test_every_engine_under_every_name(dialect_db, tmp_path):
    eng, url = dialect_db
    refs = secrets_ledger(eng, operations=3)
    out = tmp_path / "e.html"
    assert main(["report", url, "--layout", "idemview", "--now", NOW, "--out", str(out)]) == 0
    m = idemview.read_report(out)
    raw = out.read_text(encoding="utf-8")
    assert m["report"]["operations"] == len(refs)
    assert leaked(raw + json.dumps(m)) == []
    # the ledger line names dialect, host and database, never the user (or a password)
    user = eng.url.username
    ledger_line = re.search(r"<dt>Ledger</dt><dd>(.*?)</dd>", raw).group(1)
    assert eng.url.get_backend_name() in ledger_line or "sqlite" in ledger_line
    if user:
        assert f"user {user}" not in ledger_line and "username" not in ledger_line
        assert "user" not in m["ledger"] and "password" not in m["ledger"]


def test_the_closing_table_is_bounded_and_says_so(ledger_file, tmp_path, monkeypatch):
    from idemview.evidence import report as rep

    db, refs = ledger_file
    monkeypatch.setattr(rep, "TABLE_ROWS", 2)
    res = report(db, tmp_path / "r.html", full=1)
    raw = open(res.path, encoding="utf-8").read()
    rest = raw[raw.index('<section class="rest">') :]
    assert rest.count("<tr><td class=n>") == 2
    head = raw[: raw.index("</header>")]
    in_full = raw[: raw.index('<section class="rest">')].count('<div class="finding"')
    assert f"its first 2 findings; {res.findings - in_full - 2} more are counted, not listed" in head
    assert idemview.read_report(res.path)["report"]["table_rows"] == 2


def test_a_kind_the_layout_cannot_check_is_said_not_reported_clean(ledger_file, tmp_path):
    db, _refs = ledger_file
    res = report(db, tmp_path / "r.html", flt=Filter(findings=[FindingKind.HIDDEN_SUCCESS]))
    raw = open(res.path, encoding="utf-8").read()
    head = raw[: raw.index("</header>")]
    assert res.findings == 0
    assert "Not checkable with this layout: <b>hidden success</b> (the layout has no [effects]" in head
    assert "No findings for this filter among the kinds this layout can check." in head
