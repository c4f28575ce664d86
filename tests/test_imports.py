"""The package reads as layers: its import graph has no circle (every `import` and `from ... import`
of an nvgg module, at module level or inside a function, is an edge, and no module reaches itself)
and no arrow back up (each subpackage and top-level module sits in one of LAYERS and imports only
its own layer and those below), no function is named in a string, and every command is short."""

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


# The package's layers, bottom to top. A subpackage is one unit, a top-level module its own; a unit
# imports units of its own layer or lower ones, never a higher one. A new module or subpackage takes
# a place here (test_no_arrow_back_up says which layers fit it).
LAYERS = [
    # what everything stands on: errors, the data files and the models read from them (GPU
    # specifications and the occupancy rules, cases, SOL, the inputs and the reference), the
    # timer, the card's clocks and energy, CUPTI, child processes, and what a submission imports
    ("foundations", ("nvgg", "errors", "atomic", "data", "cases", "profiles", "occupancy", "sol", "inputs", "reference",
                     "timing", "clocks", "cupti", "procs", "gpus", "verdict", "gate", "probe", "compat")),
    ("the result", ("env", "result", "flags", "protocol", "versions")),  # what a row is, as data
    ("kernels", ("kernels",)),          # our kernels: configurations, builds, the compile cache
    ("backends", ("backends",)),        # what a launch runs
    ("strategies", ("strategies",)),    # launch schemes around a backend
    ("selection", ("selection", "space", "prebuild")),  # the strategy, backend and build a row takes, built ahead
    ("datapath", ("datapath",)),        # setup, check, measure: the one path
    ("output", ("report", "plot", "output", "baseline")),  # reports, their printers and files, the baseline gate
    ("rows", ("rows", "leaderboard", "cluster")),  # rows scheduled over workers; the evaluator's pass
    ("runs", ("profiling", "ab", "tune")),  # what commands run over rows: profiles, A/B rounds, sweeps
    ("commands", ("commands",)),
    ("cli", ("cli", "__main__")),
]


def unit(module: str) -> str:
    """A module's unit: its subpackage (nvgg.kernels.sm90.config -> kernels), else itself
    (nvgg.rows -> rows; the package's own __init__ -> nvgg)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def units(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph collapsed to units: an edge where any module of one imports any of the other."""
    out: dict[str, set[str]] = {}
    for name, targets in edges.items():
        out.setdefault(unit(name), set()).update(unit(t) for t in targets)
    for name, targets in out.items():
        targets.discard(name)
    return out


def _levels(layers) -> dict[str, int]:
    level = {u: i for i, (_, members) in enumerate(layers) for u in members}
    assert len(level) == sum(len(members) for _, members in layers), "a unit in two layers"
    return level


def arrows_up(edges: dict[str, set[str]], layers) -> list[str]:
    """Each import of a module of a higher layer's unit, as "importer -> imported (unit -> unit)";
    units in no layer are `unplaced`'s to report."""
    level = _levels(layers)
    return sorted(f"{a} -> {b} ({unit(a)} -> {unit(b)})" for a, targets in edges.items() for b in targets
                  if unit(a) in level and unit(b) in level and level[unit(b)] > level[unit(a)])


def unplaced(edges: dict[str, set[str]], layers) -> list[str]:
    """A sentence for each unit in no layer, naming the layers it may take: at or above every unit
    it imports, at or below every unit that imports it."""
    level, names = _levels(layers), [name for name, _ in layers]
    graph = units(edges)
    out = []
    for name in sorted(set(graph) - set(level)):
        lo = max((level[v] for v in graph[name] if v in level), default=0)
        hi = min((level[v] for v, targets in graph.items() if name in targets and v in level), default=len(layers) - 1)
        where = (f"in a layer from {names[lo]!r} to {names[hi]!r}" if lo <= hi else
                 f"nowhere: it imports layer {names[lo]!r} and layer {names[hi]!r} imports it; cut one of those imports")
        out.append(f"{name} is in no layer: add it to LAYERS (tests/test_imports.py) {where}")
    return out


def test_the_checker_finds_an_arrow_back_up_and_a_unit_in_no_layer():
    layers = [("bottom", ("errors",)), ("middle", ("kernels",)), ("top", ("cli",))]
    edges = {"nvgg.errors": set(), "nvgg.kernels": {"nvgg.kernels.a"}, "nvgg.kernels.a": {"nvgg.errors"},
             "nvgg.kernels.b": {"nvgg.kernels.a", "nvgg.cli"}, "nvgg.cli": {"nvgg.kernels", "nvgg.fresh"},
             "nvgg.fresh": {"nvgg.kernels.a"}, "nvgg.stuck": {"nvgg.cli"}, "nvgg.errors2": {"nvgg.stuck"}}
    assert units(edges)["kernels"] == {"errors", "cli"}
    assert arrows_up(edges, layers) == ["nvgg.kernels.b -> nvgg.cli (kernels -> cli)"]
    assert arrows_up(edges, layers[:1] + [("middle and top", ("kernels", "cli"))]) == []
    assert unplaced(edges, layers) == [
        "errors2 is in no layer: add it to LAYERS (tests/test_imports.py) in a layer from 'bottom' to 'top'",
        "fresh is in no layer: add it to LAYERS (tests/test_imports.py) in a layer from 'middle' to 'top'",
        "stuck is in no layer: add it to LAYERS (tests/test_imports.py) in a layer from 'top' to 'top'"]
    assert unplaced({**edges, "nvgg.errors": {"nvgg.stuck"}}, layers)[-1] == (
        "stuck is in no layer: add it to LAYERS (tests/test_imports.py) nowhere: it imports layer 'top' and layer "
        "'bottom' imports it; cut one of those imports")


def test_no_arrow_back_up():
    """Each unit in one layer and no import of a higher layer: the layers are the design's (DESIGN.md),
    from the data and the models up through kernels, backends, strategies, the data path, rows and
    the commands. A unit circle can then only lie inside one layer: none there either."""
    edges = graph()
    assert {"kernels", "profiles"} <= units(edges)["backends"]  # the walk sees subpackages' imports
    assert unplaced(edges, LAYERS) == []
    assert arrows_up(edges, LAYERS) == []
    assert cycles(units(edges)) == []


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
