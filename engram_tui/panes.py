"""Each pane's screen class by mode name: the app's MODES, and what the palette and the help screen read
a pane's key bindings from."""

from __future__ import annotations

from textual.screen import Screen

from .screens.console import ConsoleScreen
from .screens.consolidation import ConsolidationScreen
from .screens.contradictions import ContradictionsScreen
from .screens.decay import DecayScreen
from .screens.injection import InjectionScreen
from .screens.memories import MemoriesScreen

PANES: dict[str, type[Screen[None]]] = {
    "memories": MemoriesScreen,
    "decay": DecayScreen,
    "consolidation": ConsolidationScreen,
    "contradictions": ContradictionsScreen,
    "console": ConsoleScreen,
    "injection": InjectionScreen,
}
