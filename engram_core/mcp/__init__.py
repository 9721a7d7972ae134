"""The MCP front end: the standard-library stdio bridge Claude Code runs, and the server the daemon hosts."""
