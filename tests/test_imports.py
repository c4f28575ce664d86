"""The package reads as layers: its import graph has no circle (every `import` and `from ... import`
of an nvgg module, at module level or inside a function, is an edge, and no module reaches itself),
no function is named in a string, and every command is short."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "nvgg"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The nvgg modules `name` imports: `from .x import y` counts y where y is a module, else x."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                if f"{origin}.{alias.name}" in known:
                    out.add(f"{origin}.{alias.name}")
                elif origin in known:
                    out.add(origin)
    out.discard(name)
    return out


def graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_inside_nvgg():
    edges = graph()
    assert "nvgg.cases" in edges["nvgg.sol"]  # the walk sees the package's own imports
    assert cycles(edges) == []


def test_no_function_is_named_in_a_string():
    """A row is followed by reading code: children are handed function objects, never
    "module:function" strings (nvgg/procs.py)."""
    import re
    named = [(p.name, m.group(0)) for p in ROOT.rglob("*.py")
             for m in re.finditer(r"""["'](nvgg|os|json|subprocess)(\.\w+)*:\w+["']""", p.read_text())]
    assert named == []


def test_every_command_is_short():
    """A command parses, checks its options, calls one library function and renders: under 60 lines."""
    long = []
    for path in (ROOT / "commands").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_cmd") and node.end_lineno - node.lineno >= 60:
                long.append((path.name, node.name, node.end_lineno - node.lineno + 1))
    assert long == []
    assert len(list((ROOT / "commands").glob("*.py"))) == 11  # the 9 verbs, common.py and __init__.py


def test_no_lower_layer_names_a_flag():
    """Only the command layer (cli.py, commands/, __main__.py) speaks of nvgg's options: a sentence
    below it that names one (an error's "use --backend torch") would tie the library to the CLI."""
    import re

    import typer.main

    from nvgg.cli import app
    group = typer.main.get_command(app)
    flags = {opt for cmd in group.commands.values() for p in cmd.params if p.param_type_name == "option"
             for opt in p.opts}
    assert {"--json", "--tensormaps", "--backend", "--timeout"} <= flags
    found = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("commands/") or rel in ("cli.py", "__main__.py"):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs and " " in node.value:
                named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", node.value)) & flags
                found += [(rel, node.lineno, flag) for flag in sorted(named)]
    assert found == []
