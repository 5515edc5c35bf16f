"""The shape of the package, checked from its source (no import runs): the layers are the package's folders
(``rules/`` the core, ``adapters/`` and ``hooks/`` the I/O, ``stages/`` one run, the rest Airflow glue and entry
points), every module imports only from its own layer or below (core <- I/O <- run <- Airflow / entry points), no two
modules share a name, the core touches no environment, file or process, and no imports go round in a circle.
Imports inside functions count too. The local bed (testbed/) is not part of the package, and nothing under
plugins/ imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "plugins" / "mm2_failover"

#: the layer of each folder of the package (issue 51: the layers are the folders); a module at the package's top, or
#: in any other folder (operators/, sensors/, jobs/, ui/), is Airflow glue or an entry point
FOLDER_LAYERS = {
    "rules": "core",  # pure rules: no I/O
    "adapters": "io",  # talks to Kafka, the file system or an object store, Spark, or reads the environment
    "hooks": "io",  # Airflow's hook over the Kafka adapter (the provider layout's folder)
    "stages": "run",  # one run: its context and its stages (one module per stage)
}
ORDER = ["core", "io", "run", "top"]


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG).with_suffix("")
        if rel.name == "__init__":
            continue
        out[".".join(rel.parts)] = p
    return out


def imports_of(path: Path) -> set[str]:
    """mm2_failover modules imported anywhere in ``path`` (``from mm2_failover import x`` counts as module x when
    x is a module)."""
    names = set(modules())
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("mm2_failover."):
                    out.add(a.name.removeprefix("mm2_failover."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mm2_failover"):
            base = node.module.removeprefix("mm2_failover").lstrip(".")
            for a in node.names:
                cand = f"{base}.{a.name}" if base else a.name
                out.add(cand if cand in names else base)
    return {m for m in out if m}


def layer_of(module: str) -> str:
    folder, _, _ = module.rpartition(".")
    return FOLDER_LAYERS.get(folder.split(".")[0], "top") if folder else "top"


def test_no_two_modules_share_a_name():
    """Issue 51: ``plan.py`` and ``stages/plan.py`` (and seven more) made importers invent aliases."""
    seen: dict[str, list[str]] = {}
    for m in modules():
        seen.setdefault(m.rpartition(".")[2], []).append(m)
    assert {n: ms for n, ms in seen.items() if len(ms) > 1} == {}


def test_every_folder_of_the_package_is_a_layer_or_glue():
    folders = {m.split(".")[0] for m in modules() if "." in m}
    glue = {
        "operators",
        "sensors",
        "jobs",
        "dags",  # the DAG factories
        "ui",  # an entry point: the plugin's pages (issue 51 item 1: app, pages, runs, access)
    }
    assert folders <= set(FOLDER_LAYERS) | glue, folders


def test_imports_only_go_down_the_layers():
    bad = []
    for m, path in modules().items():
        mine = ORDER.index(layer_of(m))
        for dep in imports_of(path):
            if dep in modules() and ORDER.index(layer_of(dep)) > mine:
                bad.append(f"{m} ({layer_of(m)}) imports {dep} ({layer_of(dep)})")
    assert bad == []


def test_no_import_circles():
    graph = {m: {d for d in imports_of(p) if d in modules() and d != m} for m, p in modules().items()}
    assert circles_of(graph) == []


def circles_of(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph`` (module -> the modules it imports) found by a depth-first walk."""
    seen, stack, cycles = set(), [], []

    def visit(m):
        if m in stack:
            cycles.append(stack[stack.index(m) :] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for d in sorted(graph[m]):
            visit(d)
        stack.pop()

    for m in sorted(graph):
        visit(m)
    return cycles


#: third-party modules the pure core may import: pure computation only (the offset-sync index's arrays)
CORE_MAY_IMPORT = {"numpy"}


def test_the_core_imports_only_the_standard_library_and_itself():
    """Issue 32: the pure rules depend on nothing that talks to a cluster, a file system or a framework."""
    bad = []
    for m in sorted(m for m in modules() if layer_of(m) == "core"):
        tree = ast.parse(modules()[m].read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                else []
            )
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "mm2_failover" and top not in CORE_MAY_IMPORT:
                    bad.append(f"{m} imports {name}")
    assert bad == []


#: what the core may not touch: the environment, files, processes, sockets (issue 51: "imports only the standard
#: library" let a module that sent SIGKILL, and one that listed a folder, pass as pure)
CORE_REFUSES_MODULES = {
    "os",
    "pathlib",
    "subprocess",
    "signal",
    "shutil",
    "socket",
    "tempfile",
    "glob",
    "multiprocessing",
}
CORE_REFUSES_CALLS = {"open", "exec", "eval", "input", "__import__"}


def test_the_core_calls_no_environment_file_or_process():
    bad = []
    for m in sorted(m for m in modules() if layer_of(m) == "core"):
        for node in ast.walk(ast.parse(modules()[m].read_text())):
            if isinstance(node, ast.Import):
                bad += [f"{m} imports {a.name}" for a in node.names if a.name.split(".")[0] in CORE_REFUSES_MODULES]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] in CORE_REFUSES_MODULES:
                    bad.append(f"{m} imports from {node.module}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CORE_REFUSES_CALLS:
                bad.append(f"{m} calls {node.func.id}() on line {node.lineno}")
    assert bad == []


def test_no_import_circles_in_the_local_bed():
    """Issue 32: testbed/bed.py and testbed/localenv.py imported each other (inside functions)."""
    bed = REPO / "testbed"
    mods = {p.stem: p for p in bed.glob("*.py")}
    graph = {}
    for m, p in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("testbed."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.ImportFrom) and node.module == "testbed":
                deps |= {a.name for a in node.names if a.name in mods}
        graph[m] = deps - {m}
    assert circles_of(graph) == []


def test_the_shipped_package_never_imports_the_local_bed():
    for m, path in modules().items():
        src = path.read_text()
        assert "import testbed" not in src and "from testbed" not in src, m


@pytest.mark.parametrize(
    "dag",
    [
        "mm2_failover_dag.py",
        "mm2_failover_rollback.py",
        "mm2_failover_drill.py",
        "mm2_sync_archive.py",
        "mm2_failover_readiness.py",
    ],
)
def test_dag_files_parse_fast_and_import_only_wiring(dag):
    code = (
        "import sys, time, importlib.util\n"
        f"sys.path.insert(0, {str(REPO / 'plugins')!r})\n"
        # Airflow and the providers are loaded before the DAG processor parses a file: time only this file
        "from airflow.sdk import DAG, task, Param, BaseSensorOperator\n"
        "import airflow.providers.apache.spark.operators.spark_submit\n"
        f"spec = importlib.util.spec_from_file_location('d', {str(REPO / 'dags' / dag)!r})\n"
        "m = importlib.util.module_from_spec(spec); t0 = time.process_time(); spec.loader.exec_module(m)\n"
        "print(round(time.process_time() - t0, 3))\n"
        "print(sorted(k for k in sys.modules if k.startswith('mm2_failover')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    seconds, mods = out.stdout.strip().splitlines()[-2:]
    assert float(seconds) < 0.3, f"{dag} took {seconds} s to parse"
    loaded = set(eval(mods))  # noqa: S307 - our own subprocess's output
    heavy = {
        "mm2_failover.stages.drain_check",
        "mm2_failover.stages.apply",
        "mm2_failover.adapters.kafka.cluster",
        "mm2_failover.adapters.kafka.java_bridge",
        "mm2_failover.adapters.kafka.kafka_errors",
        "mm2_failover.adapters.kafka.groups",
        "mm2_failover.stages.context",
        "mm2_failover.adapters.spark",
        "mm2_failover.jobs.checkpoint_pass",
        "mm2_failover.ui",
    }
    assert not loaded & heavy, sorted(loaded & heavy)


def test_no_dag_file_shares_a_name_with_a_module_of_the_package():
    """Issue 51: ``dags/mm2_failover.py`` had the package's own name and imported it only by sys.path's order."""
    names = {"mm2_failover"} | {p.stem for p in PKG.rglob("*.py")}
    assert not sorted(p.name for p in (REPO / "dags").glob("*.py") if p.stem in names)


def test_no_test_module_imports_another_test_module_or_a_conftest():
    """Issue 51 item 4: test helpers live in ``testbed/``; a test module imported from another one (or a conftest
    imported as a module) runs its tests' collection twice and hides what it shares."""
    import re

    bad = re.compile(r"^\s*(from|import)\s+(tests\.|test_\w+|conftest)\b", re.M)
    found = [
        f"{p.relative_to(REPO)}: {m.group(0).strip()}"
        for p in sorted((REPO / "tests").rglob("*.py"))
        for m in bad.finditer(p.read_text())
    ]
    assert not found, found


def test_imports_inside_functions_say_why_they_are_lazy():
    """Issue 51 item 4: imports go at the top of their module; one inside a function (nested ones included) says why
    it waits with ``# lazy: <reason>`` on its line, or on the first line of its block of consecutive imports (a module
    the DAG processor must not load at parse time, an optional or heavy package, an import circle...)."""
    bad = [line for m, path in sorted(modules().items()) for line in unexplained_lazy_imports(m, path.read_text())]
    assert not bad, "\n".join(bad)


def unexplained_lazy_imports(module: str, source: str) -> list[str]:
    """Each import inside a function of ``source`` whose line, and the first line of whose block of consecutive
    imports, lack ``# lazy:``."""
    lines, bad = source.splitlines(), []

    def said(node: ast.stmt) -> bool:  # any line of the statement (the formatter may wrap it around its comment)
        return "# lazy:" in "\n".join(lines[node.lineno - 1 : node.end_lineno])

    def check(body: list[ast.stmt], func: str | None) -> None:
        prev = head = None  # the previous statement when it is an import; the first import of the block
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if prev is None or node.lineno != prev.end_lineno + 1:
                    head = node
                if func and not said(node) and not said(head):
                    what = ", ".join(a.name for a in node.names)
                    what = what if isinstance(node, ast.Import) else f"{what} from {node.module}"
                    bad.append(
                        f"{module}:{node.lineno}: import {what} inside function {func}: move it to the top or say why "
                        "it is lazy with '# lazy: <reason>'"
                    )
                prev = node
                continue
            prev = None
            inner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field, None)
                if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                    check(stmts, inner)
            for part in [*(getattr(node, "handlers", None) or []), *(getattr(node, "cases", None) or [])]:
                check(part.body, inner)

    check(ast.parse(source).body, None)
    return bad
