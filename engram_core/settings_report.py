"""`engram config`: every setting as the daemon applies it to one project's requests, where its value came from
(default, user file, project file, environment, evolved), and every value set somewhere that does not take
effect, with the reason (`engram doctor` fails on those). Precedence: docs/configuration.md."""

from __future__ import annotations

from typing import Any

from .api import api
from .config import DAEMON_WIDE, Settings, project_settings_file, settings_layers, user_settings_file
from .core import MemoryCore
from .models import SettingEntry, SettingsReport
from .models.memory import SettingSource

SECRETS = frozenset({"embedding_api_key"})
# Why one daemon cannot take these from a project file.
_WHY_SHARED = {
    "organise": "the self-organising layer is registered once, for every project the daemon serves",
    "max_memories_user": "the user store is shared by every project",
}
_EMBEDDING_WHY = (
    "the daemon loads one embedding model for every project (a store's vectors and each query's must "
    "come from the same model)"
)
_DAEMON_WHY = "it is a setting of the daemon process itself"


def _why(name: str) -> str:
    return _WHY_SHARED.get(name) or (_EMBEDDING_WHY if name.startswith("embedding_") else _DAEMON_WHY)


def _shown(name: str, value: Any) -> Any:
    if name in SECRETS and value:
        return "(set)"
    return value


def _coerced(name: str, raw: Any) -> Any:
    return getattr(Settings(**{name: raw}), name)


@api
def settings_report(core: MemoryCore, project: str | None = None) -> SettingsReport:
    """Every effective setting for ``project``'s requests and its source; the values that are ignored, and why."""
    root = core.scopes.project_root(project)[0] if project else None
    layers = settings_layers(core.home, root)
    user, proj, env = layers["user file"], layers["project file"], layers["environment"]
    user_path = str(user_settings_file(core.home))
    proj_path = str(project_settings_file(root)) if root else None
    effective = core.settings_for(project)
    ignored: list[str] = []
    entries: list[SettingEntry] = []
    for name in Settings.model_fields:
        wide = name in DAEMON_WIDE
        value = getattr(core.settings if wide else effective, name)
        source: SettingSource
        if name in env:
            source = "environment"
        elif name in proj and not wide:
            source = "project file"
        elif name in user and (not wide or _coerced(name, user[name]) == value):
            source = "user file"
        else:
            source = "default"
        note = None
        if wide and name in proj and _coerced(name, proj[name]) != value:
            ignored.append(
                f"{name}: {_shown(name, proj[name])!r} in {proj_path} is ignored, because {_why(name)}; "
                f"this daemon uses {_shown(name, value)!r} ({source}). Set it in {user_path} or the "
                f"daemon's environment (ENGRAM_{name.upper()}) for every project, then `engram stop`."
            )
        if wide and name in user and name not in env and _coerced(name, user[name]) != value:
            ignored.append(
                f"{name}: {_shown(name, user[name])!r} in {user_path} is not in effect: the daemon read "
                f"its settings when it started; `engram stop` and the next command starts it with them."
            )
        if name in env:
            for where, layer, path in (("project file", proj, proj_path), ("user file", user, user_path)):
                if (
                    name in layer
                    and (where == "user file" or not wide)
                    and _coerced(name, layer[name]) != value
                ):
                    ignored.append(
                        f"{name}: {_shown(name, layer[name])!r} in {path} is overridden by "
                        f"ENGRAM_{name.upper()} in the daemon's environment ({_shown(name, value)!r})."
                    )
        if name == "scope_weights":
            value = core.scope_weights(None, project)
            if source == "default" and effective.scope_weight_profile != "evolved":
                note = f"from the profile {effective.scope_weight_profile!r}"
            elif source == "default" and core.param("scope_weights", None) is not None:
                source = "evolved"
            elif source != "default":
                note = "set by hand: wins over the profile and the evolved weights"
        elif name == "half_lives_days":
            manual = getattr(effective, name) or {}
            value = core.half_lives(project)
            evolved = core.param("decay_half_lives", None)
            if source == "default" and evolved is not None:
                source = "evolved"
            elif manual and len(manual) < len(value):
                rest = "evolved" if evolved is not None else "default"
                note = f"set by hand for {', '.join(sorted(manual))}; the other types: {rest}"
        elif name == "scope_weight_profile" and effective.scope_weights:
            note = "not used for the weights: scope_weights is set"
        entries.append(
            SettingEntry(
                name=name,
                value=_shown(name, value),
                source=source,
                applies="daemon-wide" if wide else "per project",
                note=note,
            )
        )
    return SettingsReport(
        project_root=root, user_file=user_path, project_file=proj_path, settings=entries, ignored=ignored
    )
