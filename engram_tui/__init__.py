"""Engram's terminal UI (Textual). It talks to an EngramService-shaped object only: never a store, never SurrealQL."""
