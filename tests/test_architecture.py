"""Rules of the layout that a reviewer would otherwise have to remember."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_engram_core_never_imports_a_ui_toolkit() -> None:
    modules = sorted(p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
                     for p in (ROOT / "engram_core").rglob("*.py") if p.name != "__main__.py")
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('textual', 'textual_plotext', 'rich.live'))\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


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
                        isinstance(t, ast.Name) and ("EXAMPLE" in t.id or "PLACEHOLDER" in t.id) for t in node.targets):
                    exempt |= {id(n) for n in ast.walk(node.value)}
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in exempt
                        and statement.search(node.value)):
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
