"""The shape of the code, in the numbers the developers' guide sets limits on.

    python benchmarks/code_shape.py [--root mesh_dagster] [--list]

Prints: modules per folder, files over 600 lines, functions over 60 lines, classes split into a
chain of base classes (a package class whose only use is as the base of one other class: methods
grouped by inheritance instead of parts composed), function-level imports (an import statement
inside a function body), `isinstance(..., ...Kind)` sites outside the kind modules, comparisons
with a kind's name outside the kind modules (`kind == "SEED"`, `name in (KindName.FULL, ...)`: kind
behaviour belongs on the kind), forwarders (a method whose body is one call of another object's
method with the method's own arguments, e.g. `def intervals(self, key): return
self._intervals.intervals(key)`), and import cycles between modules (module-level imports only: the
function-level ones are counted above instead). `--list` names each offender.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

FILE_LIMIT, FUNCTION_LIMIT = 600, 60


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _module_imports(tree: ast.Module, name: str, is_package: bool, modules: set[str], anywhere: bool = False
                    ) -> set[str]:
    """Modules imported at module level (not inside functions; `if TYPE_CHECKING:` blocks skipped).
    `from package import module` depends on that module; `from module import name` on the module.
    `anywhere`: imports inside functions count too (the cycles they hide)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        nested = isinstance(node, (ast.If, ast.Try)) or anywhere
        for sub in list(ast.walk(node)) if nested else [node]:
            if isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names}
            elif isinstance(sub, ast.ImportFrom):
                base = sub.module or ""
                if sub.level:
                    package = name if is_package else name.rpartition(".")[0]
                    for _ in range(sub.level - 1):
                        package = package.rpartition(".")[0]
                    base = f"{package}.{base}".strip(".")
                submodules = {f"{base}.{a.name}" for a in sub.names} & modules
                found |= submodules
                if len(submodules) < len(sub.names):
                    found.add(base)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _kind_names(root: Path) -> set[str]:
    """The names of `KindName` (core/models/kinds_base.py), read from its source: no import needed."""
    tree = ast.parse((root / "core" / "models" / "kinds_base.py").read_text())
    (enum,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KindName"]
    return {t.id for n in enum.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def _is_kind_name(node: ast.expr, names: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in names
    if isinstance(node, ast.Attribute):
        return node.attr in names and ast.unparse(node.value).endswith("KindName")
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_kind_name(e, names) for e in node.elts)
    return False


def _kind_comparisons(tree: ast.AST, names: set[str]) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare)
            and any(_is_kind_name(e, names) for e in [n.left, *n.comparators])]


def _passed_through(call: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The call passes exactly the method's own parameters (self left out), as they came."""
    a = fn.args
    params = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]][1:]
    passed = [x.id for x in call.args if isinstance(x, ast.Name)]
    passed += [x.value.id for x in call.args if isinstance(x, ast.Starred) and isinstance(x.value, ast.Name)]
    passed += [k.value.id for k in call.keywords if isinstance(k.value, ast.Name) and k.arg in (k.value.id, None)]
    spread = [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return len(passed) == len(call.args) + len(call.keywords) and sorted(passed) == sorted(params + spread)


def _forwarders(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Methods whose body is `[return] self.<part>...<method>(<their own arguments>)`."""
    found = []
    for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        body = fn.body[1:] if ast.get_docstring(fn, clean=False) is not None else fn.body
        if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr)) or not fn.args.args:
            continue
        call = body[0].value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            continue
        target = call.func.value  # self.<part> (or deeper): another object, not the class's own method
        while isinstance(target, (ast.Attribute, ast.Call)):
            target = target.value if isinstance(target, ast.Attribute) else target.func
        if (isinstance(target, ast.Name) and target.id == fn.args.args[0].arg
                and isinstance(call.func.value, (ast.Attribute, ast.Call)) and _passed_through(call, fn)):
            found.append(fn)
    return found


def _grouping_bases(trees: dict[Path, ast.Module]) -> list[str]:
    """Package classes used only as the base of exactly one other class (`class _Parts` under
    `class _Plans(_Parts)` under `class Context(_Plans)`)."""
    classes = {cls.name: (path, cls) for path, tree in trees.items() for cls in ast.walk(tree)
               if isinstance(cls, ast.ClassDef)}
    subclasses: Counter[str] = Counter()
    as_base: set[int] = set()
    for _, cls in classes.values():
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            if name in classes:
                subclasses[name] += 1
                as_base.add(id(base))
    used: Counter[str] = Counter(
        node.id if isinstance(node, ast.Name) else node.attr for tree in trees.values() for node in ast.walk(tree)
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in as_base)
    return [f"{path}:{cls.lineno} {name}" for name, (path, cls) in sorted(classes.items())
            if subclasses[name] == 1 and not used[name]]


def measure(root: Path) -> dict[str, list[str]]:
    files = sorted(root.rglob("*.py"))
    modules = {module_name(f, root): f for f in files}
    report: dict[str, list[str]] = defaultdict(list)
    kind_names = _kind_names(root)
    module_level: dict[str, set[str]] = {}
    with_functions: dict[str, set[str]] = {}
    trees: dict[Path, ast.Module] = {}
    for name, path in modules.items():
        text = path.read_text()
        tree = trees[path] = ast.parse(text)
        lines = len(text.splitlines())
        if lines > FILE_LIMIT:
            report["files over 600 lines"].append(f"{path} ({lines})")
        for fn in _functions(tree):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if length > FUNCTION_LIMIT:
                report["functions over 60 lines"].append(f"{path}:{fn.lineno} {fn.name} ({length})")
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and node is not fn:
                    report["function-level imports"].append(f"{path}:{node.lineno}")
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            report["forwarders"] += [f"{path}:{fn.lineno} {cls.name}.{fn.name}" for fn in _forwarders(cls)]
        if "kinds" not in path.stem:
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                        and len(node.args) == 2 and "Kind" in ast.unparse(node.args[1])):
                    report["isinstance-on-kind sites outside kinds"].append(f"{path}:{node.lineno}")
            report["kind-name comparisons outside kinds"] += [
                f"{path}:{line}" for line in _kind_comparisons(tree, kind_names)]
        for graph, anywhere in ((module_level, False), (with_functions, True)):
            imported = _module_imports(tree, name, path.name == "__init__.py", set(modules), anywhere)
            graph[name] = {m for m in imported if m in modules and m != name}
    report["classes split into base classes"] = _grouping_bases(trees)
    report["import cycles"] = [" <-> ".join(c) for c in _cycles(module_level)]
    report["import cycles hidden by function-level imports"] = [" <-> ".join(c) for c in _cycles(with_functions)]
    folders = Counter(str(f.parent.relative_to(root.parent)) for f in files if f.name != "__init__.py")
    report["modules per folder"] = [f"{folder}: {count}" for folder, count in sorted(folders.items())]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1] / "mesh_dagster"))
    parser.add_argument("--list", action="store_true", help="name every offender")
    args = parser.parse_args()
    report = measure(Path(args.root))
    for title in ("modules per folder", "files over 600 lines", "functions over 60 lines",
                  "classes split into base classes",
                  "function-level imports", "isinstance-on-kind sites outside kinds",
                  "kind-name comparisons outside kinds", "forwarders", "import cycles",
                  "import cycles hidden by function-level imports"):
        items = report.get(title, [])
        if title == "modules per folder":
            print(f"{title}:")
            for item in items:
                print(f"  {item}")
            continue
        print(f"{title}: {len(items)}")
        if args.list or title.startswith(("files", "functions", "classes", "import cycles")):
            for item in items:
                print(f"  {item}")


if __name__ == "__main__":
    main()
