"""One asv benchmark per entry of ``suites.workloads.WORKLOADS``, generated, never copied.

Each workload ``w`` becomes the class ``w.name`` with one benchmark,
``workloads.<name>.track_step_seconds``, parametrized by device. It builds the
workload, measures one step with pytest-gpuperf's sampler (CUDA event pairs on
the current stream, synchronized before reading; never asv's host timer around
asynchronous device work), runs the workload's check, and hands asv the raw
samples (seconds per step) and the calls per sample, from which asv computes its
median, confidence interval and quartiles.

Time per step, lower is better, is what asv assumes of every value (asv issue
#1617): a throughput drop is a rise here, a regression in ``asv publish``,
``asv compare`` and ``asv continuous``. Work per step is in each benchmark's
``pretty_name``; throughput is work / time.

``version`` is fixed per workload and size preset, not a hash of source code, so
editing code or comments keeps the history; changing the size preset starts a new
one (it measures another problem).

Environment variables (asv runs benchmarks in fresh processes):

* ``GPUPERF_ASV_DEVICE``: devices, as ``--gpuperf-device`` (default ``auto``);
* ``GPUPERF_ASV_SIZE``: size preset (default ``auto``: small on cpu and mps, large on cuda);
* ``GPUPERF_ASV_SETTINGS``: sampler settings as ``key=value`` pairs, such as
  ``"max_time=2 target=2%"`` (the measuring settings: target, min_time, max_time,
  warmup_time, min_samples, threads, inconclusive, memory).
"""

from __future__ import annotations

from benchmarks._generate import benchmark_classes, load_workloads

globals().update(benchmark_classes(load_workloads()))
