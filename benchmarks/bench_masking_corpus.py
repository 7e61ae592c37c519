"""Precision and recall of the masking detectors on the generated corpus (issue 19 item 8).

Run: ``python benchmarks/bench_masking_corpus.py`` from the repository root (``make bench-masking``).

- **recall** per corpus kind: the share of its cases (one per context: plain, JSON value and text,
  JSON in JSON, log line, stack trace, XML, URL- and form-encoded, header; JSON numbers for cards) in
  which no 6-character piece of the secret survives (``tests/masking_corpus.leaked_pieces``);
- **precision** per tag kind: tags of that kind written on secret cases / all tags of that kind,
  look-alike cases included (a tag on a UUID, a hash, a timestamp is a false positive);
- look-alike kinds: how many of their cases came back changed (must be 0).

Prints one table; exit status 1 when a secret kind is below 100 % recall or a look-alike is masked.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from idemview.masking.masker import Masker  # noqa: E402
from tests.masking_corpus import leaked_pieces, lookalike_cases, secret_cases  # noqa: E402

_TAG_KIND = re.compile(r"\[([a-z][a-z0-9_]{0,31})#[0-9a-f]{6}")


def main() -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="PATH", help="also write the figures here (benchmarks/bench_all.py)")
    args = ap.parse_args()
    secrets, looks = secret_cases(), lookalike_cases()
    recall: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    tags_ok: Counter[str] = Counter()
    tags_fp: Counter[str] = Counter()
    t0 = time.perf_counter()
    for c in secrets:
        m = Masker()
        out = m.mask_value(c.value)
        recall[c.kind][0] += not leaked_pieces(c.secret, out)
        recall[c.kind][1] += 1
        tags_ok.update(m.counts)
    changed: Counter[str] = Counter()
    for c in looks:
        m = Masker()
        if m.mask_value(c.value) != c.value:
            changed[c.kind] += 1
        tags_fp.update(m.counts)
    dt = time.perf_counter() - t0
    print(f"{'secret kind':<28} {'recall':>8}  cases")
    for kind, (ok, n) in recall.items():
        print(f"{kind:<28} {ok / n:8.1%}  {ok}/{n}")
    print()
    print(f"{'tag kind':<28} {'precision':>9}  tags on secrets / on look-alikes")
    for kind in sorted(set(tags_ok) | set(tags_fp)):
        ok, fp = tags_ok[kind], tags_fp[kind]
        print(f"{kind:<28} {ok / (ok + fp):9.1%}  {ok} / {fp}")
    print()
    n_look = Counter(c.kind for c in looks)
    print(f"{'look-alike kind':<28} {'masked':>8}")
    for kind, n in n_look.items():
        print(f"{kind:<28} {changed[kind]:>4}/{n}")
    ok_all = sum(a for a, _ in recall.values())
    n_all = sum(b for _, b in recall.values())
    print()
    print(
        f"corpus: {len(recall)} secret kinds, {n_all} secret cases, "
        f"{len(n_look)} look-alike kinds, {len(looks)} cases; "
        f"recall {ok_all / n_all:.1%}, look-alikes masked {sum(changed.values())}; {dt:.2f} s"
    )
    if args.json:
        doc = {
            "recall": {k: [ok, n] for k, (ok, n) in recall.items()},
            "precision": {k: [tags_ok[k], tags_fp[k]] for k in sorted(set(tags_ok) | set(tags_fp))},
            "lookalikes_masked": {k: [changed[k], n] for k, n in n_look.items()},
            "secret_cases": n_all,
            "secret_cases_ok": ok_all,
            "lookalike_cases": len(looks),
            "seconds": dt,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0 if ok_all == n_all and not changed else 1


if __name__ == "__main__":
    sys.exit(main())
