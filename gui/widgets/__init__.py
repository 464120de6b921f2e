"""The bottom of the gui layers: small shared widgets (a slider bound to a spin box, the message
bar) and the light and dark themes. Imports nothing else of rooflab.gui."""
