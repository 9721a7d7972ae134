"""Where a terminal counts as small: the panes fold secondary parts below these sizes (engram.tcss .narrow, .short)."""

NARROW_COLUMNS = (
    110  # the scope tree starts folded, the detail keeps the memory's own fields, hints get compact
)
SHORT_ROWS = 32  # editors shrink
