"""Project identity and sync (issue #32): what `engram status` and `engram sync` answer."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class Adoption(BaseModel):
    """A folder's store whose memories moved into its repository's store (once)."""

    source_dir: str
    into: str
    memories: int
    message: str


class ProjectIdentityInfo(BaseModel):
    """Which project a folder maps to, and why."""

    folder: str
    root: str
    database: str
    kind: Literal["origin", "root-commit", "folder"]
    source: str
    reason: str
    store_dir: str
    git_dir: str | None = None
    adoptions: list[Adoption] = Field(default_factory=list)


SyncChannel = Literal["personal", "team"]


class SyncReport(BaseModel):
    """What one `engram sync` (or `sync init`, `sync compact`) did."""

    channel: SyncChannel
    remote: str
    machine: str
    pushed: int = 0  # records written into change files here
    change_files: int = 0  # change files committed here
    pulled: int = 0  # records from other machines applied here
    unchanged: int = 0  # records from elsewhere this machine already had
    conflicts: int = 0  # memories changed on both sides (resolved by the stated rule)
    erased: int = 0  # memories erased here because they were erased (or unshared) elsewhere
    excluded: int = 0  # memories that stay on this machine (opted out, private, prompts)
    rejected: int = 0  # unreadable records from the remote, left out
    offline: bool = False  # the remote could not be reached: the change files wait for the next sync
    queued_files: int = 0  # change files committed here and not yet pushed
    compacted: bool = False
    pruned_remote: bool = False  # after a compaction: the remote's unreachable objects were pruned too
    steps: list[str] = Field(default_factory=list)
    seconds: float = 0.0


class SyncState(BaseModel):
    """One sync channel's state on this machine."""

    channel: SyncChannel
    configured: bool
    remote: str | None = None
    machine: str | None = None
    last_sync: datetime | None = None
    pending_changes: int = 0  # memories changed here since the last sync
    queued_files: int = 0  # change files waiting for the remote


class SyncOverview(BaseModel):
    channels: list[SyncState]
    shared: int = 0  # memories marked shared (team) in the projects open here
