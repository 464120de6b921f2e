"""Files: where rooflab keeps its data, where ``resources/`` is, and atomic writes. The bottom
layer beside ``errors`` and ``jobs``: it imports nothing else of rooflab's."""
