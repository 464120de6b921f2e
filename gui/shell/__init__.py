"""The application shell: the QApplication and its start-up, the main window that wires panels,
plots and controllers together, the About box and window-wide file drops. Top of the gui layers:
only ``rooflab.gui.main`` sits above it."""
