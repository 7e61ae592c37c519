"""Finding kinds (DESIGN §5): each kind is ONE object, :class:`FindingKind`, that carries everything the
rest of the program says about it: its default severity and severity rule, its words ("duplicate
effect"), its short badge label ("dup effect"), its filter phrase ("with a duplicate effect"), its
colour/glyph hint, what it needs from a layout, and its definition.

Every table that used to list the kinds is derived from the registered kinds (:data:`DEFAULT_SEVERITY`,
:data:`LEDGER_KINDS`, :data:`KIND_WORDS`, :data:`KIND_SHORT`, :data:`KIND_PHRASES`): a kind added at run
time appears in all of them, and a kind object is never missing from one (no ``KeyError`` in a view).

``FindingKind`` behaves like the closed ``str`` enum it replaces: ``FindingKind.DUPLICATE_EFFECT``,
``FindingKind("duplicate_effect")`` (``ValueError`` for an unknown value), ``list(FindingKind)`` (report
order), ``len(FindingKind)``, ``kind.value``, ``kind.name``; a kind equals and hashes as its value.
The built-in kinds are declared below (layouts and ledgers refer to them at import time); a new kind is
made with :meth:`FindingKind.define` in its own module and registered, with its rule, by
``idemview.findings.registry.register`` (see ARCHITECTURE.md, "Adding a finding kind").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, ClassVar, TypeVar

from idemview.domain.severity import Severity

_VALUE = re.compile(r"[a-z][a-z0-9_]*\Z")

#: value -> kind, in report order (registration order).
_TABLE: dict[str, FindingKind] = {}

#: The attributes a kind is made of (what :meth:`FindingKind.define` takes, what a pickle carries).
_SPEC = (
    "severity",
    "words",
    "short",
    "phrase",
    "glyph",
    "colour",
    "needs",
    "about_ledger",
    "definition",
    "severity_rule",
    "fields",
)


class _KindMeta(type):
    """Makes the class iterate, count and answer ``in`` over the registered kinds, like an ``Enum``."""

    def __iter__(cls) -> Iterator[FindingKind]:
        return iter(list(_TABLE.values()))

    def __len__(cls) -> int:
        return len(_TABLE)

    def __contains__(cls, x: object) -> bool:
        return isinstance(x, str) and str.__str__(x) in _TABLE

    def __getattr__(cls, name: str) -> FindingKind:
        # FindingKind.TOY_KIND for a kind registered at run time (the built-ins are class attributes).
        k = _TABLE.get(name.lower()) if name.isupper() else None
        if k is None:
            raise AttributeError(name)
        return k


class FindingKind(str, metaclass=_KindMeta):
    """One finding kind: a ``str`` (its value, e.g. ``"duplicate_effect"``) carrying its description.

    Attributes (read-only by convention): ``severity`` (:class:`Severity`, the default; a rule may raise
    it per finding), ``words`` (plain words, "duplicate effect"), ``short`` (a badge label), ``phrase``
    (how a filter sentence names operations with it, "with a duplicate effect"), ``glyph`` and
    ``colour`` (display hints; ``None``: the severity's glyph / colour pair ``(light, dark)``),
    ``needs`` (layout sections it needs, e.g. ``("effects",)``), ``about_ledger`` (a finding about the
    ledger itself: no scope or key, a column), ``definition``, ``severity_rule`` and ``fields`` (DESIGN
    §5's words: when it holds, how its severity is set, the normalized fields it reads).

    ``FindingKind(value)`` returns the registered kind with that value (or ``value`` itself when it is a
    kind object already); ``ValueError`` when none is registered."""

    severity: Severity
    words: str
    short: str
    phrase: str
    glyph: str | None
    colour: tuple[str, str] | None
    needs: tuple[str, ...]
    about_ledger: bool
    definition: str | None
    severity_rule: str | None
    fields: tuple[str, ...]

    DUPLICATE_EFFECT: ClassVar[FindingKind]
    REPLAY_AFTER_EXPIRY: ClassVar[FindingKind]
    KEY_CONFLICT: ClassVar[FindingKind]
    DUPLICATE_INTENT: ClassVar[FindingKind]
    STUCK_IN_PROGRESS: ClassVar[FindingKind]
    UNRESOLVED_FAILURE: ClassVar[FindingKind]
    RETRY_STORM: ClassVar[FindingKind]
    EXPIRED_KEY: ClassVar[FindingKind]
    HIDDEN_SUCCESS: ClassVar[FindingKind]
    ORPHAN_EFFECT: ClassVar[FindingKind]
    SECRET_AT_REST: ClassVar[FindingKind]

    def __new__(cls, value: object) -> FindingKind:
        if isinstance(value, FindingKind):
            return value
        k = _TABLE.get(value) if isinstance(value, str) else None
        if k is None:
            raise ValueError(f"{value!r} is not a valid FindingKind")
        return k

    @classmethod
    def define(
        cls,
        value: str,
        *,
        severity: Severity,
        words: str | None = None,
        short: str | None = None,
        phrase: str | None = None,
        glyph: str | None = None,
        colour: tuple[str, str] | None = None,
        needs: tuple[str, ...] = (),
        about_ledger: bool = False,
        definition: str | None = None,
        severity_rule: str | None = None,
        fields: tuple[str, ...] = (),
    ) -> FindingKind:
        """A new kind object (not registered yet: ``idemview.findings.registry.register`` does that with
        its rule). ``value``: lower-case identifier (``[a-z][a-z0-9_]*``), the JSON and CLI name.
        ``words`` defaults to the value with spaces, ``short`` to ``words``, ``phrase`` to "with a/an
        WORDS". Raises ``ValueError`` for a malformed value."""
        if not isinstance(value, str) or not _VALUE.match(value):
            raise ValueError(f"a finding kind is a lower-case identifier, not {value!r}")
        k = str.__new__(cls, value)
        w = words or value.replace("_", " ")
        spec: dict[str, Any] = {
            "severity": Severity(severity),
            "words": w,
            "short": short or w,
            "phrase": phrase or ("with an " if w[:1] in "aeiou" else "with a ") + w,
            "glyph": glyph,
            "colour": tuple(colour) if colour else None,
            "needs": tuple(needs),
            "about_ledger": bool(about_ledger),
            "definition": definition,
            "severity_rule": severity_rule or Severity(severity).value,
            "fields": tuple(fields),
        }
        k.__dict__.update(spec)
        return k

    @property
    def value(self) -> str:
        """The kind's name in JSON, on the command line and in a saved filter (``"duplicate_effect"``)."""
        return str.__str__(self)

    @property
    def name(self) -> str:
        """The enum-style name (``"DUPLICATE_EFFECT"``)."""
        return self.value.upper()

    def __str__(self) -> str:  # as the str enum printed its members
        return f"FindingKind.{self.name}"

    def __format__(self, spec: str) -> str:  # f"{kind}" is its value, as the str enum's was
        return format(self.value, spec)

    def __repr__(self) -> str:
        return f"<FindingKind.{self.name}: {self.value!r}>"

    def __reduce__(self) -> tuple[Callable[..., FindingKind], tuple[str, dict[str, Any]]]:
        # Pickled as value + description: the registered kind when the other process has it, else a copy.
        return _revive, (self.value, {a: getattr(self, a) for a in _SPEC})


def _revive(value: str, spec: dict[str, Any]) -> FindingKind:
    k = _TABLE.get(value)
    return k if k is not None else FindingKind.define(value, **spec)


def add(kind: FindingKind) -> FindingKind:
    """Register ``kind`` (after the kinds already there, which is its report order) and return it; a
    no-op for the same object. Raises ``ValueError`` when another kind with its value is registered.
    Called by ``idemview.findings.registry.register``, which registers the kind's rule too."""
    if not isinstance(kind, FindingKind):
        raise TypeError(f"not a FindingKind: {kind!r}")
    old = _TABLE.get(kind.value)
    if old is not None and old is not kind:
        raise ValueError(f"a finding kind {kind.value!r} is registered already")
    _TABLE[kind.value] = kind
    return kind


def remove(kind: str) -> None:
    """Forget the kind with value ``kind`` (a kind added at run time, e.g. by a test). Built-in kinds
    cannot be removed (``ValueError``); an unknown value is ignored."""
    if kind in _BUILTIN:
        raise ValueError(f"{kind!r} is a built-in finding kind")
    _TABLE.pop(str.__str__(kind) if isinstance(kind, str) else kind, None)


T = TypeVar("T")


class _KindMap(Mapping[FindingKind, T]):
    """A read-only ``{kind: attribute}`` view over the registered kinds (always up to date). A kind
    object is found even when it is not registered (its description travels with it)."""

    def __init__(self, get: Callable[[FindingKind], T], doc: str):
        self._get = get
        self.__doc__ = doc

    def __getitem__(self, k: object) -> T:
        try:
            kind = FindingKind(k)
        except ValueError:
            raise KeyError(k) from None
        return self._get(kind)

    def __iter__(self) -> Iterator[FindingKind]:
        return iter(FindingKind)

    def __len__(self) -> int:
        return len(FindingKind)

    def __repr__(self) -> str:
        return repr(dict(self))


class _KindSet(AbstractSet[FindingKind]):
    """A read-only set view: the registered kinds for which ``test(kind)`` holds."""

    def __init__(self, test: Callable[[FindingKind], bool]):
        self._test = test

    def __contains__(self, k: object) -> bool:
        try:
            return self._test(FindingKind(k))
        except ValueError:
            return False

    def __iter__(self) -> Iterator[FindingKind]:
        return (k for k in FindingKind if self._test(k))

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: Default severity of each kind (``replay_after_expiry`` becomes critical when the replay succeeded).
DEFAULT_SEVERITY: Mapping[FindingKind, Severity] = _KindMap(lambda k: k.severity, "default severity per kind")
#: Kinds about the ledger itself (what it stores), not about one operation: no scope or key, a ``column``.
LEDGER_KINDS: AbstractSet[FindingKind] = _KindSet(lambda k: k.about_ledger)
#: A kind in plain words ("duplicate effect"), as views and reports name it.
KIND_WORDS: Mapping[FindingKind, str] = _KindMap(lambda k: k.words, "words per kind")
#: A kind's short badge label in the grid ("dup effect"; the full words are in the tooltip).
KIND_SHORT: Mapping[FindingKind, str] = _KindMap(lambda k: k.short, "short label per kind")
#: How a filter sentence names the operations with a kind ("with a duplicate effect").
KIND_PHRASES: Mapping[FindingKind, str] = _KindMap(lambda k: k.phrase, "filter phrase per kind")


def _builtin(value: str, **spec: Any) -> FindingKind:
    k = add(FindingKind.define(value, **spec))
    setattr(FindingKind, k.name, k)
    return k


# ---- the built-in kinds, in report order (DESIGN §5; the definitions are its words) -------------------

_builtin(
    "duplicate_effect",
    severity=Severity.CRITICAL,
    words="duplicate effect",
    short="dup effect",
    phrase="with a duplicate effect",
    definition=(
        "one (scope, key) has ≥2 attempts with outcome succeeded, or ≥2 distinct non-empty effect references,"
        " or ≥2 operation records of which ≥2 are completed; with an [effects] section also ≥2 effect records"
        " for one operation"
    ),
    severity_rule=(
        "critical; with an action class: critical for money, access, approval and inventory, high for "
        "notification, record and downstream, low for read (DESIGN §5.1)"
    ),
    fields=("scope", "idempotency key", "attempt outcome", "effect reference", "status", "effect records"),
)
_builtin(
    "replay_after_expiry",
    severity=Severity.HIGH,
    words="replay after expiry",
    short="replay",
    phrase="replayed after expiry",
    definition="an attempt, or a new record for the same (scope, key), started after the key had expired",
    severity_rule=(
        "high (critical if the replay succeeded); with an action class: critical for money, access, approval "
        "and inventory, high for notification, record and downstream, low for read (DESIGN §5.1)"
    ),
    fields=("expires_at (or created_at + retention)", "attempt started_at", "attempt outcome"),
)
_builtin(
    "key_conflict",
    severity=Severity.HIGH,
    words="key conflict",
    short="conflict",
    phrase="with a key conflict",
    definition="one (scope, key) carries ≥2 distinct non-empty fingerprints (the same key reused for another request)",
    severity_rule="high",
    fields=("scope", "idempotency key", "fingerprint"),
)
_builtin(
    "duplicate_intent",
    severity=Severity.HIGH,
    words="duplicate intent",
    short="dup intent",
    phrase="with a duplicate intent",
    definition=(
        "one intent reference under ≥2 distinct keys in the same scope, ≥2 of them completed, created within "
        "one dedup window of each other: a fresh key was minted for a retry"
    ),
    severity_rule=(
        "high; with an action class: critical for money, access, approval and inventory, high for "
        "notification, record and downstream, low for read (DESIGN §5.1)"
    ),
    fields=("intent reference", "scope", "status", "created_at", "dedup window"),
)
_builtin(
    "stuck_in_progress",
    severity=Severity.MEDIUM,
    words="stuck in progress",
    short="stuck",
    phrase="stuck in progress",
    definition="status in_progress and its lock expired (lock_expires_at ≤ now, or locked_at + lock timeout ≤ now)",
    severity_rule="medium",
    fields=("status", "lock_expires_at or locked_at + lock timeout"),
)
_builtin(
    "unresolved_failure",
    severity=Severity.MEDIUM,
    words="unresolved failure",
    short="unresolved",
    phrase="with an unresolved failure",
    definition="status failed and no later completed record for the same key or intent",
    severity_rule="medium",
    fields=("status", "idempotency key", "intent reference", "created_at"),
)
_builtin(
    "retry_storm",
    severity=Severity.LOW,
    words="retry storm",
    short="storm",
    phrase="in a retry storm",
    definition="attempt count above a threshold (default 5)",
    severity_rule="low",
    fields=("attempt count or attempt rows",),
)
_builtin(
    "expired_key",
    severity=Severity.INFO,
    words="expired key",
    short="expired",
    phrase="with an expired key",
    definition="expires_at ≤ now and the record is still present",
    severity_rule="info",
    fields=("expires_at (or created_at + retention)",),
)
_builtin(
    "hidden_success",
    severity=Severity.CRITICAL,
    words="hidden success",
    short="hidden success",
    phrase="with a hidden success",
    needs=("effects",),
    definition=(
        "the ledger says failed, in_progress (lock expired) or the last attempt timed out, yet an effect "
        "record exists downstream: a timeout hid a success, and a retry would repeat it (needs an [effects] "
        "section)"
    ),
    severity_rule=(
        "critical; with an action class: critical for money, access, approval and inventory, high for "
        "notification, record and downstream, low for read (DESIGN §5.1)"
    ),
    fields=("status", "attempt outcome", "effect records"),
)
_builtin(
    "orphan_effect",
    severity=Severity.MEDIUM,
    words="orphan effect",
    short="orphan",
    phrase="with an orphan effect",
    needs=("effects",),
    definition=(
        "an effect record that no operation in the ledger accounts for (its reference matches no operation, "
        "or none that completed)"
    ),
    severity_rule="medium",
    fields=("effect records", "effect reference", "status"),
)
_builtin(
    "secret_at_rest",
    severity=Severity.HIGH,
    words="secret at rest",
    short="secret",
    phrase="in a ledger storing secrets",
    about_ledger=True,
    definition=(
        "the ledger itself stores a credential, card number or other secret in plain text: one finding per "
        "column (and JSON path), with how many of the rows read carry it and which kinds; never the value"
    ),
    severity_rule="high",
    fields=("every text and payload column",),
)

_BUILTIN = frozenset(_TABLE)
