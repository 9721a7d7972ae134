"""The names of scopes and memory types, once, as typing literals (standard library only: the CLI builds its
argument parser from them without loading pydantic). `models.Scope` and `models.MemoryType` are the same
names as enums; tests/test_architecture.py holds the two equal."""

from __future__ import annotations

from typing import Literal, get_args

ScopeName = Literal["session", "project", "user"]
ScopeOrAll = Literal["all", "session", "project", "user"]
PromotionTarget = Literal["project", "user"]
MemoryTypeName = Literal["episodic", "semantic", "procedural", "working"]

SCOPES: tuple[str, ...] = get_args(ScopeName)
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryTypeName)
