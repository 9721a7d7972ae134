"""Claude Code: what a hook event means, the session's context, what a session taught."""
