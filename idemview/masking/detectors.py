"""The value detectors (DESIGN.md §6), one method per shape, as a mixin of :class:`~idemview.masking.engine.Masker`.

Each detector: ``(text, found) -> text``; it replaces what it recognises by a tag and appends the kind
to ``found``. Each documents its source.
"""

from __future__ import annotations

import re
from typing import Any

from idemview.masking.patterns import (
    _AUTH_CONTEXT_RE,
    _AUTH_RE,
    _AWS_GATE_RE,
    _AWS_SECRET_RE,
    _B64_MAX,
    _B64_TOKEN_RE,
    _BYTE_ESC_RE,
    _CLI_MYSQL_RE,
    _CLI_REDIS_RE,
    _CLI_USER_RE,
    _EMAIL_RE,
    _IBAN_RE,
    _JSON_U_RE,
    _JWT_RE,
    _KV_CRED_REST_RE,
    _KV_DIGIT_REST_RE,
    _KV_RE,
    _KV_SKIP_VALUES,
    _LABEL_NUM_RE,
    _MISSING,
    _NANP_RE,
    _NUMBERISH_KINDS,
    _PCT_TOKEN_MAX,
    _PCT_TOKEN_RE,
    _PEM_RE,
    _PG_KEY_DETAIL_RE,
    _PHONE00_RE,
    _PHONE_RE,
    _PHONE_SPLIT_RE,
    _PROVIDER_RE,
    _SSN_RE,
    _URL_PARAM_RE,
    _URL_USERINFO_RE,
    _XML_ELEMENT_RE,
    _has_digit,
    _has_lower,
    _has_upper,
    _iban_case_ok,
)
from idemview.masking.rules import TAG_RE, MaskRules, _at_tag
from idemview.masking.validators import _CARD_RUN_RE, _IBAN_LENGTHS, _looks_random, card_spans, iban_valid


class Detectors:
    """The detectors of a Masker. The attributes and methods below are the Masker's own (declared here
    for the type checker; :class:`~idemview.masking.engine.Masker` sets and defines them)."""

    rules: MaskRules
    _pct_depth: int
    _url_name_cache: dict[str, str | None]

    def _tag(self, kind: str, raw: str, value: Any = None) -> str:
        raise NotImplementedError

    def _mask_text(self, text: str, cnt: dict[str, int]) -> str:
        raise NotImplementedError

    def column_kind(self, column: str | None) -> str | None:
        raise NotImplementedError

    # Each detector: (text, found) -> text. Detectors run in a fixed order so that specific shapes
    # (URLs, JWTs, provider keys, cards) are tagged before the generic name=value rule sees them.

    def _d_patterns(self, text: str, found: list[str]) -> str:
        for p in self.rules.patterns:
            rx = p.compiled
            if rx.search(text) is None:
                continue
            has_group = "secret" in rx.groupindex

            def repl(m: re.Match[str], kind=p.kind, has_group=has_group) -> str:
                if has_group and m.group("secret") is None:
                    return m.group()
                s, e = m.span("secret") if has_group else m.span()
                if s == e or _at_tag(m.string, s):
                    return m.group()
                found.append(kind)
                base = m.start()
                g = m.group()
                return g[: s - base] + self._tag(kind, m.string[s:e]) + g[e - base :]

            text = rx.sub(repl, text)
        return text

    def _d_percent_encoded(self, text: str, found: list[str]) -> str:
        """Tokens holding ``%XX``: decoded (form ``+`` as space), masked with every detector, and
        replaced by the masked decoded text when that hid something (``next=postgres%3A%2F%2Fu%3Apw%40h``
        becomes ``next=postgres://u:[password#…]@h``); left as written otherwise. Decoding twice at
        most (doubly encoded parameters); what decodes to the same text is left alone."""
        from urllib.parse import unquote_plus

        depth = self._pct_depth
        if depth >= 2:
            return text

        def repl(m: re.Match[str]) -> str:
            tok = m.group()
            if len(tok) > _PCT_TOKEN_MAX:  # a blob (base64 with "+"), not a URL or a form: as written
                return tok
            dec = unquote_plus(tok)
            if dec == tok:
                return tok
            self._pct_depth = 2  # the token as written, not decoded: if that finds a secret, keep it so
            try:
                plain: dict[str, int] = {}
                self._mask_text(tok, plain)
            finally:
                self._pct_depth = depth
            if plain:
                return tok  # masked as written by the steps after this one ("AccountKey=ab+cd==")
            sub: dict[str, int] = {}
            self._pct_depth = depth + 1
            try:
                out = self._mask_text(dec, sub)
            finally:
                self._pct_depth = depth
            if not sub:
                return tok
            found.extend(k for k, n in sub.items() for _ in range(n))
            return out

        return _PCT_TOKEN_RE.sub(repl, text)

    def _d_json_escapes(self, text: str, found: list[str]) -> str:
        """``\\uXXXX`` escapes of non-ASCII characters decoded (JSON text written with ensure_ascii),
        so the detectors see ``jürgen@müller.de`` or ``password\\u00a0x`` as written; the decoded text
        is kept only when it hid something (it is still valid JSON: only non-ASCII is decoded)."""

        def dec(m: re.Match[str]) -> str:
            esc = m.group()[len(m.group(1)) :].replace(m.group(1), "\\")  # any depth of JSON-in-JSON
            esc = "\\" + esc
            return esc.encode("ascii").decode("unicode_escape").encode("utf-16", "surrogatepass").decode("utf-16")

        decoded = _JSON_U_RE.sub(dec, text)
        scratch: dict[str, int] = {}
        out = self._mask_text(decoded, scratch)
        if not scratch:
            return text
        found.extend(k for k, n in scratch.items() for _ in range(n))
        return out

    def _d_html_entities(self, text: str, found: list[str]) -> str:
        """Character references decoded (``&#x70;assword=…``, ``bob&#64;example.com``), masked with
        every detector; the decoded, masked text replaces the original only when that hid something."""
        import html

        return self._decoded_view(text, html.unescape(text), found)

    def _d_byte_escapes(self, text: str, found: list[str]) -> str:
        """Escaped bytes that are not UTF-8 (``\\x80``, a :class:`~idemview.ledger.rawtext.RawText`
        as shown) set apart from what follows (``\\x80 alice@example.com``), so the detectors see the
        word after them; kept so only when that hid something."""
        return self._decoded_view(text, _BYTE_ESC_RE.sub(lambda m: m.group() + " ", text), found)

    def _d_lookalike_letters(self, text: str, found: list[str]) -> str:
        """Compatibility forms folded and invisible format characters dropped (Unicode NFKC, UAX #15;
        general category Cf): ``ｐａｓｓｗｏｒｄ=…`` (full-width) and ``pass\u200bword=…`` (a zero-width
        space in the name) read as ``password=…``; kept folded only when that hid something."""
        import unicodedata

        folded = unicodedata.normalize("NFKC", text)
        if any(unicodedata.category(c) == "Cf" for c in folded if not c.isascii()):
            folded = "".join(c for c in folded if c.isascii() or unicodedata.category(c) != "Cf")
        return self._decoded_view(text, folded, found)

    def _decoded_view(self, text: str, decoded: str, found: list[str]) -> str:
        """``decoded`` (``text`` in another spelling) masked with every detector when that hides
        something, else ``text`` unchanged; two levels of decoding at most."""
        if self._pct_depth >= 2 or decoded == text:
            return text
        scratch: dict[str, int] = {}
        depth = self._pct_depth
        self._pct_depth = depth + 1
        try:
            out = self._mask_text(decoded, scratch)
        finally:
            self._pct_depth = depth
        if not scratch:
            return text
        found.extend(k for k, n in scratch.items() for _ in range(n))
        return out

    def _d_base64(self, text: str, found: list[str]) -> str:
        """Base64 / base64url tokens whose decoded bytes are UTF-8 text holding something a detector
        masks (a JSON with a password, an e-mail, a card number) are masked whole, as the first kind
        found; two levels of decoding at most."""
        import base64
        import binascii

        depth = self._pct_depth
        if depth >= 2:
            return text

        def repl(m: re.Match[str]) -> str:
            tok = m.group()
            if len(tok) > _B64_MAX or _at_tag(text, m.start()):
                return tok
            body = tok.rstrip("=")
            if len(body) % 4 == 1:
                return tok
            padded = body + "=" * (-len(body) % 4)
            try:
                if "-" in body or "_" in body:
                    raw = base64.urlsafe_b64decode(padded)
                else:
                    raw = base64.b64decode(padded, validate=True)
                dec = raw.decode("utf-8")
            except (binascii.Error, ValueError):
                return tok
            if not dec.replace("\n", "").replace("\t", "").replace("\r", "").isprintable():
                return tok
            sub: dict[str, int] = {}
            self._pct_depth = depth + 1
            try:
                self._mask_text(dec, sub)
            finally:
                self._pct_depth = depth
            if not sub:
                return tok
            found.extend(k for k, n in sub.items() for _ in range(n))
            return self._tag(next(iter(sub)), tok)

        return _B64_TOKEN_RE.sub(repl, text)

    def _d_xml_element(self, text: str, found: list[str]) -> str:
        if "<" not in text and "&lt;" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            kind = self.column_kind(m.group("name"))
            vs = m.start("val")
            if kind is None or _at_tag(m.string, vs) or not m.group("val").strip():
                return m.group()
            found.append(kind)
            base = m.start()
            return m.group()[: vs - base] + self._tag(kind, m.group("val")) + m.group()[m.end("val") - base :]

        return _XML_ELEMENT_RE.sub(repl, text)

    def _d_key_detail(self, text: str, found: list[str]) -> str:
        if ")=(" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            names = [n.strip() for n in m.group("names").split(",")]
            kinds = [self.column_kind(n) for n in names]
            if not any(kinds):
                return m.group()
            raw = m.group("vals")
            vals = raw.split(", ")
            base = m.start()
            head = m.group()[: m.start("vals") - base]
            if len(vals) != len(names):  # a value holding ", ": the whole tuple as one
                first = next(k for k in kinds if k)
                found.append(first)
                return head + self._tag(first, raw) + ")"
            out = []
            for kind, v in zip(kinds, vals, strict=True):
                if kind is None or _at_tag(v, 0):
                    out.append(v)
                else:
                    found.append(kind)
                    out.append(self._tag(kind, v))
            return head + ", ".join(out) + ")"

        return _PG_KEY_DETAIL_RE.sub(repl, text)

    def _d_command_line(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            if _at_tag(m.string, m.start("pw")):
                return m.group()
            found.append("password")
            base = m.start()
            return (
                m.group()[: m.start("pw") - base]
                + self._tag("password", m.group("pw"))
                + m.group()[m.end("pw") - base :]
            )

        text = _CLI_USER_RE.sub(repl, text)
        low = text.lower()
        if "redis-cli" in low:
            text = _CLI_REDIS_RE.sub(repl, text)
        if "mysql" in low or "mariadb" in low:
            text = _CLI_MYSQL_RE.sub(repl, text)
        return text

    def _d_pem(self, text: str, found: list[str]) -> str:
        if "-----BEGIN" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            found.append("private_key")
            return self._tag("private_key", m.group())

        return _PEM_RE.sub(repl, text)

    def _d_url_password(self, text: str, found: list[str]) -> str:
        if "://" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            pw = m.group(1)
            if not pw or _at_tag(m.string, m.start(1)):
                return m.group()
            found.append("password")
            s = m.start(1) - m.start()
            return m.group()[:s] + self._tag("password", pw) + "@"

        return _URL_USERINFO_RE.sub(repl, text)

    def _d_url_param(self, text: str, found: list[str]) -> str:
        if "=" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            name = m.group(1)
            kind = self._url_name_cache.get(name, _MISSING)
            if kind is _MISSING:
                kind = self.rules.classify_url_param(name)
                if len(self._url_name_cache) > 4096:
                    self._url_name_cache.clear()
                self._url_name_cache[name] = kind
            if kind is None or _at_tag(m.string, m.start(2)):
                return m.group()
            found.append(str(kind))
            return m.group()[: m.start(2) - m.start()] + self._tag(str(kind), m.group(2))

        return _URL_PARAM_RE.sub(repl, text)

    def _d_jwt(self, text: str, found: list[str]) -> str:
        if "eyJ" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            found.append("jwt")
            return self._tag("jwt", m.group())

        return _JWT_RE.sub(repl, text)

    def _d_provider(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            kind = m.lastgroup or "api_key"
            if kind == "slack_webhook":
                kind = "slack_token"
            found.append(kind)
            return self._tag(kind, m.group())

        return _PROVIDER_RE.sub(repl, text)

    def _d_auth(self, text: str, found: list[str]) -> str:
        # Exact gate (issue 27 item 2): every match holds a scheme word matched case-insensitively. For
        # ASCII text that is the word in text.lower(); non-ASCII text may hold a letter that matches an
        # ASCII one under IGNORECASE (U+017F long s, U+212A Kelvin sign): always scanned.
        if text.isascii():
            low = text.lower()
            if "bearer" not in low and "basic" not in low and "token" not in low:
                return text
        return self._d_auth_scan(text, found)

    def _d_auth_scan(self, text: str, found: list[str]) -> str:
        """``Bearer``/``Basic``/``Token`` credentials (RFC 6750, RFC 7617), without the gate."""

        def repl(m: re.Match[str]) -> str:
            cred = m.group(3)
            if len(cred) < 6 or _at_tag(m.string, m.start(3)):
                return m.group()
            if not _looks_random(cred):
                before = m.string[max(0, m.start() - 40) : m.start()]
                if _AUTH_CONTEXT_RE.search(before) is None:
                    return m.group()
            scheme = m.group(1).lower()
            kind = "token" if scheme == "token" else scheme
            found.append(kind)
            return m.group(1) + m.group(2) + self._tag(kind, cred)

        return _AUTH_RE.sub(repl, text)

    def _d_aws_secret(self, text: str, found: list[str]) -> str:
        if _AWS_GATE_RE.search(text.lower()) is None:
            return text

        def repl(m: re.Match[str]) -> str:
            s = m.group()
            if not (_has_upper(s) and _has_lower(s) and (_has_digit(s) or "/" in s or "+" in s)):
                return s  # hex digests, words: not a base64 secret
            found.append("aws_secret")
            return self._tag("aws_secret", s)

        return _AWS_SECRET_RE.sub(repl, text)

    def _d_email(self, text: str, found: list[str]) -> str:
        if "@" not in text:
            return text

        def repl(m: re.Match[str]) -> str:
            found.append("email")
            return self._tag("email", m.group())

        return _EMAIL_RE.sub(repl, text)

    def _d_iban(self, text: str, found: list[str]) -> str:
        m = _IBAN_RE.search(text)
        if m is None:
            return text
        parts: list[str] = []
        pos = 0
        while m is not None:
            s = m.group()
            length = _IBAN_LENGTHS.get(s[:2].upper())
            end = -1
            if length:
                cnt = k = 0
                while k < len(s) and cnt < length:
                    if s[k] != " ":
                        cnt += 1
                    k += 1
                if cnt == length and (k == len(s) or s[k] == " ") and iban_valid(s[:k]) and _iban_case_ok(s[:k]):
                    end = k
            if end > 0:
                parts.append(text[pos : m.start()])
                parts.append(self._tag("iban", s[:end]))
                found.append("iban")
                pos = m.start() + end
                m = _IBAN_RE.search(text, pos)
            else:
                m = _IBAN_RE.search(text, m.start() + 1)
        parts.append(text[pos:])
        return "".join(parts)

    def _d_card(self, text: str, found: list[str]) -> str:
        if _CARD_RUN_RE.search(text) is None:
            return text
        parts: list[str] = []
        pos = 0
        for s, e in card_spans(text):
            parts.append(text[pos:s])
            parts.append(self._tag("card", text[s:e]))
            found.append("card")
            pos = e
        parts.append(text[pos:])
        return "".join(parts)

    def _d_phone(self, text: str, found: list[str]) -> str:
        if "+" in text:
            text = _PHONE_RE.sub(lambda m: self._phone_repl(m, found), text)
        if "-" in text or "." in text or "(" in text:

            def nanp(m: re.Match[str]) -> str:
                found.append("phone")
                return self._tag("phone", m.group())

            text = _NANP_RE.sub(nanp, text)
        return text

    def _d_phone00(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            n = sum(ch.isdigit() for ch in m.group()) - 2
            if not 8 <= n <= 15:
                return m.group()
            found.append("phone")
            return self._tag("phone", m.group())

        return _PHONE00_RE.sub(repl, text)

    def _d_ssn(self, text: str, found: list[str]) -> str:
        def repl(m: re.Match[str]) -> str:
            found.append("ssn")
            return self._tag("ssn", m.group())

        return _SSN_RE.sub(repl, text)

    def _d_labelled_number(self, text: str, found: list[str]) -> str:
        det = self.rules.detectors

        def repl(m: re.Match[str]) -> str:
            kind = "ssn" if m.group("ssn") else "phone"
            num = m.group("num")
            n = sum(ch.isdigit() for ch in num)
            if kind not in det or not (n == 9 if kind == "ssn" else 7 <= n <= 15):
                return m.group()
            found.append(kind)
            return m.group()[: m.start("num") - m.start()] + self._tag(kind, num)

        return _LABEL_NUM_RE.sub(repl, text)

    def _phone_repl(self, m: re.Match[str], found: list[str]) -> str:
        s = m.group()
        after = m.string[m.end() : m.end() + 2]
        if len(after) == 2 and after[0] in ".," and after[1].isdigit():
            return s  # "+12345678.90" is an amount, not a phone
        # Take whole digit groups while the total stays within E.164's 15 digits.
        total = 0
        end = 0
        for g in _PHONE_SPLIT_RE.finditer(s):
            n = len(g.group())
            if total + n > 15:
                break
            total += n
            end = g.end()
        if total < 8:
            return s
        found.append("phone")
        return self._tag("phone", s[:end]) + s[end:]

    def _d_kv(self, text: str, found: list[str]) -> str:
        # A search loop, not re.sub: when a name is not sensitive ("status: password=x") scanning
        # resumes at its value, so a sensitive pair inside that value is still seen.
        m = _KV_RE.search(text)
        if m is None:
            return text
        parts: list[str] = []
        last = 0
        while m is not None:
            kind = self.column_kind(m.group("name"))
            vs, ve = m.span("val")
            if m.group("q0") is not None:  # JSON in JSON in JSON: \\\"value\\\"
                w = len(m.group("bs")) + 1
                vs, ve = vs + w, ve - w
            elif m.group("q1") is not None:
                vs, ve = vs + 2, ve - 2
            elif m.group("bare") is None:
                vs, ve = vs + 1, ve - 1
            else:
                bare = m.group("bare")
                sp = bare.find(" ") if " " in bare else bare.find("\t")
                if sp > 0:  # "Bearer xyz": keep the scheme
                    while bare[sp] in " \t":
                        sp += 1
                    vs += sp
            val = text[vs:ve]
            if (
                kind is None
                or _at_tag(text, vs)
                or (m.group("bare") is not None and val.lower() in ("bearer", "basic", "token"))
            ):
                m = _KV_RE.search(text, m.start("val"))
                continue
            if m.group("bare") is not None:
                ve = self._kv_value_end(text, ve, kind)
                val = text[vs:ve]
            if val in _KV_SKIP_VALUES:
                m = _KV_RE.search(text, m.start("val"))
                continue
            found.append(kind)
            parts.append(text[last:vs])
            parts.append(self._tag(kind, val))
            last = ve
            m = _KV_RE.search(text, ve)
        if not parts:
            return text
        parts.append(text[last:])
        return "".join(parts)

    def _kv_value_end(self, text: str, ve: int, kind: str) -> int:
        """Where an unquoted value after a sensitive name ends (its first word ends at ``ve``).

        After a **credential** name (``password: correct horse battery staple``) the value runs on
        over further words up to the end of the line, a ``;``, a quote or JSON escape that closes an
        enclosing string (``"``, ``\\"``, ``\\n``, a ``'`` not followed by a letter), or a
        separator (space, ``,``, ``&``) followed by another ``name=`` / ``name:`` pair
        (``password=s3cret dbname=x`` keeps ``dbname=x`` visible). Unbalanced closing brackets at
        its end are left out (``(password: a b)``). Tags already in the text are never swallowed.
        After a **number-ish personal** name (phone, ssn, card, iban) it runs on over further
        space-separated groups made of digits and ``()+-./`` (``phone: 020 7946 0958``).
        """
        if kind in self.rules.credential_kinds:
            m = _KV_CRED_REST_RE.match(text, ve)  # both patterns match the empty string: never None
            end = m.end() if m else ve
        elif kind in _NUMBERISH_KINDS:
            m = _KV_DIGIT_REST_RE.match(text, ve)
            end = m.end() if m else ve
        else:
            return ve
        if end == ve:
            return ve
        i = text.find("[", ve, end)
        while i >= 0:
            if TAG_RE.match(text, i) is not None:
                end = i
                while end > ve and text[end - 1] in " \t,&":
                    end -= 1
                break
            i = text.find("[", i + 1, end)
        while end > ve and text[end - 1] in ")]}>":
            closer = text[end - 1]
            opener = "([{<"[")]}>".index(closer)]
            seg = text[ve - 1 : end]
            if seg.count(opener) >= seg.count(closer):
                break
            end -= 1
        return end
