"""The objects in the GUI thread that run jobs and route their results: opening a model, measuring,
and what a finished measurement leads to. Each owns at most one worker (``rooflab.gui.workers``)
and drives the panels it is given."""
