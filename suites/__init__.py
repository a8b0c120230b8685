"""The performance suites: workloads (``workloads.py``) and the pytest tests that run them."""
