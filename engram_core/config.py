"""Where Engram keeps its data and how it is configured.

Data: the user root is ``~/.claude/engram/`` (``ENGRAM_HOME`` overrides); a git repository's project store lives
under it in ``projects/`` (identity.py), a plain folder's in ``<project>/.claude/engram/``. Settings come from defaults, then the user file ``$ENGRAM_HOME/engram.local.md``,
then ``<project>/.claude/engram.local.md`` (per-project settings only, in the daemon), then ``ENGRAM_*``
environment variables (last wins); docs/configuration.md. Evolved values sit below every manual one (core.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from .paths import ENGRAM_MARKERS, ConfigError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) owner-only, or check the one that is there: memories and the socket live here.

    An existing directory Engram did not create is never chmodded (ENGRAM_HOME may point at a shared one such
    as /tmp): a symbolic link, a directory of another user, or one that others may write to or read is refused
    with a ConfigError, the same refusal whatever its mode (0755, 0777, 1777), empty or not. Only Engram's own
    directory (one holding its files) with loose permissions is made owner-only."""
    try:
        path.mkdir(parents=True, mode=PRIVATE_DIR_MODE)
        created = True
    except FileExistsError:  # there already (or a file, or a link to something that is not a directory)
        created = False
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(
            f"{path} is a symbolic link: Engram does not follow links in its data directories (they "
            "could make it change permissions elsewhere). Replace it with a real directory."
        )
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise ConfigError(
            f"{path} belongs to another user (uid {st.st_uid}): Engram keeps memories only in a "
            "directory of its own user. Point ENGRAM_HOME at one."
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        if not created:
            with os.scandir(path) as entries:
                names = {e.name for e in entries}
            if not names & set(ENGRAM_MARKERS):
                raise ConfigError(
                    f"{path} is not private (mode {oct(mode)}: other users may open it) and Engram "
                    "did not create it: an unsafe place for memories, and Engram does not change the "
                    "permissions of a directory that is not its own. Point ENGRAM_HOME at a new path "
                    "(Engram creates it owner-only) or at a private directory (chmod 700 it yourself)."
                )
        _chmod_nofollow(path, PRIVATE_DIR_MODE)  # made just now under a loose umask, or Engram's own
    return path


def ensure_private_child(parent: Path, name: str) -> Path:
    """A folder inside a data root that ensure_private_dir already checked: whatever is there is Engram's own
    (only its user can write in the parent), so it is made owner-only, never refused; a link is still refused.
    A hook that spooled while the daemon was down may have created it with the default umask."""
    path = parent / name
    with contextlib.suppress(FileExistsError):
        path.mkdir(exist_ok=True, mode=PRIVATE_DIR_MODE)
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise ConfigError(f"{path} is not a directory (a symbolic link or a file): remove it")
    _chmod_nofollow(path, PRIVATE_DIR_MODE)
    return path


def _chmod_nofollow(path: Path | str, mode: int) -> None:
    """chmod that refuses to go through a symbolic link (O_NOFOLLOW), so a planted link cannot redirect it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if os.path.islink(path):
            raise ConfigError(
                f"{path} is a symbolic link inside an Engram data directory: Engram does not follow "
                "links there (it could be made to change permissions elsewhere). Remove it."
            ) from None
        if isinstance(exc, PermissionError | FileNotFoundError) or not os.path.exists(path):
            return  # a socket or a file that went away while we walked: nothing of ours to tighten
        raise
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def restrict_tree(path: Path) -> None:
    """Owner-only permissions on a store directory and everything the engine wrote inside it; a symbolic link
    anywhere in it is refused (ConfigError), never followed."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path):
        raise ConfigError(
            f"{path} is a symbolic link: Engram does not follow links in its data directories. Remove it."
        )
    is_dir = os.path.isdir(path)
    _chmod_nofollow(path, PRIVATE_DIR_MODE if is_dir else PRIVATE_FILE_MODE)
    if is_dir:
        for root, dirs, files in os.walk(path):
            for name in dirs:
                _chmod_nofollow(os.path.join(root, name), PRIVATE_DIR_MODE)
            for name in files:
                full = os.path.join(root, name)
                if stat.S_ISSOCK(os.lstat(full).st_mode):
                    os.chmod(full, PRIVATE_FILE_MODE)  # a socket cannot be opened; lstat said it is no link
                else:
                    _chmod_nofollow(full, PRIVATE_FILE_MODE)


def find_project_root(start: Path | str | None = None) -> Path:
    """The nearest ancestor holding ``.git`` (or a ``.claude`` folder other than the home one), else ``start``."""
    here = Path(start or os.getcwd()).expanduser().resolve()
    home = Path.home().resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    for candidate in (here, *here.parents):
        if candidate != home and (candidate / ".claude").is_dir():
            return candidate
    return here


def project_db_name(project_root: Path | str) -> str:
    real = os.path.realpath(str(project_root))
    return "p_" + hashlib.sha256(real.encode()).hexdigest()[:12]


def project_store_dir(project_root: Path | str) -> Path:
    return Path(os.path.realpath(str(project_root))) / ".claude" / "engram"


class Settings(BaseModel):
    """Everything a user may set. Unknown keys are refused so a typo is not silently ignored."""

    model_config = {"extra": "forbid"}

    embedding_provider: Literal["local", "api", "none"] = "local"
    embedding_url: str | None = None
    embedding_model: str | None = None
    embedding_api_key: str | None = None
    embedding_dimensions: int = Field(384, ge=8, le=8192)
    embedding_timeout_s: float = Field(10.0, gt=0)
    # The local model's precision: fp32, or int8 (~2.2x faster to embed, LoCoMo 0.7245 against 0.7261). A change
    # re-embeds each store as it opens (vector_model.py).
    embedding_precision: Literal["fp32", "int8"] = "fp32"

    injection_token_budget: int = Field(2000, ge=0, le=100_000)
    prompt_recall: bool = False
    prompt_recall_token_budget: int = Field(400, ge=0, le=20_000)
    disabled: bool = False
    # The self-organising layer on the write and recall paths (entities and graph, episodes, contradiction
    # checks, associations). Off: plain hybrid recall and a faster import; the organise tools still answer.
    organise: bool = True

    daemon_idle_timeout_s: float = Field(1800.0, ge=0)
    # The deadline of one console / engram_execute query, all its statements together. Read from
    # the service's own settings, i.e. the environment (a project file cannot lift it); at most a minute.
    query_timeout_s: float = Field(5.0, gt=0, le=60)
    maintenance_interval_s: float = Field(600.0, ge=5)
    # How often the daemon runs `engram sync` (and `--team`) on its own, for channels set up with `sync init`;
    # 0: only when asked.
    sync_interval_s: float = Field(0.0, ge=0)
    session_stale_hours: float = Field(24.0, gt=0)

    scope_weight_profile: str = "evolved"
    scope_weights: dict[str, float] | None = None
    half_lives_days: dict[str, float] | None = None
    # Caps per scope; past one, the sweep archives the weakest.
    max_memories_project: int = Field(10_000, ge=1)
    max_memories_user: int = Field(5_000, ge=1)


_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", re.S)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _read_frontmatter(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    match = _FRONTMATTER.match(text)
    if not match:
        return {}
    try:
        data = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: the frontmatter is not valid YAML ({exc}). Fix or remove it.") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the frontmatter must be a mapping of setting: value.")
    # ${VAR} lets a key stay out of the file.
    return {
        k: _ENV_REF.sub(lambda m: os.environ.get(m.group(1), ""), v) if isinstance(v, str) else v
        for k, v in data.items()
    }


def _from_env() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in Settings.model_fields:
        raw = os.environ.get("ENGRAM_" + name.upper())
        if raw is not None:
            out[name] = yaml.safe_load(raw) if name in ("scope_weights", "half_lives_days") else raw
    return out


# Settings one daemon applies to every project it serves: the embedding model is loaded once and shared (a
# store's vectors and every query's must come from one model), the organise layer is registered on the core once,
# and the daemon's timers, the console deadline and the user store's cap are the daemon's own. A project file
# that sets one of these to another value than the daemon's is ignored, and `engram config`/`engram doctor` say so.
DAEMON_WIDE = frozenset(
    {
        "embedding_provider",
        "embedding_url",
        "embedding_model",
        "embedding_api_key",
        "embedding_dimensions",
        "embedding_timeout_s",
        "embedding_precision",
        "organise",
        "daemon_idle_timeout_s",
        "query_timeout_s",
        "maintenance_interval_s",
        "sync_interval_s",
        "session_stale_hours",
        "max_memories_user",
    }
)
SETTINGS_FILE = "engram.local.md"  # <project>/.claude/engram.local.md, and the user file in ENGRAM_HOME


def user_settings_file(home: Path | str) -> Path:
    """The user's own settings: ``$ENGRAM_HOME/engram.local.md`` (same frontmatter as a project's)."""
    return Path(home) / SETTINGS_FILE


def project_settings_file(project_root: Path | str) -> Path:
    return Path(project_root) / ".claude" / SETTINGS_FILE


def _validated(data: dict[str, Any], where: str) -> Settings:
    try:
        return Settings(**data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid Engram settings{where}: {problems}") from exc


def settings_layers(home: Path | str | None, project_root: Path | str | None) -> dict[str, dict[str, Any]]:
    """Each source's own values, lowest precedence first: user file, project file, environment. Each file is
    checked on its own, so an error names the file it is in."""
    layers: dict[str, dict[str, Any]] = {}
    for source, path in (
        ("user file", user_settings_file(home) if home is not None else None),
        ("project file", project_settings_file(project_root) if project_root is not None else None),
    ):
        data = _read_frontmatter(path) if path is not None else {}
        if data:
            _validated(data, f" in {path}")
        layers[source] = data
    env = _from_env()
    if env:
        _validated(env, " in the environment (ENGRAM_*)")
    layers["environment"] = env
    return layers


def load_settings(project_root: Path | str | None = None, home: Path | str | None = None) -> Settings:
    """Defaults, then the user file (``home``), then the project file, then ``ENGRAM_*`` (the last wins)."""
    data: dict[str, Any] = {}
    for layer in settings_layers(home, project_root).values():
        data.update(layer)
    return _validated(data, "")


def project_overrides(layers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What a project file changes in a daemon that serves it: its per-project settings that the environment
    does not set (the environment wins over every file)."""
    env = layers.get("environment", {})
    return {k: v for k, v in layers.get("project file", {}).items() if k not in DAEMON_WIDE and k not in env}
