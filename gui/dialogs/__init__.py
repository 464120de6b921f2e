"""Dialogs the window opens on request (Help > Guide)."""
