"""The performance suites: workloads (the ``workloads`` package, one module per family) and the pytest tests that
run them."""
