"""Issue #30 item 6: decay visibly live — a fixed time axis with a moving "now", a recall that moves the curve
and says so, legends that do not cover the curves, a title at 80×24; a demo whose memories differ in age,
accesses and type. At 80×24 and 160×48."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import DemoEnv, make_app, open_pane, screen_lines, settle

SIZES = [(80, 24), (160, 48)]
IDS = ["80x24", "160x48"]


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_a_recall_moves_the_curve_on_a_fixed_axis_and_says_so(
    size: tuple[int, int], demo_service: Any, demo_env: DemoEnv
) -> None:
    query = "how do I run the test suite"
    hit = demo_service.recall(query, project=demo_env.project, strengthen=False, log=False, limit=1).hits[0]
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app.selected_id = hit.memory.id  # as if chosen in the Memories pane
        await open_pane(pilot, "2")
        screen = app.screen
        m = screen.memory
        assert m is not None and m.id == hit.memory.id
        axis = screen._axis
        title = screen.plot_title
        assert title.startswith(m.content[:10]), "the plot names the memory"
        assert title[:20] in "\n".join(screen_lines(app)), "and the name shows, at 80 columns too"
        demo_service.clock.advance(hours=2)
        demo_service.recall(query, project=demo_env.project, limit=1)
        screen.load_selected()
        await settle(pilot)
        assert screen.memory.access_count == m.access_count + 1
        assert screen._axis == axis, "the axis stays put: the curve moves along it"
        assert screen.before is not None and "recalled at" in screen.change_note
        assert "half-life" in screen.change_note
        info = "\n".join(screen_lines(app))
        assert "recalled at" in info


async def test_the_aggregate_legend_is_in_the_border_not_on_the_curves(
    demo_service: Any, demo_env: DemoEnv
) -> None:
    app = make_app(demo_service, demo_env)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_pane(pilot, "2")
        title = str(app.screen.query_one("#decay-types").border_title)
        assert "semantic" in title and "episodic" in title


def test_the_demo_tells_a_decay_story(demo_service: Any, demo_env: DemoEnv) -> None:
    items = demo_service.list_memories(scope="project", project=demo_env.project, limit=1000).items
    live = [m for m in items if m.status.value in ("active", "created") and not m.pinned]
    assert (
        len({round((demo_service.now() - m.last_accessed_at).total_seconds() / 3600) for m in live}) > 20
    ), "last uses spread over time"
    assert sum(1 for m in live if abs(float(m.memory_strength) - m.importance) > 0.05) > len(live) / 2, (
        "strength is not importance"
    )
    assert {m.access_count for m in items} >= {0, 1, 2}, "the agent's recalls earned accesses"
    assert len({m.memory_type.value for m in live}) >= 3
