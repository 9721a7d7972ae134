"""The rules a memory lives by: scoring, the lifecycle, promotion, writing, listing, the sweep."""
