"""The performance suites: workloads (the ``workloads`` package, one module per family) and the pytest tests that
run them.

A clone runs them as ``suites`` (``pytest suites/``); the wheel installs these same files as
``pytest_gpuperf.suites`` (``pytest --pyargs pytest_gpuperf.suites``, docs/suites.md). So every import between
them is relative, and ``expectations.json`` is read beside ``support.py``: the code works under either name.
"""
