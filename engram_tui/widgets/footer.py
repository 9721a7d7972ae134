"""The key-hint line at the bottom of every pane, fitted to narrow terminals."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

from ..layout import NARROW_COLUMNS


class PaneFooter(Footer):
    """Below 110 columns the hints drop their padding and the palette hint (ctrl+p still works, `?` lists every
    key), so the pane's keys are not cut off mid-word at 80 columns."""

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < NARROW_COLUMNS
        self.compact = narrow
        self.show_command_palette = not narrow
