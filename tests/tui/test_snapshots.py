"""SVG snapshots of every pane on the frozen demo set (FrozenClock, deterministic ids, masked wall-clock stamps).

Update after an intended change: ``pytest tests/tui/test_snapshots.py --snapshot-update``; then regenerate
``screenshots/`` with ``python bench/screenshots.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import DemoEnv, make_app, settle

SIZE = (160, 48)
SMALL = (80, 24)
Steps = Callable[[Any], Awaitable[None]]


async def still(pilot: Any) -> None:
    """No blinking cursor in a snapshot (its phase would depend on timing): a steady one, drawn where focus is."""
    from textual.widgets import Input, TextArea

    for w in pilot.app.screen.query(TextArea):
        w.cursor_blink = False
        # Textual's line cache keys a line by its cursor only while that cursor blinks: a line last drawn in a
        # blink's off phase (the dialog open over 0.5 s, on a loaded machine) came back without the steady cursor.
        w._line_cache.clear()
        w.refresh()
    for w in pilot.app.screen.query(Input):
        w.cursor_blink = False
    await pilot.pause(0.5)  # let mounts and layout from the last result finish before the picture


def keys(*presses: str) -> Steps:
    async def run(pilot: Any) -> None:
        await settle(pilot, 4)
        await pilot.pause(0.3)
        await settle(pilot, 2)  # the detail pane's second fetch (graph, retrievals) lands before any key
        for key in presses:
            await pilot.press(key)
            await settle(pilot, 4)
        await still(pilot)

    return run


async def _refused(pilot: Any) -> None:
    await settle(pilot, 4)
    await pilot.press("5")
    await settle(pilot, 4)
    pilot.app.screen.query_one(
        "#console-editor"
    ).text = "SELECT * FROM memory LIMIT 3;\nREMOVE TABLE memory;\nUPDATE memory SET importance = 1;"
    await still(pilot)


async def _console_run(pilot: Any) -> None:
    await settle(pilot, 4)
    await pilot.press("5", "ctrl+r")
    await settle(pilot, 6)
    # Where the editor's cursor sits depends on what ran before in the session: pin it for a stable picture.
    editor = pilot.app.screen.query_one("#console-editor")
    editor.move_cursor((0, 0))
    pilot.app.set_focus(None)
    await still(pilot)


async def _write_confirm(pilot: Any) -> None:
    """A console write asks with the statement and the rows it touches, focus on No (issue #30)."""
    await settle(pilot, 4)
    await pilot.press("5")
    await settle(pilot, 4)
    pilot.app.screen.allow_writes = True
    pilot.app.screen.query_one(
        "#console-editor"
    ).text = "UPDATE memory SET importance = 0.3 WHERE importance < 0.3;"
    await pilot.press("ctrl+r")
    await settle(pilot, 4)
    await still(pilot)


async def _procedural(pilot: Any) -> None:
    from engram_tui.widgets.scope_tree import ScopeTree

    await settle(pilot, 4)
    tree = pilot.app.screen.query_one(ScopeTree)
    node = next(
        n
        for n in tree._walk()
        if n.data is not None
        and n.data.scope == "project"
        and n.data.memory_type == "procedural"
        and n.data.status is None
    )
    node.expand()
    tree.select_node(node)
    await settle(pilot, 4)
    await still(pilot)


async def _hybrid_search(pilot: Any) -> None:
    await settle(pilot, 4)
    await pilot.press("s", *"how do I run the tests", "enter")
    await settle(pilot, 6)
    await still(pilot)


CASES: dict[str, Steps] = {
    "memories": keys(),
    "memories_tree_filter": _procedural,
    "memories_filter": keys("slash", *"redis"),
    # Recall's scores, pixel by pixel: the same in every process now that BM25 and the graph ranker no longer
    # depend on set order (PYTHONHASHSEED) and the demo is built on injected ids and clock.
    "hybrid_search": _hybrid_search,
    "forget_confirm": keys("d"),
    "edit_dialog": keys("e"),
    "decay": keys("2"),
    "consolidation": keys("3"),
    "contradictions": keys("4"),
    "console": _console_run,
    "console_refused": _refused,
    "injection": keys("6"),
    "help": keys("question_mark"),
    "console_write_confirm": _write_confirm,
}


@pytest.mark.parametrize("name", list(CASES))
def test_snapshot(name: str, snap_compare: Any, demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    assert snap_compare(app, terminal_size=SIZE, run_before=CASES[name])


# The same panes at 80×24: every part keeps a usable height, nothing essential is cut.
SMALL_CASES = [
    "memories",
    "forget_confirm",
    "edit_dialog",
    "decay",
    "consolidation",
    "contradictions",
    "console",
    "help",
    "hybrid_search",
    "console_write_confirm",
]


@pytest.mark.parametrize("name", SMALL_CASES)
def test_snapshot_small(name: str, snap_compare: Any, demo_service: Any, demo_env: DemoEnv) -> None:
    app = make_app(demo_service, demo_env)
    assert snap_compare(app, terminal_size=SMALL, run_before=CASES[name])
