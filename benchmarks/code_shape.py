"""The shape of the code, in the numbers the developers' guide sets limits on.

    python benchmarks/code_shape.py [--root mesh_dagster] [--list]

Prints: modules per folder, files over 600 lines, functions over 60 lines, classes over 30
methods, function-level imports (an import statement inside a function body), `isinstance(...,
...Kind)` sites outside the kind modules, and import cycles between modules (module-level imports
only: the function-level ones are counted above instead). `--list` names each offender.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

FILE_LIMIT, FUNCTION_LIMIT, METHOD_LIMIT = 600, 60, 30


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


def measure(root: Path) -> dict[str, list[str]]:
    files = sorted(root.rglob("*.py"))
    modules = {module_name(f, root): f for f in files}
    report: dict[str, list[str]] = defaultdict(list)
    module_level: dict[str, set[str]] = {}
    with_functions: dict[str, set[str]] = {}
    for name, path in modules.items():
        text = path.read_text()
        tree = ast.parse(text)
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
            methods = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if len(methods) > METHOD_LIMIT:
                report["classes over 30 methods"].append(f"{path}:{cls.lineno} {cls.name} ({len(methods)})")
        if "kinds" not in path.stem:
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                        and len(node.args) == 2 and "Kind" in ast.unparse(node.args[1])):
                    report["isinstance-on-kind sites outside kinds"].append(f"{path}:{node.lineno}")
        for graph, anywhere in ((module_level, False), (with_functions, True)):
            imported = _module_imports(tree, name, path.name == "__init__.py", set(modules), anywhere)
            graph[name] = {m for m in imported if m in modules and m != name}
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
    for title in ("modules per folder", "files over 600 lines", "functions over 60 lines", "classes over 30 methods",
                  "function-level imports", "isinstance-on-kind sites outside kinds", "import cycles",
                  "import cycles hidden by function-level imports"):
        items = report.get(title, [])
        if title == "modules per folder":
            print(f"{title}:")
            for item in items:
                print(f"  {item}")
            continue
        print(f"{title}: {len(items)}")
        if args.list or title.startswith(("files", "classes", "import cycles")):
            for item in items:
                print(f"  {item}")


if __name__ == "__main__":
    main()
