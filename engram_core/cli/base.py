"""What every `engram` command shares: exit codes, a one-line error, JSON output, the daemon client, the
project a command is about."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def die(message: str, code: int = EXIT_ERROR) -> NoReturn:
    print(f"engram: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def emit(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def daemon_client(args: argparse.Namespace, *, start: bool = True) -> Any:
    from ..wire.client import connect

    return connect(getattr(args, "home", None), start=start)


def project_of(args: argparse.Namespace) -> str:
    return str(Path(args.project or os.getcwd()).expanduser().resolve())


def split_tags(raw: str | None) -> list[str]:
    return [t.strip() for t in (raw or "").split(",") if t.strip()]


def short(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
