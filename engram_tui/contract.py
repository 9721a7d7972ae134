"""What the screens and the command palette may ask of the app (harlequin's pattern: the UI parts depend on a
contract, not on the app class, so nothing imports the app back)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Protocol


class EngramAppApi(Protocol):
    service: Any
    project: str | None
    session: str | None
    history_path: Path | None
    last_error: str | None
    selected_id: str | None
    mask_db_times: bool

    def now(self) -> datetime: ...

    def call_started(self, tag: str) -> int: ...

    def call_finished(self, token: int) -> None: ...

    def action_mode(self, mode: str) -> None: ...

    def run_screen_action(self, mode: str, action: str) -> None: ...

    def action_help(self) -> None: ...

    def open_sync(self) -> None: ...

    def load_demo(self) -> None: ...
