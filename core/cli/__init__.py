"""The command line: argument parsing, output formats and the measure commands. It sits on top
of core (it may import any layer below) and never imports Qt: the window's commands arrive as
handlers from ``rooflab.gui.main``."""
