"""Code the Python suites share (tests/integration and tests/cluster).

Each suite's conftest.py puts tests/ on sys.path so that `common` imports.
"""
