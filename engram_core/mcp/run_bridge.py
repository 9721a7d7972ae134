"""What ``.mcp.json`` runs: ``python3 -S <plugin root>/engram_core/mcp/run_bridge.py``.

It imports :mod:`bridge` (this folder is the script's ``sys.path[0]``) and runs it. A file run as a script is
compiled on every start and never cached; an imported one is loaded from its bytecode: ~5 ms less of the MCP
server's start-up, which Claude Code waits for before the first turn (docs/benchmarks.md). Standard library only,
like the bridge.
"""

import sys

import bridge

if __name__ == "__main__":
    bridge.main(sys.argv[1:])
