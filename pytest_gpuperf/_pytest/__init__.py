"""The plugin package's name before 0.2 (``pytest_gpuperf.plugin`` now), kept for one release so that a
``-p pytest_gpuperf._pytest.plugin`` or ``pytest_plugins`` line written for it keeps working."""
