"""asv benchmarks: one per workload of ``suites/workloads/``, timed by pytest-gpuperf's synchronized sampler.

See ``workloads.py`` here for how they are generated and configured.
"""
