"""The model graph: topological order, cycle detection, and what lies upstream or downstream."""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping


class CycleError(ValueError):
    def __init__(self, cycle: list[str]):
        self.cycle = cycle
        super().__init__(" -> ".join(cycle))


class DAG:
    """Nodes and their parents (upstream). Iteration order is deterministic."""

    def __init__(self, parents: Mapping[str, Iterable[str]]):
        self.parents: dict[str, list[str]] = {n: sorted(set(ps)) for n, ps in parents.items()}
        self.children: dict[str, list[str]] = {n: [] for n in self.parents}
        for node, ps in self.parents.items():
            for p in ps:
                self.children.setdefault(p, []).append(node)
        self._order: list[str] | None = None

    def sorted(self) -> list[str]:
        """Parents before children; raises CycleError naming one cycle.

        Among the models ready to run, the last one to become ready goes first (ties at the start
        broken by name), so a model's children follow it closely: the order plans, applies and
        Dagster have always shown. `graphlib` counts the parents and finds that there is a cycle;
        which cycle to name, and from which model, stays ours (see `_find_cycle`).
        """
        if self._order is None:
            sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
            for node, ps in self.parents.items():
                sorter.add(node, *ps)
            try:
                sorter.prepare()
            except graphlib.CycleError:
                pass  # graphlib still hands out every model outside a cycle; the rest are named below
            ready = sorted(sorter.get_ready())
            order: list[str] = []
            while ready:
                node = ready.pop()
                order.append(node)
                sorter.done(node)
                ready.extend(sorter.get_ready())
            if len(order) < len(self.children):
                raise CycleError(self._find_cycle(set(self.children) - set(order)))
            self._order = order
        return self._order

    def _find_cycle(self, remaining: set[str]) -> list[str]:
        """A cycle among the models left unordered, parents first, entered by walking up from the
        smallest name. Not graphlib's own cycle, which starts wherever its search began: this keeps the
        cycle an error names, and the file it points at (the cycle's first model), as they were."""
        start = min(remaining)
        path, seen = [start], {start: 0}
        node = start
        while True:
            node = next(p for p in self.parents.get(node, []) if p in remaining)
            if node in seen:
                cycle = path[seen[node]:] + [node]
                return list(reversed(cycle))
            seen[node] = len(path)
            path.append(node)

    def upstream(self, node: str) -> set[str]:
        return self.upstream_of([node])

    def downstream(self, node: str) -> set[str]:
        return self.downstream_of([node])

    def upstream_of(self, nodes: Iterable[str]) -> set[str]:
        """Everything above any of `nodes` (not the nodes themselves, unless one is above another).
        One walk for the whole set: a selector matching hundreds of models expands in one pass."""
        return _reachable(nodes, self.parents)

    def downstream_of(self, nodes: Iterable[str]) -> set[str]:
        """Everything below any of `nodes` (not the nodes themselves, unless one is below another)."""
        return _reachable(nodes, self.children)


def _reachable(nodes: Iterable[str], edges: Mapping[str, list[str]]) -> set[str]:
    out: set[str] = set()
    stack = [n for node in nodes for n in edges.get(node, [])]
    while stack:
        n = stack.pop()
        if n not in out:
            out.add(n)
            stack.extend(edges.get(n, []))
    return out
