"""How long a GUI test waits for the window before it fails.

A ceiling, not a delay: a test goes on the moment its signal comes, so a generous one costs a
passing test nothing, while a tight one fails it when CI's machine is busy (a redraw that takes
a fraction of a second on a quiet machine took over 5 s with the suite on two workers beside a
compiler, 2026-12-02)."""

WAIT_MS = 30_000
