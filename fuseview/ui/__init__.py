"""Qt layer: the window and its panels. Calls graph/, fusion/ and runtime/; never edits a model itself."""
