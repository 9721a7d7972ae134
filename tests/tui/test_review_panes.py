"""Issue #28: the review panes show the strongest cases first with their reason and suggested resolution, decide
the confident ones at once, and undo any decision. At 80×24 and 160×48, on the demo store."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import DemoEnv, make_app, open_pane, screen_lines, settle

from engram_tui.screens.dialogs import ConfirmScreen
from engram_tui.widgets.fit_table import FitTable

SIZES = [(80, 24), (160, 48)]
IDS = ["80x24", "160x48"]


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_contradictions_strongest_first_suggested_and_undo(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    project = demo_env.project
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=size) as pilot:
        await open_pane(pilot, "4")
        items = list(app.screen.items.values())
        assert len(items) >= 2
        confidences = [c.confidence for c in items]
        assert confidences == sorted(confidences, reverse=True), "the strongest first"
        target = next(c for c in items if c.suggested in ("keep_a", "keep_b"))
        table = app.screen.query_one("#contradictions-list", FitTable)
        table.move_cursor(row=items.index(target))
        await settle(pilot)
        assert "Suggested: keep" in app.screen.query_one("#contradictions-evidence").render().plain
        await pilot.press("S")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        dropped = target.a.id if target.suggested == "keep_b" else target.b.id
        assert demo_service.get(dropped, project=project).status.value == "superseded"
        assert target.id not in {c.id for c in demo_service.list_contradictions(project=project)}
        await pilot.press("U")
        await settle(pilot)
        assert demo_service.get(dropped, project=project).status.value != "superseded"
        assert target.id in {c.id for c in demo_service.list_contradictions(project=project)}
        assert "open" in "\n".join(screen_lines(app))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_consolidation_approve_the_confident_ones_then_undo(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    project = demo_env.project
    # The demo's items all sit at or above the default policy (risk 0.3): let the least risky through.
    least = min(i.risk for i in demo_service.list_consolidations(project=project))
    demo_service.set_param("consolidation_auto_approve_below", least + 0.001)
    before = {i.id: [s.status for s in i.sources] for i in demo_service.list_consolidations(project=project)}
    sure = [i for i in demo_service.list_consolidations(project=project) if not i.needs_review]
    assert sure
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=size) as pilot:
        await open_pane(pilot, "3")
        status = app.screen.query_one("#consolidation-status").render().plain
        assert "pending" in status and "need a decision" in status
        await pilot.press("Y")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        pending = {i.id for i in demo_service.list_consolidations(project=project)}
        assert not pending & {i.id for i in sure}, "the confident ones were applied"
        await pilot.press("U")
        await settle(pilot)
        after = {
            i.id: [s.status for s in i.sources] for i in demo_service.list_consolidations(project=project)
        }
        assert after == before, "undo puts the items and their memories back"
