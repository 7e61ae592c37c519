"""Issue 25 item 3: no import cycle anywhere in the core (everything outside ``idemview.qt`` and
``idemview.cli``), module by module, lazy imports inside functions included (``TYPE_CHECKING`` imports
are annotations, not run-time dependencies, as in pyproject's import-linter contracts). On main before
the issue, findings/{engine,registry,rules,audit} and ledger/{reader,batch} formed one cycle (the ledger
compiled finding filters by importing the findings engine)."""

from __future__ import annotations

import grimp


def strongly_connected(nodes: set[str], succ) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(succ(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(set(edges), lambda m: edges[m]) == [["a", "b", "c"]]


def test_no_import_cycle_in_the_core():
    g = grimp.build_graph("idemview", exclude_type_checking_imports=True)
    core = {m for m in g.modules if not m.startswith(("idemview.qt", "idemview.cli"))}
    assert "idemview.ledger.reader" in core and "idemview.findings.engine" in core

    def succ(m: str) -> set[str]:
        return {x for x in g.find_modules_directly_imported_by(m) if x in core}

    assert strongly_connected(core, succ) == []
    assert not {m for m in succ("idemview.ledger.reader") if m.startswith("idemview.findings")}
