"""The house (docs/design.md): the pipeline is the file list, and imports only go down it.

The package is a folder per stage; only the entry points and the small shared spine stay at
its top. Each stage imports only the stages below it, so there is no cycle to untangle and a
later pass never reaches back into an earlier one. Heavy dependencies stay behind one door
each: SymPy in `symbolic/`, NumPy in `backend/`, torch in `pytorch/` and the torch backend,
jax in the jax backend, click in `cli/`. Imports inside functions count too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "shapecheck"

# What may stay at the top: the entry points and the spine every stage shares.
TOP = {"__init__", "__main__", "_version", "api", "loader", "config", "options", "fileio",
       "depth", "records", "record_inits", "record_inits_rest", "testing", "notebook"}

# The pipeline, lowest first: a unit (a folder, or a module at the top) imports only units of
# the layers before its own.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer.split()) for layer in (
    "record_inits record_inits_rest",  # the records' __init__ methods, compiled ahead (generated)
    "i18n depth _version records",  # the words, the recursion room, the version, cheap dataclasses
    "messages fileio options",  # diagnostics, the code registry, fixes, suppression; file I/O
    "config syntax",            # configuration; text -> syntax tree
    "symbolic",                 # every proof (the only door to SymPy)
    "check",                    # syntax tree -> checked program
    "meaning",                  # what the formula means
    "masks",                    # functions of positions: claims and conventions, proved
    "passes",                   # inference, fix checking, incremental re-checks
    "loader formats",           # load: every pass in order; verify's output formats
    "report backend",           # the report; the run (the only door to NumPy)
    "pytorch",                  # PyTorch: conformance, binding, the front end
    "lsp",                      # editors (a Python file is traced by the front end, in a worker)
    "api testing",              # the Python faces
    "cli notebook",             # the command line; the notebook's magics
    "__init__",                 # the package's lazy re-exports (and `%load_ext shapecheck`)
    "__main__",                 # python -m shapecheck
))
LAYER = {unit: index for index, layer in enumerate(LAYERS) for unit in layer}


def _unit(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imports(tree: ast.AST, folder: tuple[str, ...]) -> set[str]:
    """The units (first name under the package) that a file in ``folder`` imports."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names
                      if alias.name.startswith("shapecheck.")}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module != "shapecheck" and not (node.module or "").startswith("shapecheck."):
                    continue
                parts = node.module.split(".")[1:]
            else:
                parts = [*folder[:len(folder) - node.level + 1], *(node.module or "").split(".")]
                parts = [part for part in parts if part]
            found |= {parts[0]} if parts else {alias.name for alias in node.names}
    return found


def _imported_by(path: Path) -> set[str]:
    folder = path.parent.relative_to(PACKAGE).parts
    return _imports(ast.parse(path.read_text(encoding="utf-8")), folder) - {_unit(path)}


FILES = sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py"))


def test_the_top_holds_only_the_spine() -> None:
    assert {path.stem for path in PACKAGE.glob("*.py")} == TOP


def test_every_unit_has_its_layer() -> None:
    units = {_unit(PACKAGE / name) for name in FILES}
    assert units == set(LAYER), units ^ set(LAYER)


@pytest.mark.parametrize("name", FILES)
def test_imports_point_down_the_pipeline(name: str) -> None:
    path = PACKAGE / name
    above = {unit for unit in _imported_by(path) if LAYER.get(unit, 99) >= LAYER[_unit(path)]}
    assert not above, f"{name} imports {sorted(above)}, not below it (docs/design.md)"


@pytest.mark.parametrize("text, folder", [
    ("from ..loader import check_text", ("check",)),
    ("def f():\n    from ...cli import main", ("pytorch", "front")),
    ("import shapecheck.cli", ("backend",)),
    ("from .. import api", ("backend",)),
    ("from shapecheck.meaning import analyse", ("syntax",)),
])
def test_the_scan_sees_an_import_up(text: str, folder: tuple[str, ...]) -> None:
    unit = folder[0]
    assert any(LAYER[found] >= LAYER[unit] for found in _imports(ast.parse(text), folder) - {unit})


def test_the_scan_lets_the_way_down_pass() -> None:
    text = "from ..loader import check_path\nfrom . import runtime\nfrom .. import fileio"
    assert _imports(ast.parse(text), ("backend",)) == {"loader", "backend", "fileio"}


# Inside a stage, the same rule by module, lowest first: each file imports (at run time) only
# the ones before it. The budget names `Dim` for type checkers only.
WITHIN = {
    "symbolic": ("budget", "dims", "groebner", "counterexamples", "proofs", "builder", "unify",
                 "positions", "guards"),
    "check": ("program", "rules", "einsum", "gathers", "complex_values", "value_rules",
              "builtins", "indexing", "checker"),
    "messages": ("diagnostics", "codes", "suppress", "fixes"),
}


def _runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    checking_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                     and ast.unparse(node.test) == "TYPE_CHECKING" for inner in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and id(node) not in checking_only:
            found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return found


@pytest.mark.parametrize("folder, index", [(folder, index) for folder, order in WITHIN.items()
                                           for index in range(len(order))])
def test_a_stage_is_layered_inside(folder: str, index: int) -> None:
    order = WITHIN[folder]
    path = PACKAGE / folder / f"{order[index]}.py"
    assert _runtime_imports(path) <= set(order[:index])


@pytest.mark.parametrize("folder", sorted(WITHIN))
def test_every_module_of_a_layered_stage_has_its_place(folder: str) -> None:
    files = {path.stem for path in (PACKAGE / folder).glob("*.py")} - {"__init__"}
    assert files == set(WITHIN[folder])


# The heavy dependencies, each behind its door (imports inside functions count).
DOORS = {
    "sympy": lambda name: name.startswith("symbolic/"),
    "numpy": lambda name: name.startswith("backend/"),
    "torch": lambda name: name.startswith("pytorch/") or name == "backend/torch_backend.py",
    "jax": lambda name: name == "backend/jax_backend.py",
    "click": lambda name: name.startswith("cli/"),
    "IPython": lambda name: name == "notebook.py",
}


def _third_party(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("name", FILES)
def test_heavy_dependencies_stay_behind_their_doors(name: str) -> None:
    strays = {library for library in _third_party(PACKAGE / name) & set(DOORS)
              if not DOORS[library](name)}
    assert not strays, f"{name} imports {sorted(strays)} outside its room"


def test_verify_imports_neither_numpy_nor_torch(tmp_path: Path) -> None:
    # Nor what a correct spec does not need at start-up (issue 36): the fix verifier and
    # the editor's incremental checker, the other commands' modules, a JSON decoder, the
    # rules of subscripts, gathers, einsum and complex values, inference's unifier, the masks
    # pass's position questions, torch's guards, the Gröbner pass (and its heap), the codec of
    # a byte order mark, the inliner of functions of positions (the spec defines none), the
    # version (read by `--version` only).
    spec = tmp_path / "spec.attn"
    spec.write_text("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\nS = Q @ K.T\n", encoding="utf-8")
    code = ("import sys\nfrom shapecheck.cli import main\ntry:\n    main(['verify', sys.argv[1]])\n"
            "except SystemExit as done:\n    assert done.code == 0, done.code\n"
            "print(sorted({'numpy', 'torch', 'jax', 'click', 'sympy', 'shapecheck.passes.fixcheck',\n"
            "              'shapecheck.passes.incremental', 'json', 'shapecheck.cli.run',\n"
            "              'shapecheck.cli.conform', 'shapecheck.cli.report',\n"
            "              'shapecheck.symbolic.guards', 'shapecheck.symbolic.positions',\n"
            "              'shapecheck.symbolic.unify', 'shapecheck.check.indexing',\n"
            "              'shapecheck.check.gathers', 'shapecheck.check.complex_values',\n"
            "              'shapecheck.check.einsum', 'heapq', 'encodings.utf_8_sig',\n"
            "              'shapecheck.symbolic.groebner', 'shapecheck.syntax.functions',\n"
            "              'shapecheck._version'}\n"
            "             & set(sys.modules)))")
    shown = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True,
                           text=True, check=True).stdout
    assert shown.splitlines()[-1] == "['click', 'sympy']"


def test_verify_compiles_only_the_patterns_it_uses(tmp_path: Path) -> None:
    # Issue 36: the patterns for statement splitting after a syntax error, `noqa` directives,
    # sizes and a rebound name's versions are compiled on first use, not on every start.
    spec = tmp_path / "spec.attn"
    spec.write_text("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\nS = Q @ K.T\n", encoding="utf-8")
    lazy = {"shapecheck.syntax.parser": ["_scan", "_statement_start", "_defines", "_name",
                                         "_convention_place", "_head"],
            "shapecheck.messages.suppress": ["_file", "_line", "_token", "_code_like"],
            "shapecheck.options": ["_digits", "_size"],
            "shapecheck.messages.diagnostics": ["_version"],
            "shapecheck.syntax.invisible": ["_pattern"]}
    code = ("import sys\nfrom shapecheck.cli import main\ntry:\n    main(['verify', sys.argv[1]])\n"
            "except SystemExit as done:\n    assert done.code == 0, done.code\n"
            f"lazy = {lazy!r}\n"
            "print(sorted(f'{m}.{f}' for m, fs in lazy.items() for f in fs\n"
            "             if getattr(sys.modules[m], f).cache_info().currsize))")
    shown = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True,
                           text=True, check=True).stdout
    assert shown.splitlines()[-1] == "[]"


@pytest.mark.parametrize(("line", "built"), [("S = Q @ K.T", "[]"),
                                              ("S = Q @ K.transpose(0, 1)", "['FUNCTIONS',"
                                               " 'METHODS', '_ATTRIBUTES', '_DOTTED_METHODS']")])
def test_verify_makes_the_spelling_tables_only_for_a_spelling(tmp_path: Path, line: str,
                                                              built: str) -> None:
    # Issue 36: PyTorch's ~200 spellings are made into records when a spec first uses one.
    spec = tmp_path / "spec.attn"
    spec.write_text(f"dim N, d\ninput Q: [N, d]\ninput K: [N, d]\n{line}\n", encoding="utf-8")
    code = ("import sys\nfrom shapecheck.cli import main\ntry:\n    main(['verify', sys.argv[1]])\n"
            "except SystemExit as done:\n    assert done.code == 0, done.code\n"
            "print(sorted(sys.modules['shapecheck.syntax.spellings']._TABLES))")
    shown = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True,
                           text=True, check=True).stdout
    assert shown.splitlines()[-1] == built


# The run path only goes down (load -> bind -> plan -> execute -> report): what executes a
# spec, and what binds a real function to one, read specs through `loader` and never call
# back up into the faces of the package.
FACE = {"api", "cli", "testing"}
RUN_PATH = sorted(name for name in FILES
                  if name.startswith(("backend/", "pytorch/")) or name == "loader.py")


@pytest.mark.parametrize("name", RUN_PATH)
def test_the_run_path_imports_nothing_above_it(name: str) -> None:
    assert not _imported_by(PACKAGE / name) & FACE


# Public paths: what users import, and every import the docs show, keep working.
PUBLIC = [
    "from shapecheck.api import check_text, check_path, check_bytes",
    "from shapecheck.backend import compile_spec, load, CompiledSpec, open_npy, open_npz",
    "from shapecheck.backend.differential import disagreements",
    "from shapecheck.testing import assert_conforms",
    "from shapecheck.cli import main",
    "from shapecheck import i18n, fileio, report, formats, symbolic, meaning",
    "import shapecheck; shapecheck.check_text, shapecheck.compile_spec, shapecheck.Program, "
    "shapecheck.Diagnostic, shapecheck.Span, shapecheck.OptionError, shapecheck.RunError",
]


def _doc_imports() -> list[str]:
    root = PACKAGE.parent
    found: set[str] = set()
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for line in doc.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line.startswith(("from shapecheck", "import shapecheck")) and "(" not in line:
                found.add(line.split("  #")[0].strip())
    return sorted(found)


@pytest.mark.parametrize("statement", PUBLIC + _doc_imports())
def test_public_paths_keep_working(statement: str) -> None:
    subprocess.run([sys.executable, "-c", statement], check=True, capture_output=True)


def test_the_console_script_is_the_cli() -> None:
    from importlib.metadata import entry_points

    (script,) = [entry for entry in entry_points(group="console_scripts")
                 if entry.name == "shapecheck"]
    assert script.value == "shapecheck.cli:main"
    assert callable(script.load())


# `_` means "this module alone uses it" (issue 27): no module imports another module's
# `_private` name, neither by name (`from .facts import _Info`) nor through the module
# (`from . import facts` then `facts._x`). What a package's modules share is public inside
# it and listed in its `__init__`. Dunder names (`__version__`) are not private.

def _private_name(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_modules() -> dict[str, bool]:
    """Every module of the package by dotted name -> whether it is a package's __init__."""
    root = Path(__file__).resolve().parent.parent / "shapecheck"
    found: dict[str, bool] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = is_package
    return found


def _private_source(module: str, is_package: bool, node: object) -> str:
    """The absolute module an ImportFrom in ``module`` names."""
    import ast

    assert isinstance(node, ast.ImportFrom)
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private_uses(module: str, is_package: bool, text: str,
                  known: dict[str, bool]) -> list[str]:
    """Each private name of another shapecheck module that ``module``'s text uses."""
    import ast

    tree = ast.parse(text)
    found: list[str] = []
    bound: dict[str, str] = {}  # a local name -> the shapecheck module it names
    for node in ast.walk(tree):  # imports inside functions count too
        if isinstance(node, ast.ImportFrom):
            source = _private_source(module, is_package, node)
            if source != "shapecheck" and not source.startswith("shapecheck."):
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in known:  # a module, not a name
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif _private_name(alias.name) and source != module:
                    found.append(f"{module}:{node.lineno} from {source} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "shapecheck":  # `import a.b` binds `a`
                    bound[alias.asname or "shapecheck"] = (alias.name if alias.asname
                                                           else "shapecheck")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private_name(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                target = ".".join([bound[value.id], *reversed(chain)])
                if target in known and target != module:
                    found.append(f"{module}:{node.lineno} {target}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_name() -> None:
    root = Path(__file__).resolve().parent.parent
    known = _private_modules()
    found = []
    for module, is_package in sorted(known.items()):
        path = root.joinpath(*module.split("."), *(["__init__"] if is_package else []))
        text = path.with_suffix(".py").read_text(encoding="utf-8")
        found += _private_uses(module, is_package, text, known)
    assert not found, ("a `_name` is its own module's: make what modules share public and "
                       "list it in the package's __init__\n" + "\n".join(found))


@pytest.mark.parametrize("text, expected", [
    ("from .facts import Axis, _Info", ["shapecheck.meaning.follow:1 from "
                                        "shapecheck.meaning.facts import _Info"]),
    ("from . import facts\ndef f():\n    return facts._x",
     ["shapecheck.meaning.follow:3 shapecheck.meaning.facts._x"]),
    ("def f():\n    from ..symbolic import budget as b\n    return b._expand(1)",
     ["shapecheck.meaning.follow:3 shapecheck.symbolic.budget._expand"]),
    ("import shapecheck.meaning.facts\nshapecheck.meaning.facts._Info",
     ["shapecheck.meaning.follow:2 shapecheck.meaning.facts._Info"]),
    ("from .facts import Info, __doc__\nfrom . import facts\nfacts.Info\nself._own", []),
])
def test_the_private_scan_sees_a_private_name_cross(text: str, expected: list[str]) -> None:
    assert _private_uses("shapecheck.meaning.follow", False, text, _private_modules()) == expected
