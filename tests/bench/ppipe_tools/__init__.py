"""ppipe_tools: the code of ppipe-compare and ppipe-soak beyond their
command lines, one module per part (tests/bench/README.md lists them)."""
