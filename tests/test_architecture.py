"""Rules of the layout that a reviewer would otherwise have to remember."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


FRONT_ENDS = {"cli", "mcp", "daemon", "wire"}


def test_layering_contracts_hold() -> None:
    """The import-linter contracts in pyproject.toml: function-level imports count as much as module-level ones."""
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_every_module_of_engram_core_has_a_layer() -> None:
    """A new module must be placed: a front end package, or a core module the "core" contract constrains."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "core")
    listed = {m.removeprefix("engram_core.") for m in contract["source_modules"]}
    on_disk = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "engram_core").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert on_disk - FRONT_ENDS - listed == set(), "add the new module to the core contract in pyproject.toml"
    assert listed - on_disk == set(), "the core contract lists a module that no longer exists"
    assert on_disk >= FRONT_ENDS


def test_front_ends_build_no_surrealql() -> None:
    """Front ends go through the service; the only SurrealQL they hold is text shown to a person to edit
    (a constant named *EXAMPLE* or *PLACEHOLDER*, run through the validator like anything typed)."""
    import ast

    statement = re.compile(r"^\s*(SELECT|UPDATE|CREATE|DELETE|UPSERT|RELATE|DEFINE|INSERT|REMOVE)\s+[\w$*(]")
    offenders = []
    for folder in ("engram_tui", "hooks"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            exempt: set[int] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and ("EXAMPLE" in t.id or "PLACEHOLDER" in t.id)
                    for t in node.targets
                ):
                    exempt |= {id(n) for n in ast.walk(node.value)}
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in exempt
                    and statement.search(node.value)
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}")
    assert offenders == []


def test_data_dir_and_store_files_are_owner_only(service, project_dir: Path) -> None:  # noqa: ANN001
    from engram_core.models import MemoryIn

    service.store(MemoryIn(content="permission check"), project=str(project_dir))
    roots = [service.home, project_dir / ".claude" / "engram"]
    for root in roots:
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700, root
    service.close()
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for d in dirs:
                assert stat.S_IMODE(os.stat(os.path.join(dirpath, d)).st_mode) == 0o700, d
            for f in files:
                mode = stat.S_IMODE(os.stat(os.path.join(dirpath, f)).st_mode)
                assert mode & 0o077 == 0, (f, oct(mode))


def test_every_import_inside_engram_resolves() -> None:
    """Imports inside functions are only tried when the function runs: a moved module must not leave one dangling."""
    import ast
    import importlib.util

    missing = []
    for package in ("engram_core", "engram_tui"):
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            here = parts[:-1]  # the package the module is in (for __init__, the package itself)
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.split(".")[0] in ("engram_core", "engram_tui"):
                    target = node.module
                else:
                    continue
                if importlib.util.find_spec(target) is None:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target}")
    assert missing == []


def test_the_stand_alone_scripts_find_the_same_data_root(tmp_path: Path) -> None:
    """The hook and the MCP bridge run by file path without the package, so they repeat `paths.engram_home`."""
    code = (
        "import importlib.util, sys\n"
        "from engram_core.paths import engram_home\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location('script', path)\n"
        "    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "    print(mod.home() == str(engram_home()))\n"
    )
    scripts = [
        str(ROOT / "hooks" / "engram_hook.py"),
        str(ROOT / "hooks" / "run_hook.py"),
        str(ROOT / "engram_core" / "mcp" / "bridge.py"),
    ]
    for env in (
        {"HOME": str(tmp_path)},
        {"HOME": str(tmp_path), "ENGRAM_HOME": "~/elsewhere/data"},
        {"HOME": str(tmp_path), "ENGRAM_HOME": str(tmp_path / "abs")},
    ):
        full = {k: v for k, v in os.environ.items() if k != "ENGRAM_HOME"} | env
        out = subprocess.run(
            [sys.executable, "-c", code, *scripts],
            capture_output=True,
            text=True,
            env=full,
            cwd=ROOT,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["True"] * len(scripts), env


def test_scope_and_type_names_are_one_vocabulary() -> None:
    from engram_core.models import MemoryType, Scope
    from engram_core.vocabulary import MEMORY_TYPES, SCOPES

    assert tuple(Scope) == SCOPES
    assert tuple(MemoryType) == MEMORY_TYPES
