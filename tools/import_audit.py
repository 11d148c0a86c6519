"""Count the package's internal imports, those inside functions, and the import cycles they form.

    python tools/import_audit.py            # summary
    python tools/import_audit.py --list     # every import inside a function, with file:line

An "internal import" is an ``import workbench...`` / ``from workbench... import`` / relative import. One placed in a
function body (at any depth) is a lazy import: it hides a dependency from the module graph and is how the old
package's cycles stayed importable. The cycle count takes every internal import, lazy or not, as an edge, and
reports the strongly connected components with more than one module.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "workbench"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def internal_imports(path: Path, modules: set[str]):
    """Yield (target module, lineno, inside_function) for each internal import of a file."""
    mod = module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"

    def targets(node):
        if isinstance(node, ast.Import):
            return [a.name for a in node.names if a.name.split(".")[0] == "workbench"]
        base = _resolve(mod, is_pkg, node)
        if base.split(".")[0] != "workbench":
            return []
        out = []
        for a in node.names:
            sub = f"{base}.{a.name}"
            out.append(sub if sub in modules else base)
        return out

    def walk(node, in_func: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for t in targets(child):
                    yield t, child.lineno, in_func
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            # imports under `if TYPE_CHECKING:` never run: not an edge
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            yield from walk(child, f)

    yield from walk(tree, False)


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print every import inside a function")
    args = ap.parse_args(argv)
    files = sorted(PKG.rglob("*.py"))
    modules = {module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    statements: set[tuple[Path, int]] = set()
    lazy_statements: set[tuple[Path, int]] = set()
    for p in files:
        src = module_name(p)
        for target, line, in_func in internal_imports(p, modules):
            # a package's own __init__ importing its children is not a dependency on the package
            if target == src:
                continue
            statements.add((p, line))
            graph.setdefault(src, set()).add(target)
            if in_func:
                if args.list and (p, line) not in lazy_statements:
                    print(f"{p.relative_to(ROOT)}:{line}: {target}")
                lazy_statements.add((p, line))
    total, lazy = len(statements), len(lazy_statements)
    cycles = _sccs(graph)
    print(f"internal import statements: {total}; inside functions: {lazy}")
    print(f"import cycles: {len(cycles)}; modules in cycles: {sum(len(c) for c in cycles)}")
    for c in cycles:
        print("  cycle of", len(c), ":", ", ".join(c[:8]) + (" ..." if len(c) > 8 else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
