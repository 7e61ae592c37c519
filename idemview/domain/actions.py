"""Action classes: what an operation does, from its kind (DESIGN §5.1, docs/actions.md).

"Identify actions where duplication matters": a duplicate read is usually harmless, a duplicate charge is
not. Every operation gets one class of :data:`ACTIONS` from its kind (task path, worker module, message
type, HTTP method + path) by

1. the user's own rules, first match wins: the connection's, then the layout's (``[actions] rules =
   [{match = "REGEX", action = "money"}]``, Python :func:`re.search` on the kind as stored);
2. the shipped vocabulary ``actions.toml`` (data, beside this module): the name is cut into words at
   ``.``, ``_``, ``-``, ``/``, ``:``, spaces and CamelCase humps, each word stemmed with the Snowball
   English stemmer (``charges``/``charging`` → ``charg``), and where words of several classes occur the
   one earliest in the vocabulary's ``order`` wins (approval, access, money, inventory, notification,
   record, downstream, read); an HTTP safe method (RFC 9110 §9.2.1: GET, HEAD, OPTIONS, TRACE) is a read;
3. ``unknown`` otherwise (and for a missing kind).

Classification is memoised per distinct kind (:class:`Classifier`): a ledger has few kinds and many rows,
so classifying a million kind values is a million dictionary look-ups.
"""

from __future__ import annotations

import re
import threading
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import snowballstemmer

#: The action classes, in precedence order (DESIGN §5.1), then ``unknown``.
ACTIONS: tuple[str, ...] = (
    "approval",
    "access",
    "money",
    "inventory",
    "notification",
    "record",
    "downstream",
    "read",
    "unknown",
)

#: Classes that are a professional decision whatever the user says (DESIGN §5.1): idemview says a person
#: decides whether anything is repeated or reversed, and offers nothing on them.
ALWAYS_REGULATED = frozenset({"approval"})

#: The sentence regulated findings carry (explanation, detail, exported evidence).
REGULATED_NOTE = (
    "This is a regulated decision: a person decides whether anything is repeated or reversed; "
    "idempotency authorizes no automatic repeat."
)

#: Plain words for each class, as "N duplicate effects that …" reads them.
ACTION_WORDS: dict[str, str] = {
    "approval": "decided an approval",
    "access": "changed access",
    "money": "moved money",
    "inventory": "changed inventory",
    "notification": "notified someone",
    "record": "wrote a record",
    "downstream": "triggered downstream work",
    "read": "only read",
    "unknown": "did something unknown",
}

# Split points: any run of non-alphanumerics, a lower→Upper hump, the end of an acronym (HTTPRequest →
# HTTP Request), letter↔digit boundaries are kept together (v1, s3, oauth2 stay one word).
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEP = re.compile(r"[^A-Za-z0-9]+")
_HTTP = re.compile(r"^\s*([A-Za-z]+)\s+(/\S*)\s*$")
_STEM = snowballstemmer.stemmer("english")
# A Snowball stemmer keeps its state in the object: the GUI's workers classify from several threads.
_STEM_LOCK = threading.Lock()


def words(name: str) -> list[str]:
    """``name`` cut into lower-case words: ``"billing.tasks.refund_order"`` → ``["billing", "tasks",
    "refund", "order"]``, ``"ChargeCustomerCommand"`` → ``["charge", "customer", "command"]``."""
    out: list[str] = []
    for part in _SEP.split(name):
        if part:
            out.extend(w.lower() for w in _HUMP.split(part) if w)
    return out


def stems(name: str) -> list[str]:
    """:func:`words` of ``name``, each stemmed (Snowball English). Thread-safe."""
    ws = words(name)
    with _STEM_LOCK:
        return _STEM.stemWords(ws)


class ActionRuleError(ValueError):
    """An ``[actions]`` section that cannot be used (bad regex, unknown class); the message names it."""


@dataclass(frozen=True, slots=True)
class ActionRules:
    """A user's ``[actions]`` section (a layout's or a saved connection's).

    ``rules``: ``(regex, class)`` pairs tried in order with :func:`re.search`, first match wins;
    ``regulated``: classes the user marks as regulated decisions (``approval`` always is)."""

    rules: tuple[tuple[str, str], ...] = ()
    regulated: frozenset[str] = frozenset()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: str = "[actions]") -> ActionRules:
        """Parse ``{"rules": [{"match": REGEX, "action": CLASS}, ...], "regulated": [CLASS, ...]}``.
        Raises :class:`ActionRuleError` (one line naming ``where``) for a bad regex or class."""
        if not d:
            return cls()
        if not isinstance(d, Mapping):
            raise ActionRuleError(f"{where} must be a table")
        rules = []
        for i, r in enumerate(d.get("rules") or []):
            if not isinstance(r, Mapping) or "match" not in r or "action" not in r:
                raise ActionRuleError(f'{where} rule {i + 1} needs match = "REGEX" and action = "CLASS"')
            pat, act = str(r["match"]), str(r["action"])
            _check_class(act, f"{where} rule {i + 1}")
            try:
                re.compile(pat)
            except re.error as e:
                raise ActionRuleError(f"{where} rule {i + 1}: bad regular expression {pat!r}: {e}") from None
            rules.append((pat, act))
        reg = d.get("regulated") or []
        if isinstance(reg, str):
            reg = [reg]
        for a in reg:
            _check_class(str(a), f"{where} regulated")
        return cls(tuple(rules), frozenset(str(a) for a in reg))

    def to_dict(self) -> dict[str, Any]:
        """The TOML-able form read by :meth:`from_dict` (empty dict when there is nothing)."""
        out: dict[str, Any] = {}
        if self.rules:
            out["rules"] = [{"match": p, "action": a} for p, a in self.rules]
        if self.regulated:
            out["regulated"] = sorted(self.regulated)
        return out

    @classmethod
    def from_text(cls, text: str, where: str = "action rules") -> ActionRules:
        """The one-line form the connection dialog edits: entries ``CLASS=REGEX`` separated by `` ; ``
        or new lines, and ``regulated=CLASS,CLASS``; e.g. ``money=^billing\\. ; regulated=money``.
        The class comes first because a regex may hold ``=``. Raises :class:`ActionRuleError`."""
        rules, reg = [], []
        for part in re.split(r"\s;\s|\n", text):
            part = part.strip()
            if not part:
                continue
            head, sep, tail = part.partition("=")
            if not sep:
                raise ActionRuleError(f"{where}: {part!r} is not CLASS=REGEX")
            head = head.strip()
            if head == "regulated":
                reg += [a.strip() for a in tail.split(",") if a.strip()]
            else:
                rules.append({"match": tail.strip(), "action": head})
        return cls.from_dict({"rules": rules, "regulated": reg}, where)

    def to_text(self) -> str:
        """The inverse of :meth:`from_text`."""
        parts = [f"{a}={p}" for p, a in self.rules]
        if self.regulated:
            parts.append("regulated=" + ",".join(sorted(self.regulated)))
        return " ; ".join(parts)

    def __bool__(self) -> bool:
        return bool(self.rules or self.regulated)

    def then(self, other: ActionRules | None) -> ActionRules:
        """These rules followed by ``other``'s (first match wins, so these win); regulated classes joined."""
        if not other:
            return self
        return ActionRules(self.rules + other.rules, self.regulated | other.regulated)


def _check_class(a: str, where: str) -> None:
    if a not in ACTIONS:
        raise ActionRuleError(f"{where}: unknown action class {a!r} (one of {', '.join(ACTIONS)})")


@dataclass(frozen=True)
class Vocabulary:
    """The shipped vocabulary (``actions.toml``): stemmed words and phrases per class, the precedence
    order and the HTTP method rules."""

    order: tuple[str, ...]
    words: dict[str, int]  # stem -> rank of its class in order (lowest wins)
    phrases: list[tuple[tuple[str, ...], int]]
    safe_methods: frozenset[str]
    unsafe_methods: frozenset[str]
    unsafe_default: str
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Vocabulary:
        """Build from the parsed TOML. Raises :class:`ActionRuleError` for a class not in :data:`ACTIONS`."""
        order = tuple(d["order"])
        for a in order:
            _check_class(a, "vocabulary order")
        wmap: dict[str, int] = {}
        phrases: list[tuple[tuple[str, ...], int]] = []
        for a, spec in d.get("classes", {}).items():
            _check_class(a, "vocabulary")
            rank = order.index(a)
            for w in list(spec.get("words", [])) + list(spec.get("phrases", [])):
                st = tuple(stems(w))
                if len(st) == 1:
                    if rank < wmap.get(st[0], len(order)):
                        wmap[st[0]] = rank
                elif st:
                    phrases.append((st, rank))
        http = d.get("http", {})
        return cls(
            order,
            wmap,
            phrases,
            frozenset(m.upper() for m in http.get("safe", [])),
            frozenset(m.upper() for m in http.get("unsafe", [])),
            http.get("unsafe_default", "unknown"),
            dict(d),
        )

    def classify(self, name: str) -> str:
        """The class of ``name`` by this vocabulary alone (``unknown`` when no word says)."""
        m = _HTTP.match(name)
        if m and m.group(1).upper() in self.safe_methods:
            return "read"
        unsafe = m is not None and m.group(1).upper() in self.unsafe_methods
        st = stems(m.group(2) if unsafe and m is not None else name)
        best = len(self.order)
        for s in st:
            r = self.words.get(s)
            if r is not None and r < best:
                best = r
        for ph, r in self.phrases:
            if r < best and _contains(st, ph):
                best = r
        if best < len(self.order):
            return self.order[best]
        return self.unsafe_default if unsafe else "unknown"


def _contains(seq: list[str], sub: tuple[str, ...]) -> bool:
    n = len(sub)
    return any(tuple(seq[i : i + n]) == sub for i in range(len(seq) - n + 1))


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    """The shipped vocabulary, read once from ``idemview/domain/actions.toml``."""
    text = resources.files("idemview.domain").joinpath("actions.toml").read_text(encoding="utf-8")
    return Vocabulary.from_dict(tomllib.loads(text))


class Classifier:
    """Classifies kinds with ``rules`` first, then the shipped vocabulary; memoised per distinct kind.

    ``classify(kind)`` returns one of :data:`ACTIONS`; ``None`` and ``""`` are ``unknown``."""

    def __init__(self, rules: ActionRules | None = None, vocab: Vocabulary | None = None):
        self.rules = rules or ActionRules()
        self.vocab = vocab or vocabulary()
        self._compiled = [(re.compile(p), a) for p, a in self.rules.rules]
        self._memo: dict[Any, str] = {None: "unknown", "": "unknown"}

    def classify(self, kind: Any) -> str:
        """The action class of one kind value (memoised)."""
        try:
            return self._memo[kind]
        except KeyError:
            pass
        except TypeError:  # an unhashable value from a JSON path: classify its text
            kind = str(kind)
            return self.classify(kind)
        name = kind if isinstance(kind, str) else str(kind)
        out = None
        for rx, a in self._compiled:
            if rx.search(name):
                out = a
                break
        if out is None:
            out = self.vocab.classify(name)
        self._memo[kind] = out
        return out

    def classify_many(self, kinds: Iterable[Any]) -> list[str]:
        """:meth:`classify` of each value, in order (one dictionary look-up per already-seen kind)."""
        memo, slow = self._memo, self.classify
        out = []
        for k in kinds:
            try:
                out.append(memo[k])
            except (KeyError, TypeError):
                out.append(slow(k))
        return out

    def is_regulated(self, action: str | None) -> bool:
        """``action`` is a regulated decision: ``approval``, or a class the user marked regulated."""
        return action in ALWAYS_REGULATED or action in self.rules.regulated


def classify(kind: Any, rules: ActionRules | None = None) -> str:
    """One kind's class with ``rules`` then the shipped vocabulary (not memoised across calls with rules)."""
    if rules:
        return Classifier(rules).classify(kind)
    return _default().classify(kind)


@lru_cache(maxsize=1)
def _default() -> Classifier:
    return Classifier()
