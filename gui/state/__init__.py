"""The window's state: the one AppState object every panel edits through setters, the debounced
recompute that turns it into drawn curves, the Compare rows derived from it, and the settings
file it is saved in."""
