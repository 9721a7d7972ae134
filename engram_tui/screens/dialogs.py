"""Modal dialogs: the confirmation every destructive action goes through, the memory editor, a text prompt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from ..safe import markup


class Editor(TextArea):
    """The dialogs' text editor: ctrl+a selects all, as in every other editor."""

    BINDINGS = [Binding("ctrl+a", "select_all", "Select all", show=False)]


class AnswerScreen(ModalScreen[bool]):
    """A yes/no dialog: a title, the message, what ``extra`` adds, then the buttons; #yes answers True, #no False.

    ``message`` is Content (user text in it built with ``safe.markup``) or our own markup string.
    """

    def __init__(self, message: str | Content, title: str) -> None:
        super().__init__()
        self.message = message
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(self.title_text, id="dialog-title")
            yield Static(self.message, id="dialog-message")
            yield from self.extra()
            with Horizontal(classes="dialog-buttons"):
                yield from self.buttons()

    def extra(self) -> ComposeResult:
        yield from ()

    def buttons(self) -> ComposeResult:
        raise NotImplementedError

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(False)

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ConfirmScreen(AnswerScreen):
    """Yes/no (posting's pattern): focus starts on Yes, so enter or y confirms; n or escape cancels.
    With ``default_no`` (a console write) focus starts on No: enter cancels, only y goes ahead."""

    # Focused as the screen is composed (not later, by on_mount): keys typed right after opening it land there.
    AUTO_FOCUS = "#yes"

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
        Binding("left,right,tab", "app.focus_next", "Move", show=False),
    ]

    def __init__(
        self,
        message: str | Content,
        *,
        title: str = "Confirm",
        confirm_label: str = "Yes",
        danger: bool = True,
        default_no: bool = False,
    ) -> None:
        super().__init__(message, title)
        self.default_no = default_no
        if default_no:
            self.AUTO_FOCUS = "#no"  # type: ignore[misc]  # per dialog: the safe answer has the focus
        self.confirm_label = confirm_label
        self.danger = danger

    def buttons(self) -> ComposeResult:
        # Plain Content: "[y]" in a markup string would be read as a tag and vanish.
        yes, no = ("[y]", "[n/esc/enter]") if self.default_no else ("[y/enter]", "[n/esc]")
        yield Button(
            Content(f"{self.confirm_label} {yes}"), id="yes", variant="error" if self.danger else "primary"
        )
        yield Button(Content(f"No {no}"), id="no")


class TypedConfirmScreen(AnswerScreen):
    """k9s's guard for the widest deletes: going ahead needs ``expected`` (a table name) typed; enter with
    anything else, escape or Cancel answer No."""

    AUTO_FOCUS = "#typed"
    BINDINGS = [Binding("escape", "answer(False)", "Cancel", id="typed.cancel")]

    def __init__(self, message: str | Content, expected: str, *, title: str = "Confirm") -> None:
        super().__init__(message, title)
        self.expected = expected

    def extra(self) -> ComposeResult:
        yield Label(Content(f"Type the table name ({self.expected}) to run it:"))
        yield Input(placeholder=self.expected, id="typed")

    def buttons(self) -> ComposeResult:
        yield Button(Content("Run [enter, once typed]"), id="yes", variant="error", disabled=True)
        yield Button(Content("Cancel [esc]"), id="no")

    @on(Input.Changed, "#typed")
    def _typed(self, event: Input.Changed) -> None:
        self.query_one("#yes", Button).disabled = event.value.strip() != self.expected

    @on(Input.Submitted, "#typed")
    def _submitted(self, event: Input.Submitted) -> None:
        if event.value.strip() == self.expected:
            self.dismiss(True)
        else:
            self.query_one("#typed", Input).add_class("-invalid")


class EditMemoryScreen(ModalScreen[dict[str, Any] | None]):
    """Edit content, tags and importance; returns only the fields that changed (None when cancelled)."""

    # Focused as the screen is composed (not later, by on_mount): keys typed right after opening it land there.
    AUTO_FOCUS = "#edit-content"

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="edit.save"),
        Binding("escape", "cancel", "Cancel", id="edit.cancel"),
    ]

    def __init__(self, content: str, tags: list[str], importance: float) -> None:
        super().__init__()
        self.original: dict[str, Any] = {"content": content, "tags": list(tags), "importance": importance}

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-dialog", classes="dialog"):
            yield Label("Edit memory", id="dialog-title")
            yield Label("Content")
            yield Editor(self.original["content"], id="edit-content", soft_wrap=True)
            yield Label("Tags (comma separated)")
            yield Input(", ".join(self.original["tags"]), id="edit-tags")
            yield Label("Importance (0–1)")
            yield Input(f"{self.original['importance']:.2f}", id="edit-importance")
            yield Static("", id="edit-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(Content("Save [ctrl+s]"), id="save", variant="primary")
                yield Button(Content("Cancel [esc]"), id="cancel")

    def changes(self) -> dict[str, Any]:
        content = self.query_one("#edit-content", TextArea).text
        tags = [t.strip().lower() for t in self.query_one("#edit-tags", Input).value.split(",") if t.strip()]
        raw = self.query_one("#edit-importance", Input).value.strip()
        try:
            importance = float(raw)
        except ValueError as exc:
            raise ValueError(f"importance {raw!r} is not a number: give a value between 0 and 1") from exc
        if not 0.0 <= importance <= 1.0:
            raise ValueError(f"importance {importance} is outside 0–1")
        if not content.strip():
            raise ValueError("content is empty: write the text, or forget the memory instead (d)")
        out: dict[str, Any] = {}
        if content != self.original["content"]:
            out["content"] = content
        if tags != self.original["tags"]:
            out["tags"] = tags
        if abs(importance - self.original["importance"]) > 1e-9:
            out["importance"] = importance
        return out

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        try:
            changes = self.changes()
        except ValueError as exc:
            self.query_one("#edit-error", Static).update(markup("[b red]$e[/]", e=exc))
            return
        self.dismiss(changes)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class TextPromptScreen(ModalScreen[str | None]):
    """Ask for a longer text (a merged statement, an edited proposal); None when cancelled."""

    # Focused as the screen is composed (not later, by on_mount): keys typed right after opening it land there.
    AUTO_FOCUS = "#prompt-text"

    BINDINGS = [
        Binding("ctrl+s", "save", "Done", id="prompt.save"),
        Binding("escape", "cancel", "Cancel", id="prompt.cancel"),
    ]

    def __init__(
        self, title: str, text: str = "", hint: str = "", on_cancel: Callable[[str], None] | None = None
    ) -> None:
        super().__init__()
        self.on_cancel = on_cancel  # given the text as it stands when cancelled (a draft to keep)
        self.title_text = title
        self.text = text
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-dialog", classes="dialog"):
            yield Label(self.title_text, id="dialog-title")
            if self.hint:
                yield Static(Content(self.hint), classes="muted")
            yield Editor(self.text, id="prompt-text", soft_wrap=True)
            yield Static("", id="edit-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(Content("Done [ctrl+s]"), id="save", variant="primary")
                yield Button(Content("Cancel [esc]"), id="cancel")

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        text = self.query_one("#prompt-text", TextArea).text
        if not text.strip():
            self.query_one("#edit-error", Static).update("[b red]the text is empty[/]")
            return
        self.dismiss(text)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        if self.on_cancel is not None:
            self.on_cancel(self.query_one("#prompt-text", TextArea).text)
        self.dismiss(None)
