"""What `engram doctor` asks the daemon: stores open and at the current schema, permissions, disk, embeddings."""

from __future__ import annotations

import os
import stat

from .api import api
from .core import MemoryCore
from .models import HealthCheck, HealthReport
from .storage import migrations


@api
def health(core: MemoryCore) -> HealthReport:
    """What `engram doctor` asks the daemon: stores open and at the current schema, permissions, sizes."""
    latest = migrations()[-1][0]
    checks: list[HealthCheck] = []
    for store in core.scopes.open_stores():
        version = store.schema_version()
        checks.append(
            HealthCheck(
                name=f"store {store.scope.value}/{store.database}",
                ok=version == latest,
                detail=f"schema v{version}, {len(store.summaries)} searchable memories",
                fix=None if version == latest else "restart the daemon so migrations run (engram stop)",
            )
        )
    home = core.home
    paths = [
        home,
        home / "user.db",
        home / "sessions.db",
        *(d for _, st in core.scopes.open_projects() if (d := core.scopes.store_dir_of(st)) is not None),
    ]
    loose = []
    for path in paths:
        if not path.exists():
            continue
        for dirpath, dirs, files in os.walk(path) if path.is_dir() else [(str(path.parent), [], [path.name])]:
            for name in [*dirs, *files]:
                mode = stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode)
                if mode & 0o077:
                    loose.append(f"{os.path.join(dirpath, name)} ({oct(mode)})")
        if stat.S_IMODE(os.stat(path).st_mode) & 0o077:
            loose.append(f"{path} ({oct(stat.S_IMODE(os.stat(path).st_mode))})")
    checks.append(
        HealthCheck(
            name="permissions",
            ok=not loose,
            detail="owner-only" if not loose else f"readable by others: {', '.join(loose[:5])}",
            fix=None if not loose else f"chmod -R go-rwx {home}",
        )
    )
    usage = os.statvfs(home)
    free_mb = usage.f_bavail * usage.f_frsize / 2**20
    checks.append(
        HealthCheck(
            name="disk",
            ok=free_mb > 200,
            detail=f"{free_mb:.0f} MiB free under {home}",
            fix=None if free_mb > 200 else "free some disk space: writes fail when it is full",
        )
    )
    emb_ok = bool(getattr(core.embedder, "available", False))
    checks.append(
        HealthCheck(
            name="embeddings",
            ok=emb_ok,
            detail=core.embedder.name,
            fix=None if emb_ok else "recall runs on BM25 only; check embedding_provider",
        )
    )
    return HealthReport(ok=all(c.ok for c in checks), checks=checks)
