"""The house stays the way docs/architecture.md draws it: imports go one way.

Every import of every module under emil/ counts, wherever it is written (module level, inside a
function, under ``TYPE_CHECKING``): a circle hidden in a function is still a circle. Checked:

- no import circle between modules, nor between packages (``emil.<package>`` and the top-level
  modules as nodes), nor between the bot module's JS files;
- the runtime and the offline tools never import the shipped doubles (emil.testing): only the
  demo and the doubles themselves do, and the tool scripts in tools/ choose them;
- the runtime never imports the sandbox (emil.sandbox: the embedded server, scripted players);
- no module outside emil.model names a model family (emil.model.family.DEFAULT_FAMILY is the
  name for "the default one");
- every package's ``__init__`` says what it owns.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from emil.model.family import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
EMIL = ROOT / "emil"
JS = EMIL / "world" / "js"

MAY_IMPORT_DOUBLES = frozenset({"emil.testing", "emil.demo"})
"""Packages that may import emil.testing (the demo runs on the doubles)."""

MAY_IMPORT_SANDBOX = frozenset({"emil.sandbox", "emil.demo", "emil.testing", "emil.bench", "emil.replay"})
"""Packages that may import emil.sandbox (the embedded server, scripted players): the demo,
the doubles' rigs, the play bench and ``replay --world embedded``; the runtime never does."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in EMIL.rglob("*.py") if "node_modules" not in p.parts}


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, known: Iterable[str]) -> list[str]:
    """The emil modules an import statement names (``from a import b`` may name module a.b)."""
    known = set(known)
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        if node.level:
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        targets = [module, *(f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known)]
    out = []
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target.startswith("emil") and target != name:
            out.append(target)
    return out


def module_graph() -> dict[str, set[str]]:
    """emil module -> the emil modules it imports (anywhere in its text)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                deps.update(_imported(name, path, node, modules))
        graph[name] = deps
    return graph


def package_of(module: str) -> str:
    """``emil.agent.loop`` -> ``emil.agent``; a top-level module is its own node."""
    parts = module.split(".")
    if len(parts) >= 2 and (EMIL / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def package_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {package_of(m): set() for m in modules}
    for module, deps in modules.items():
        for dep in deps:
            if package_of(dep) != package_of(module) and dep != "emil":
                graph[package_of(module)].add(package_of(dep))
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _edges_within(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    return [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component]


def test_circles_are_found() -> None:
    """The detector itself: a circle of three and one of two are reported, a chain is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(circles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_imports_are_found_wherever_they_are_written(tmp_path: Path) -> None:
    """A relative import, an import inside a function and one under TYPE_CHECKING all count."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from emil.config import Settings\n"
        "def f():\n    from . import tool\n    import emil.world.bridge\n"
    )
    path = EMIL / "world" / "actions.py"
    known = {"emil.config", "emil.world", "emil.world.tool", "emil.world.bridge", "emil.world.actions"}
    found = {d for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
             for d in _imported("emil.world.actions", path, node, known)}
    assert found == {"emil.config", "emil.world", "emil.world.tool", "emil.world.bridge"}


def test_no_module_import_circles() -> None:
    graph = module_graph()
    found = circles(graph)
    assert not found, "\n".join(", ".join(_edges_within(graph, c)) for c in found)


def test_no_package_import_circles() -> None:
    graph = package_graph(module_graph())
    found = circles(graph)
    assert not found, "\n".join(", ".join(_edges_within(graph, c)) for c in found)


def test_only_the_demo_imports_the_doubles() -> None:
    """emil.testing holds doubles; the runtime, replay and the offline tools never name one
    (a tool script in tools/ may hand one in, as the summariser of a sweep)."""
    graph = module_graph()
    wrong = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        for d in deps
        if package_of(d) == "emil.testing" and package_of(m) not in MAY_IMPORT_DOUBLES
    )
    assert not wrong, wrong


def test_the_runtime_never_imports_the_sandbox() -> None:
    """The embedded server and the scripted players are a rig: the demo, the doubles, the play
    bench and replay's ``--world embedded`` use them, the runtime never does."""
    graph = module_graph()
    wrong = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        for d in deps
        if package_of(d) == "emil.sandbox" and package_of(m) not in MAY_IMPORT_SANDBOX
    )
    assert not wrong, wrong


_FAMILY_NAMES = frozenset(f.name for f in FAMILIES)


def _family_literals(path: Path) -> list[str]:
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip().lower() in _FAMILY_NAMES:
            hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return hits


def test_only_the_model_package_names_a_family() -> None:
    hits = [h for name, path in _modules().items() if package_of(name) != "emil.model" for h in _family_literals(path)]
    assert not hits, hits


def test_a_family_literal_is_found(tmp_path: Path) -> None:
    probe = ROOT / "tests" / "unit" / "_family_probe.py"
    assert not probe.exists()
    try:
        probe.write_text('TOKENIZER = "qwen3.6"\nOTHER = "Qwen/Qwen3.6-35B-A3B"\n', encoding="utf-8")
        assert [h.rsplit(": ", 1)[1] for h in _family_literals(probe)] == ["'qwen3.6'"]
    finally:
        probe.unlink()


@pytest.mark.parametrize("package", sorted(p.parent for p in EMIL.rglob("__init__.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_package_says_what_it_owns(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc.split()) >= 8, f"{package.relative_to(ROOT)}/__init__.py needs a docstring saying what it owns"


_REQUIRE = re.compile(r"""require\(\s*['"]\./([\w.-]+?)(?:\.js)?['"]\s*\)""")


def js_graph() -> dict[str, set[str]]:
    """JS file -> the bot module's files it requires (relative requires, anywhere in the file)."""
    files = {p.stem: p for p in JS.glob("*.js")}
    return {
        name: {m for m in _REQUIRE.findall(path.read_text(encoding="utf-8")) if m in files and m != name}
        for name, path in files.items()
    }


def test_no_js_require_circles() -> None:
    graph = js_graph()
    assert graph["emil_actions"] >= {"emil_act_common"}  # the pattern finds requires
    found = circles(graph)
    assert not found, "\n".join(", ".join(_edges_within(graph, c)) for c in found)


def drawn_layers() -> dict[str, int]:
    """docs/architecture.md's picture of the layers: ``emil.<package>`` -> its line's number."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```layers picture"
    layers: dict[str, int] = {}
    for line in block.group(1).splitlines():
        number, *names = line.split()
        for name in names:
            assert f"emil.{name}" not in layers, f"{name} is drawn twice"
            layers[f"emil.{name}"] = int(number)
    return layers


def downward_violations(graph: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """Imports that do not go to a lower line of the picture."""
    return sorted(
        f"{a} (line {layers[a]}) -> {b} (line {layers[b]})"
        for a, deps in graph.items() for b in deps
        if a in layers and b in layers and layers[b] >= layers[a]
    )


def test_the_layer_check_finds_sideways_and_upward_imports() -> None:
    layers = {"a": 2, "b": 1, "c": 1}
    assert downward_violations({"a": {"b"}, "b": set(), "c": set()}, layers) == []
    assert downward_violations({"a": set(), "b": {"c"}, "c": {"a"}}, layers) == [
        "b (line 1) -> c (line 1)", "c (line 1) -> a (line 2)",
    ]


def test_the_packages_import_only_downward_as_architecture_md_draws_them() -> None:
    graph = {p: {d for d in deps if d != "emil"} for p, deps in package_graph(module_graph()).items() if p != "emil"}
    layers = drawn_layers()
    assert sorted(set(graph) - set(layers)) == [], "packages missing from the picture in docs/architecture.md"
    assert sorted(set(layers) - set(graph)) == [], "the picture in docs/architecture.md names packages that do not exist"
    assert downward_violations(graph, layers) == []


def test_config_is_at_the_bottom() -> None:
    """The settings are read by every package and import none of them (only the exceptions):
    what a setting names that a package above owns is checked by that package
    (emil.config.checks)."""
    graph = package_graph(module_graph())
    assert graph["emil.config"] <= {"emil.exceptions"}, sorted(graph["emil.config"])
    assert drawn_layers()["emil.config"] <= 1


@pytest.mark.parametrize("entry", ["emil.cli", "tools/check_tool_calls.py"])  # tools/soak.py: via emil.testing.soak
def test_the_entry_points_load_every_settings_check(entry: str) -> None:
    """A name a setting holds is never let through unchecked: the command line, and every tool
    script that reads settings itself, imports every owner of a check before it reads them."""
    load = f"import {entry}" if entry.startswith("emil") else f"import runpy\nrunpy.run_path({entry!r})"
    probe = f"{load}\nfrom emil.config.checks import OWNERS, registered\nprint(sorted(set(OWNERS) - registered()))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_no_module_is_imported_by_a_name_in_a_string() -> None:
    """``importlib.import_module`` and ``__import__`` hide an import from the checks above (the
    command line once loaded replay that way): every import is a statement."""
    hidden = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                fn = ast.unparse(node.func)
                if fn in ("importlib.import_module", "import_module", "__import__"):
                    hidden.append(f"{name}: {ast.unparse(node)}")
    assert not hidden, hidden


def _body_shape(tree: ast.AST, name: str) -> tuple[list[str], list[str]]:
    """The ``run_tool`` definitions of one module that do not have the body's one signature, and
    its ``__getattr__`` definitions."""
    wrong, forwarders = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
            if node.name == "run_tool":
                args = [(a.arg, ast.unparse(a.annotation) if a.annotation else "") for a in node.args.args]
                rest = node.args.kwonlyargs or node.args.vararg or node.args.kwarg
                returns = ast.unparse(node.returns) if node.returns else ""
                if (not isinstance(node, ast.AsyncFunctionDef) or rest
                        or args != [("self", ""), ("call", "ToolCall"), ("turn", "TurnContext")] or returns != "Outcome"):
                    wrong.append(f"{name}:{node.lineno}: {ast.unparse(node.args)} -> {returns}")
            elif node.name == "__getattr__":
                forwarders.append(f"{name}:{node.lineno}")
    return wrong, forwarders


def test_emils_body_has_one_run_tool_signature_and_no_forwarding() -> None:
    """One protocol runs a tool call as Emil (emil.world.port.WorldPort): every ``run_tool`` in
    the package is ``async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome``,
    and a wrapper gets what it needs from below through that protocol or its constructor, never
    through ``__getattr__`` (the doubles in emil.testing may)."""
    wrong, forwarders = [], []
    for name, path in _modules().items():
        w, f = _body_shape(ast.parse(path.read_text(encoding="utf-8")), name)
        wrong += w
        forwarders += [] if name.startswith("emil.testing") else f
    assert not wrong, wrong
    assert not forwarders, forwarders


def test_the_body_shape_check_finds_a_second_signature_and_a_forwarder() -> None:
    tree = ast.parse(
        "class W:\n"
        "    async def run_tool(self, call: ToolCall, *, limit_s: float) -> Outcome: ...\n"
        "    def __getattr__(self, name): ...\n"
        "class V:\n"
        "    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome: ...\n"
    )
    wrong, forwarders = _body_shape(tree, "m")
    assert len(wrong) == 1 and "limit_s" in wrong[0]
    assert forwarders == ["m:3"]
