"""A clock the service reads instead of datetime.now(), so tests and snapshots can freeze time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock(Clock):
    def __init__(self, at: datetime) -> None:
        self.at = at if at.tzinfo else at.replace(tzinfo=UTC)

    def now(self) -> datetime:
        return self.at

    def advance(self, **kwargs: float) -> None:
        self.at = self.at + timedelta(**kwargs)
