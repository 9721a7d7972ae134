"""The memory protocol an agent is given: ONE text, injected at SessionStart and shipped as the plugin skill.

``skills/engram-memory/SKILL.md`` is generated from :data:`PROTOCOL` (``python -m engram_core.integrations.claude_code.memory_protocol
--write``); tests/test_hooks.py fails when the two drift apart. The tool names are the ones Claude Code gives a
plugin's MCP tools: ``mcp__plugin_<plugin>_<server>__<tool>``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TOOL_PREFIX = "mcp__plugin_engram_engram__"
SKILL_PATH = Path(__file__).resolve().parents[3] / "skills" / "engram-memory" / "SKILL.md"
SKILL_DESCRIPTION = (
    "How to use Engram, this project's persistent memory: when to recall, what to store, "
    "how to write the session summary, and why recalled memory must be checked against the code."
)


def tool(name: str) -> str:
    return TOOL_PREFIX + name


PROTOCOL = f"""## Memory protocol (Engram, MCP server `engram`)
- Recall before a task or unfamiliar code: `{tool("recall_memories")}`.
- Store what a later session needs and the code does not say (a decision and why, the fix of a failure, a \
convention, a user preference; one fact each, no secrets): `{tool("store_memory")}`.
- Before you finish: `{tool("session_summary")}` with the goal, what changed and what is left.
- Recalled memory may be stale: check it against the code before relying on it; drop what is wrong with \
`{tool("forget_memory")}`.
"""


def skill_markdown() -> str:
    """The plugin skill file: frontmatter plus the protocol."""
    # Quoted: the description holds ": ", which plain YAML reads as a mapping (`claude plugin validate` refused it).
    return f"---\nname: engram-memory\ndescription: {json.dumps(SKILL_DESCRIPTION)}\n---\n\n{PROTOCOL}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        SKILL_PATH.parent.mkdir(parents=True, exist_ok=True)
        SKILL_PATH.write_text(skill_markdown(), encoding="utf-8")
        print(f"wrote {SKILL_PATH}")
        return 0
    if args == ["--check"]:
        ok = SKILL_PATH.exists() and SKILL_PATH.read_text(encoding="utf-8") == skill_markdown()
        print(f"{SKILL_PATH} is {'up to date' if ok else 'out of date: run with --write'}")
        return 0 if ok else 1
    sys.stdout.write(PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
