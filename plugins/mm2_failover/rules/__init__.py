"""The pure rules: no I/O (no environment, file, network or process call; tests/unit/test_layering.py)."""
