"""The model graph: topological order and cycle detection."""

from __future__ import annotations

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
        """Parents before children; raises CycleError naming one cycle."""
        if self._order is None:
            indegree = {n: 0 for n in self.children}
            for node, ps in self.parents.items():
                indegree[node] = len(ps)
            ready = sorted(n for n, d in indegree.items() if d == 0)
            order: list[str] = []
            while ready:
                node = ready.pop()
                order.append(node)
                for child in self.children.get(node, []):
                    indegree[child] -= 1
                    if indegree[child] == 0:
                        ready.append(child)
            if len(order) < len(indegree):
                raise CycleError(self._find_cycle(set(indegree) - set(order)))
            self._order = order
        return self._order

    def _find_cycle(self, remaining: set[str]) -> list[str]:
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
        out: set[str] = set()
        stack = list(self.parents.get(node, []))
        while stack:
            n = stack.pop()
            if n not in out:
                out.add(n)
                stack.extend(self.parents.get(n, []))
        return out

    def downstream(self, node: str) -> set[str]:
        out: set[str] = set()
        stack = list(self.children.get(node, []))
        while stack:
            n = stack.pop()
            if n not in out:
                out.add(n)
                stack.extend(self.children.get(n, []))
        return out
