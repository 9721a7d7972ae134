"""One screen per pane (Textual modes), plus the modal dialogs."""
