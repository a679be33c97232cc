"""The package's layering rule: a module imports only from its own layer or lower ones."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "helpers"
LAYERS = [  # lowest first, as listed in helpers/__init__.py
    {"helpers.config", "helpers.errors", "helpers.files", "helpers.prompts", "helpers.answer_text",
     "helpers.values"},
    {"helpers.models"},
    {"helpers.results"},
    {"helpers.knowledge"},
    {"helpers.strategies"},
    {"helpers.evaluation"},
    {"helpers.lab"},
    {"helpers.cli", "helpers.demo", "helpers.__main__", "helpers"},
]


def layer_of(module: str) -> int:
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        prefix = ".".join(parts[:size])
        for number, names in enumerate(LAYERS):
            if prefix in names:
                return number
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and to the helpers docstring")


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("helpers"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("helpers")]
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: use absolute imports (from helpers.… import …)"
    return found


def test_lower_layers_never_import_higher_ones():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(relative.parts).removesuffix(".__init__")
        for imported in imports_of(path):
            if layer_of(imported) > layer_of(module):
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_every_module_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        layer_of(".".join(relative.parts).removesuffix(".__init__"))


def module_graph() -> dict[str, set[str]]:
    """Module -> the helpers modules it imports (at the top or inside a function)."""
    modules = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}


def test_no_import_circles():
    graph, circles = module_graph(), []

    def visit(module: str, path: list[str], done: set[str]) -> None:
        for imported in sorted(graph[module]):
            if imported in path:
                circles.append(" -> ".join(path[path.index(imported):] + [imported]))
            elif imported not in done:
                visit(imported, path + [imported], done)
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module], done)
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_module_above_400_lines_and_no_class_above_200():
    long_modules = {path.relative_to(PACKAGE).as_posix(): n for path in PACKAGE.rglob("*.py")
                    if (n := len(path.read_text().splitlines())) > 400}
    long_classes = {f"{path.relative_to(PACKAGE).as_posix()}:{node.name}": node.end_lineno - node.lineno + 1
                    for path in PACKAGE.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 200}
    assert not long_modules and not long_classes, (long_modules, long_classes)
