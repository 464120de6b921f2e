"""Builders the tests share: GGUF files written with gguf.GGUFWriter and value objects made from
numbers, imported as ``tests.factories.<module>`` (no sys.path edits)."""
