"""Which project a folder maps to, and why (issue #32: the repository, not the folder)."""

from __future__ import annotations

from pathlib import Path

from .api import api
from .core import MemoryCore
from .models import Adoption, ProjectIdentityInfo


@api
def project_identity(core: MemoryCore, project: str) -> ProjectIdentityInfo:
    """The project ``project`` (a folder) belongs to: its database, where its store lives, what names it (the
    origin URL, the root commit, or the folder), and what was adopted into it."""
    ident = core.scopes.identity(project)
    store = core.project_store(
        project
    )  # opened (and any old folder store adopted) now, not at the first write
    assert store is not None
    return ProjectIdentityInfo(
        folder=str(Path(project).expanduser().resolve()),
        root=ident.root,
        database=ident.key,
        kind=ident.kind,
        source=ident.source,
        reason=ident.reason(),
        store_dir=str(ident.store_dir(core.home)),
        git_dir=ident.git_dir,
        adoptions=[Adoption(**a) for a in core.scopes.adoptions if a["into"] == ident.key],
    )
