#!/usr/bin/env bash
# GPU checklist for pytest-gpuperf: the CUDA paths never run on a GPU, highest value first. The defects that a
# reading of the CUDA paths against torch 2.13, kineto and NVML found (F1-F13, issue 34) come first: each CHECK line
# that checks one carries its id (profile.a.F1_annotations, memory.paired_F5, clocks.F7_reasons, ...).
#
# ONE command on one H100/H200 machine (16 cores, no network), at most 540 s, from the repository root (this file is
# tracked, so it travels with the working tree):
#     OUT=<folder whose files come back> bash bench/gpu-check.sh          # run tool: timeout_s about 590
# Dry run on a CPU machine (proves syntax and every CPU-side path: the probes run on the CPU at tiny sizes, pytest
# steps collect only, the wheel is built, ab and history run on the CPU for a second; about 90 s):
#     GPU_CHECK_DRY=1 OUT=../gpu-check-out GPU_CHECK_WORK=../gpu-check-work bash bench/gpu-check.sh
# (OUT and the work folder outside the checkout: untracked files travel to the GPU machine.)
# Knobs: GPU_CHECK_BUDGET (s, default 540), GPU_CHECK_STEPS (names, in order), PYTHON (default python3),
#        GPU_CHECK_WORK (scratch folder off $OUT: wheel, venv, scratch repositories, traces; default a new mktemp -d),
#        GPU_CHECK_WHEELS (a folder of wheels, torch included, installed with --no-index when torch is missing).
# Every step tees $OUT/<step>.log; probes print "CHECK <name> PASS|FAIL|INFO <figures>" and "FIG <key> <value>" lines,
# which $OUT/summary.txt collects at the end with every step's exit code (124: timed out; 125: skipped, no budget).
# The torch on the machine is used as it is; only where it is missing are wheels installed.
set -u -o pipefail
: "${OUT:?set OUT to a folder for the logs}"
mkdir -p "$OUT/probes"
OUT=$(cd "$OUT" && pwd)
# Scratch files (the wheel, a venv, scratch git repositories, traces) stay off $OUT: only logs and small results go back
WORK=${GPU_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
BUDGET=${GPU_CHECK_BUDGET:-540}
DRY=${GPU_CHECK_DRY:-0}
PY=${PYTHON:-python3}
ROOT=$PWD
STEPS=${GPU_CHECK_STEPS:-"env core nvml_energy profile_a profile_b ab_planted bench_fixture dobench hardware_tests suites_e2e wheel_pyargs history_anchor speedup mode_graph_cold torchrun_1 xdist_n1 summary"}
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 GPU_CHECK_DRY="$DRY" GPU_CHECK_OUT="$OUT" GPU_CHECK_WORK="$WORK"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 MPLBACKEND=Agg
# torch as the machine has it; else from a folder of wheels brought along (no network there)
if ! $PY -c "import torch" 2>/dev/null; then
    if [[ -n ${GPU_CHECK_WHEELS:-} ]]; then
        $PY -m pip install --no-index --find-links "$GPU_CHECK_WHEELS" torch pytest pluggy tabulate 2>&1 | tail -3
    fi
fi
# A plain copy of the checkout has no egg-info (ignored by git): load the plugin by module when it is not installed.
if ! $PY -c "import importlib.metadata as m, sys; sys.exit(any(e.name == 'gpuperf' for e in m.entry_points(group='pytest11')) == 0)" 2>/dev/null; then
    export PYTEST_PLUGINS=pytest_gpuperf.plugin.entry
fi
if [[ $DRY == 1 ]]; then DEV=cpu; else DEV=cuda; fi
COMMON=(-p no:randomly -p no:cacheprovider -rs)
LAST_RC=0

run_step() {  # run_step NAME LIMIT CMD... : CMD under timeout, output to the terminal and $OUT/NAME.log
    local name=$1 limit=$2; shift 2
    local left=$((BUDGET - SECONDS))
    if ((left < 20)); then
        echo "STEP $name: SKIPPED, budget spent at ${SECONDS}s" | tee -a "$SUMMARY"
        LAST_RC=125
        return 0
    fi
    ((limit > left - 12)) && limit=$((left - 12))
    echo "=== $name (timeout ${limit}s, at ${SECONDS}s): $*" | tee "$OUT/$name.log"
    timeout --kill-after=8 "$limit" "$@" 2>&1 | grep --line-buffered -v '^USDT:' | tee -a "$OUT/$name.log"
    LAST_RC=${PIPESTATUS[0]}
    echo "STEP $name: rc=$LAST_RC at ${SECONDS}s" | tee -a "$SUMMARY"
}
pyt() {  # pyt NAME LIMIT PYTEST-ARGS... : pytest, or only its collection in a dry run
    local name=$1 limit=$2; shift 2
    if [[ $DRY == 1 ]]; then run_step "$name" "$limit" $PY -m pytest "$@" --co -q; else run_step "$name" "$limit" $PY -m pytest "$@"; fi
}

# ====================================================================== probes
cat > "$OUT/probes/common.py" <<'EOF'
"""Shared by the probes: the device (cuda, or cpu in a dry run), CHECK/FIG lines, a plain synchronized loop."""
import os, statistics, sys, time
import torch
DRY = os.environ.get("GPU_CHECK_DRY") == "1"
CUDA = torch.cuda.is_available() and not DRY
DEV = "cuda:0" if CUDA else "cpu"
OUT = os.environ.get("GPU_CHECK_OUT", ".")
WORK = os.environ.get("GPU_CHECK_WORK", OUT)
if not CUDA:
    torch.set_num_threads(1)  # measure() times a CPU at one thread: the plain loops do too
def sync():
    if CUDA:
        torch.cuda.synchronize()
def check(name, ok, detail):
    """ok: True (PASS), False (FAIL), None (INFO: a figure to read, no target). A dry run's figures are a shared CPU's:
    every check is INFO there (the dry run proves the code paths, not the targets)."""
    if DRY and ok is not None:
        detail, ok = f"[dry: would be {'PASS' if ok else 'FAIL'}] {detail}", None
    print(f"CHECK {name} {'INFO' if ok is None else 'PASS' if ok else 'FAIL'} {detail}", flush=True)
def fig(key, value):
    print(f"FIG {key} {value}", flush=True)
def guarded(name):
    """Decorator: a section that raises prints CHECK name FAIL with the error, and the probe goes on."""
    def wrap(fn):
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                import traceback; traceback.print_exc()
                check(name, False, f"raised {type(exc).__name__}: {str(exc)[:300]}")
        return run
    return wrap
def plain_loop(fn, calls, repeats=3):
    """Seconds per call of a plain loop, synchronized at both ends: the best of ``repeats`` (what a user's loop pays)."""
    best = float("inf")
    for _ in range(repeats):
        sync(); t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(); best = min(best, (time.perf_counter() - t0) / calls)
    return best
def walls(fn, calls):
    """Call-to-result seconds of each call: sync, call, sync."""
    out = []
    for _ in range(calls):
        sync(); t0 = time.perf_counter(); fn(); sync(); out.append(time.perf_counter() - t0)
    return out
def q(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]
def rel(a, b):
    return a / b - 1 if b else float("nan")
def spin_kernel(seconds, rate):
    """Device work of a known length: torch.cuda._sleep at the measured spin rate (nothing on a CPU)."""
    if CUDA:
        torch.cuda._sleep(int(seconds * rate))
def spin_rate():
    if not CUDA:
        return 1.9e9
    torch.cuda._sleep(100_000_000); sync()  # ~50 ms of load: the clock ramps
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); torch.cuda._sleep(20_000_000); e.record(); e.synchronize()
    return 20_000_000 / (s.elapsed_time(e) * 1e-3)
def busy_host(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
EOF

cat > "$OUT/probes/env.py" <<'EOF'
import os, shutil, subprocess, sys
sys.path.insert(0, os.path.dirname(__file__))
from common import *  # noqa: F403
print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA build", torch.version.cuda,
      "| kineto", torch.profiler.kineto_available())
print("host cpus", os.cpu_count(), "| affinity", len(os.sched_getaffinity(0)), "| torch threads", torch.get_num_threads())
print("compilers", {c: shutil.which(c) for c in ("cc", "gcc", "c++", "g++", "git")})
for mod in ("triton", "pynvml", "xdist", "pytest_benchmark", "numpy", "tabulate", "setuptools", "pip"):
    try:
        print(mod, getattr(__import__(mod), "__version__", "?"))
    except Exception as exc:  # noqa: BLE001
        print(mod, "MISSING:", type(exc).__name__)
import pytest_gpuperf
from pytest_gpuperf.measuring import import_nvml, match_nvml_device, read_clocks
print("pytest_gpuperf from", os.path.dirname(pytest_gpuperf.__file__), "| PYTEST_PLUGINS", os.environ.get("PYTEST_PLUGINS"))
if not torch.cuda.is_available():
    print("NO CUDA DEVICE")
    sys.exit(0 if DRY else 3)
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"cuda:{i} {p.name} sm_{p.major}{p.minor} SMs {p.multi_processor_count} L2 {getattr(p, 'L2_cache_size', 0) >> 20} MiB "
          f"memory {p.total_memory / 2**30:.1f} GiB uuid {getattr(p, 'uuid', None)}")
    fig(f"device{i}", p.name.replace(" ", "_"))
b = torch.backends
print("sdpa: flash", b.cuda.flash_sdp_enabled(), "efficient", b.cuda.mem_efficient_sdp_enabled(), "math", b.cuda.math_sdp_enabled(),
      "cudnn", getattr(b.cuda, "cudnn_sdp_enabled", lambda: None)(), "| cudnn.benchmark", b.cudnn.benchmark)
nv = import_nvml()
if nv is None:
    check("env.nvml", False, "nvidia-ml-py missing: no clocks, throttle flags or energy in any record")
else:
    nv.nvmlInit()
    print("driver", nv.nvmlSystemGetDriverVersion())
    fig("driver", nv.nvmlSystemGetDriverVersion())
    match = match_nvml_device(nv, torch.cuda.get_device_properties(0))
    check("env.nvml_match", match is not None, f"cuda:0 -> {None if match is None else (match.index, match.how)}")
    if match is not None:
        h = match.handle
        print("reading:", read_clocks(nv, h))
        for what, call in (("max SM MHz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
                           ("applications SM MHz", lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM)),
                           ("power limit W", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000),
                           ("MIG mode", lambda: nv.nvmlDeviceGetMigMode(h)),
                           ("energy mJ", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h))):
            try:
                print(" ", what, call())
            except Exception as exc:  # noqa: BLE001
                print(" ", what, "unreadable:", exc)
    nv.nvmlShutdown()
EOF

cat > "$OUT/probes/core.py" <<'EOF'
"""The timing core against what a user's own loop sees: launch-bound, device-bound and host-bound (DataLoader) steps;
per-call latency; the lead's calibration; builds released; peak memory exact by construction; paired rounds (F4, F5)."""
import gc, os, sys, weakref
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.getcwd())
from common import *  # noqa: F403
from pytest_gpuperf import Step, measure, measure_paired
from pytest_gpuperf.measuring import MeasureSettings, measure_on, open_device
from pytest_gpuperf.measuring._backends import CudaBackend  # the lead's calibration is read below
CAP = 1.0 if CUDA else 0.15
CALLS = 300 if CUDA else 20
RATE = spin_rate()
fig("spin_rate_mhz", round(RATE / 1e6))

def backend():
    return open_device(DEV)[1]

def vs_loop(name, fn, tol, calls=CALLS, **kw):
    for _ in range(5):
        fn()
    m = measure(fn, device=DEV, max_time=CAP, warmup_time=0.3, memory=False, profile="off", **kw)
    loop = plain_loop(fn, calls)
    d = rel(m.median, loop)
    check(name, abs(d) <= tol, f"gpuperf {m.median * 1e6:.1f} us vs plain loop {loop * 1e6:.1f} us ({d:+.1%}, target +-{tol:.0%}); "
          f"host_bound={m.host_bound} host/call={m.host_per_call} device/call={m.device_per_call} short_leads={m.short_leads}")
    fig(f"{name}.ratio", f"{m.median / loop:.4f}")
    return m

@guarded("loop.launch_bound")
def launch_bound():
    x = torch.zeros(1024, device=DEV)
    def fn():  # 200 tiny kernels: host launch time far above device time
        for _ in range(200):
            x.add_(1.0)
    vs_loop("loop.launch_bound", fn, 0.05, calls=CALLS // 4)

@guarded("loop.device_bound")
def device_bound():
    n = 4096 if CUDA else 256
    a = torch.randn(n, n, device=DEV); c = torch.empty_like(a)
    vs_loop("loop.device_bound", lambda: torch.mm(a, a, out=c), 0.02)

@guarded("loop.host_front_loaded")
def host_front():
    def fn():  # 300 us of Python before 5 x 200 us of device work: the lead must cover the host's head start
        busy_host(300e-6)
        for _ in range(5):
            spin_kernel(200e-6, RATE)
    vs_loop("loop.host_front_loaded", fn, 0.02, calls=CALLS // 4)

@guarded("loop.dataloader")
def dataloader():
    from suites.workloads import WORKLOADS
    for name in ("dataloader_w2_pinned", "dataloader_w2_pageable") if CUDA else ("dataloader_w0_pageable",):
        step = WORKLOADS[name].build(torch.device(DEV), "medium" if CUDA else "small")
        m = vs_loop(f"loop.{name}", step.fn, 0.05, calls=25 if CUDA else 4)
        per = m.sampling_seconds / max(len(m.samples) * m.iterations, 1)
        check(f"loop.{name}.F6_cost", per <= 1.2 * m.median if m.host_bound else None,
              f"sampling {per * 1e3:.2f} ms per timed call against its figure {m.median * 1e3:.2f} ms ({per / m.median:.2f}x; "
              f"host_bound {m.host_bound}, device/call {m.device_per_call}, iterations {m.iterations})")

@guarded("latency.per_call")
def latency():
    from suites.workloads import WORKLOADS
    for name in ("mlp_wide_infer_b1", "transformer_infer_b1") if CUDA else ("mlp_wide_infer_b1",):
        step = WORKLOADS[name].build(torch.device(DEV), "medium" if CUDA else "small")
        for _ in range(20):
            step.fn()
        m = measure(step.fn, device=DEV, per_call=True, min_samples=CALLS, max_time=2 * CAP, warmup_time=0.3, memory=False,
                    profile="off")
        w = walls(step.fn, CALLS)
        d50, d99 = rel(q(m.samples, 50), q(w, 50)), rel(q(m.samples, 99), q(w, 99))
        check(f"latency.{name}", abs(d50) <= 0.10, f"per-call p50 {q(m.samples, 50) * 1e6:.1f} us p99 {q(m.samples, 99) * 1e6:.1f} us; "
              f"call-to-result wall p50 {q(w, 50) * 1e6:.1f} us p99 {q(w, 99) * 1e6:.1f} us (p50 {d50:+.1%}, p99 {d99:+.1%}; "
              f"target p50 +-10%); latency={m.latency} sample_kind={m.sample_kind!r}")

@guarded("lead.calibration")
def lead():
    if not CUDA:
        CudaBackend  # the dry run proves only the import
        check("lead.calibration", None, "dry run: needs a GPU")
        return
    from pytest_gpuperf.measuring import import_nvml, match_nvml_device, read_clocks
    nv, handle = import_nvml(), None
    if nv is not None:
        nv.nvmlInit()
        found = match_nvml_device(nv, torch.cuda.get_device_properties(0))
        handle = None if found is None else found.handle
    sm = lambda: None if handle is None else read_clocks(nv, handle).sm_clock_mhz
    time.sleep(4)
    idle_sm = sm()
    idle = CudaBackend(0); idle_rate = idle._leads.rate(idle._cuda)
    torch.cuda._sleep(400_000_000); sync()
    warm = CudaBackend(0); warm_rate = warm._leads.rate(warm._cuda)
    def fn():
        busy_host(300e-6)
        for _ in range(5):
            spin_kernel(200e-6, warm_rate)
    st = MeasureSettings(max_time=CAP, memory=False, profile="off")
    mi = measure_on(fn, idle, st, name="idle-calibrated", device=DEV, work={})
    mw = measure_on(fn, warm, st, name="warm-calibrated", device=DEV, work={})
    relearnt = rel(idle._leads._spin_rate, warm_rate)
    check("lead.relearnt", abs(relearnt) <= 0.15 and abs(rel(mi.median, mw.median)) <= 0.01,
          f"SM {idle_sm} MHz after 4 s idle; rate idle {idle_rate / 1e6:.0f} MHz, warm {warm_rate / 1e6:.0f} MHz, idle backend "
          f"after one measurement {idle._leads._spin_rate / 1e6:.0f} MHz ({relearnt:+.1%}); medians idle {mi.median * 1e3:.4f} ms "
          f"warm {mw.median * 1e3:.4f} ms ({rel(mi.median, mw.median):+.2%}, target 1%); short_leads idle {mi.short_leads} warm {mw.short_leads}")
    fig("lead.idle_rate_mhz", round(idle_rate / 1e6)); fig("lead.warm_rate_mhz", round(warm_rate / 1e6))

@guarded("leak.builds")
def leak():
    gc.collect()
    if CUDA:
        torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated() if CUDA else 0
    mib = 256 if CUDA else 8
    alive = []
    def build():
        big = torch.zeros(mib << 20, dtype=torch.uint8, device=DEV)
        class Owner:
            pass
        owner = Owner(); owner.big = big; alive.append(weakref.ref(owner))
        return Step(lambda: owner.big.add_(1), {})
    step = build()
    measure(step.fn, device=DEV, max_time=0.2, profile="off")
    del step
    measure_paired({"a": build, "b": build}, backend(), MeasureSettings(max_time=0.5, memory=True, profile="counts"), device=DEV)
    gc.collect()
    left = (torch.cuda.memory_allocated() - base) >> 20 if CUDA else 0
    live = sum(r() is not None for r in alive)
    check("leak.builds", live == 0 and left < 1, f"{len(alive)} builds of {mib} MiB made, {live} alive after the measurements; "
          f"{left} MiB still allocated")

@guarded("memory.exact")
def memory_exact():
    if not CUDA:
        check("memory.exact", None, "dry run: the CPU's probe is another figure; the CUDA path needs a GPU")
        return
    MiB = 1 << 20
    def make(resident_mib, transient_mib):
        keep = torch.empty(resident_mib * MiB, dtype=torch.uint8, device=DEV)
        def fn():  # live bytes peak at exactly 2/3 + 1/3 of the transient: a, b alive together, then c
            a = torch.empty(transient_mib * 2 // 3 * MiB, dtype=torch.uint8, device=DEV)
            b = torch.empty((transient_mib - transient_mib * 2 // 3) * MiB, dtype=torch.uint8, device=DEV)
            del a
            c = torch.empty(MiB, dtype=torch.uint8, device=DEV)
            del b, c
            keep.view(-1)[:1].add_(1)
        return Step(fn, {}), keep
    gc.collect(); torch.cuda.synchronize()
    (step, keep) = make(128, 96)
    before = torch.cuda.memory_allocated()
    m = measure(step.fn, device=DEV, max_time=0.2, profile="off")
    expect = before + 96 * MiB
    check("memory.exact", m.memory.peak == expect and m.memory.transient == 96 * MiB,
          f"peak {m.memory.peak} B, expected {expect} B (resident {before} + 96 MiB); transient {m.memory.transient} "
          f"(expected {96 * MiB}); reserved {m.memory.reserved} ({m.memory.reserved_method}) vs memory_reserved() {torch.cuda.memory_reserved()}; "
          f"{m.memory.method}")
    # F5: paired rounds read each factory's memory with only its own build alive; a Step object the caller keeps
    # alive is in the others' figures, and their method says so
    def factory(resident_mib, transient_mib):
        return lambda: make(resident_mib, transient_mib)[0]
    del step, keep
    gc.collect(); torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    (alone_step, keep) = make(128, 96)
    alone = measure(alone_step.fn, device=DEV, max_time=0.2, profile="off").memory.peak - before
    del alone_step, keep
    gc.collect(); torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    p = measure_paired({"a": factory(128, 96), "b": factory(512, 24)}, backend(), MeasureSettings(max_time=0.5, profile="off"), device=DEV)
    pa = p.measurements["a"].memory.peak - base
    check("memory.paired_F5", pa == alone, f"factory a's own peak alone {alone} B; in paired rounds beside b (512 MiB resident) "
          f"{pa} B ({(pa - alone) / MiB:+.0f} MiB; 0 is right); method {p.measurements['a'].memory.method!r}")
    (sa, keep), (sb, keep2) = make(128, 96), make(512, 24)
    q_ = measure_paired({"a": sa, "b": sb}, backend(), MeasureSettings(max_time=0.5, profile="off"), device=DEV)
    check("memory.paired_steps", "resident" in q_.measurements["a"].memory.method, f"Step objects: a's method "
          f"{q_.measurements['a'].memory.method!r} (says b is resident)")
    del keep, keep2

@guarded("paired.lead_F4")
def paired_lead():
    def make():
        def fn():
            busy_host(400e-6)
            for _ in range(5):
                spin_kernel(200e-6, RATE)
        return Step(fn, {})
    fixed_a, fixed_b = make(), make()
    loop = plain_loop(fixed_a.fn, CALLS // 4)
    st = MeasureSettings(max_time=2 * CAP, memory=False, profile="off", min_samples=10)
    same = measure_paired({"a": fixed_a, "b": fixed_b}, backend(), st, device=DEV)
    fact = measure_paired({"a": make, "b": make}, backend(), st, device=DEV)
    from pytest_gpuperf.measuring import median
    ms = lambda p: median(p.measurements["a"].samples)
    check("paired.lead_F4", abs(rel(ms(fact), loop)) <= 0.03, f"plain loop {loop * 1e3:.4f} ms; paired, same Step {ms(same) * 1e3:.4f} ms "
          f"({rel(ms(same), loop):+.1%}); paired, factories (ab) {ms(fact) * 1e3:.4f} ms ({rel(ms(fact), loop):+.1%}; target 3%)")

@guarded("graph.matmul")
def graph_mode():
    if not CUDA:
        check("graph.matmul", None, "dry run: needs a GPU")
        return
    a = torch.randn(4096, 4096, device=DEV); c = torch.empty_like(a)
    fn = lambda: torch.mm(a, a, out=c)
    w = measure(fn, device=DEV, max_time=CAP, memory=False, profile="off")
    g = measure(fn, device=DEV, max_time=CAP, memory=False, profile="off", mode="graph")
    check("graph.matmul", abs(rel(w.median, g.median)) <= 0.02, f"warm {w.median * 1e6:.1f} us, graph {g.median * 1e6:.1f} us ({rel(w.median, g.median):+.2%})")

@guarded("cheat.side_stream")
def side_stream():
    # issue 34 item 4: device work on a side stream the current stream never waits for is flagged; a joined one is not
    if not CUDA:
        m = measure(lambda: None, device=DEV, max_time=0.2, profile="off")
        check("cheat.side_stream", None, f"dry run: a CPU step's timing flags {m.timing_flags} (the drain is CUDA's)")
        return
    side = torch.cuda.Stream()
    def unjoined():
        spin_kernel(50e-6, RATE)
        with torch.cuda.stream(side):
            spin_kernel(400e-6, RATE)
    def joined():
        unjoined()
        torch.cuda.current_stream().wait_stream(side)
    for name, fn, want in (("unjoined", unjoined, True), ("joined", joined, False)):
        m = measure(fn, device=DEV, max_time=CAP, memory=False, profile="off")
        tc = m.timing_checks
        flagged = any("after end event" in f for f in m.timing_flags)
        check(f"cheat.side_stream.{name}", flagged == want, f"median {m.median * 1e6:.1f} us, flags {m.timing_flags}; drain "
              f"{None if tc is None or tc.drain is None else (tc.drain.wait, tc.drain.share, tc.drain.blocks)}")

@guarded("cheat.cached")
def cached():
    # a result cached after the first call: its FLOPs per call fall after the first call
    n = 2048 if CUDA else 128
    a = torch.randn(n, n, device=DEV); memo = {}
    def fn():
        if "y" not in memo:
            memo["y"] = a @ a
        return memo["y"].sum()
    m = measure(fn, device=DEV, max_time=CAP, memory=False)
    check("cheat.cached", any("fell after first call" in f for f in m.timing_flags),
          f"flags {m.timing_flags}; checks {m.timing_checks}")

for section in (launch_bound, device_bound, host_front, dataloader, latency, lead, leak, memory_exact, paired_lead, graph_mode,
                side_stream, cached):
    section()
EOF

cat > "$OUT/probes/workprofile.py" <<'EOF'
"""The work profile on CUDA (issues 22, 23): kernel, runtime, sync and copy names and counts as kineto records them.
A step with a planted .item(), a .cpu(), an H2D copy and a planted extra matmul; a GPU-bound step (F3). Writes the
per-call counts to $OUT/profile_<tag>.json: two processes' files are compared A/A by the summary."""
import json, os, sys
sys.path.insert(0, os.path.dirname(__file__))
from common import *  # noqa: F403
from pytest_gpuperf import measure
from pytest_gpuperf.measuring._profiler import profile_step
TAG = sys.argv[1] if len(sys.argv) > 1 else "a"
n = 2048 if CUDA else 128
torch.manual_seed(0)
a = torch.randn(n, n, device=DEV); w = torch.randn(n, n, device=DEV)
host = torch.randn(1 << 20).pin_memory() if CUDA else torch.randn(1 << 10)
def planted():
    y = a @ w
    y = y @ w            # planted: an extra matmul
    s = y.sum().item()   # planted: a host sync
    z = host.to(DEV, non_blocking=True)
    return s + float(z[:4].cpu().sum())
for _ in range(3):
    planted()
sync()
m = measure(planted, device=DEV, max_time=1.0 if CUDA else 0.2)
p = m.profile
out = {"tag": TAG, "calls": p.calls, "counts": {k: str(v) for k, v in p.per_call_counts().items()},
       "kernels": [(k.name, k.count, k.seconds) for k in p.kernels], "runtime": dict(p.runtime), "syncs": dict(p.syncs),
       "copied": dict(p.bytes_copied), "seconds": p.seconds, "budget": p.budget, "call_seconds": p.call_seconds,
       "outside_seconds": p.outside_seconds, "python": [(s.name, s.count, s.seconds) for s in p.python],
       "median": m.median, "peak": m.memory.peak, "allocated": dict(p.bytes_allocated)}
print(json.dumps(out, indent=1)[:6000])
with open(os.path.join(OUT, f"profile_{TAG}.json"), "w") as f:
    json.dump(out, f)
names = [k.name for k in p.kernels]
calls = max(p.calls, 1)
if CUDA:
    annotations = [k for k in names if k == "gpuperf call" or "#" in k or k.startswith(("Optimizer.", "DataParallel"))]
    check(f"profile.{TAG}.F1_annotations", not annotations, f"user-annotation spans among the kernels: {annotations}")
    check(f"profile.{TAG}.F2_profiler_sync", p.syncs.get("device", 0) == 0,
          f"sync:device {p.syncs.get('device', 0)} over {p.calls} calls (the step has none; the profiler's exit sync is)")
    gemms = [k for k in p.kernels if any(t in k.name.lower() for t in ("gemm", "sgemm", "nvjet", "cutlass", "xmma"))]
    check(f"profile.{TAG}.gemm_named", len(gemms) >= 1 and sum(k.count for k in gemms) == 2 * calls,
          f"GEMM kernels {[(k.name[:60], k.count) for k in gemms]} over {p.calls} calls (expect 2 per call)")
    check(f"profile.{TAG}.F8_syncs", p.syncs.get("dtoh_copy", 0) == 2 * calls and p.syncs.get("stream", 0) == 0,
          f"syncs {dict(p.syncs)} over {p.calls} calls (expect dtoh_copy 2 per call, .item() and .cpu(), each once; stream 0; "
          f"the non_blocking copy into pinned memory no sync)")
    check(f"profile.{TAG}.F13_allocated", set(p.bytes_allocated) >= {"cpu", "cuda"} and p.bytes_allocated["cuda"] > 0,
          f"bytes_allocated {dict(p.bytes_allocated)} (split by device; the step allocates on cuda)")
    launches = sum(v for k, v in p.runtime.items() if k.startswith(("cudaLaunchKernel", "cuLaunchKernel")))
    check(f"profile.{TAG}.F10_launches", launches >= sum(k.count for k in p.kernels),
          f"kernel launches (runtime and driver API) {launches} against {sum(k.count for k in p.kernels)} kernels; runtime {dict(p.runtime)}")
    check(f"profile.{TAG}.copied", p.bytes_copied.get("htod") == host.numel() * 4, f"bytes_copied {dict(p.bytes_copied)}")
    fig(f"profile.{TAG}.cost", f"{p.seconds:.3f}s_of_{p.budget:.3f}s")
    path = os.path.join(WORK, f"trace_{TAG}.json")
    if p.write_trace is not None:
        p.write_trace(path)
        fig(f"profile.{TAG}.trace_bytes", os.path.getsize(path))
# The raw kineto events of two planted calls, as read_events sees them: (activity type, device, user annotation, name)
# -> count, and the host events outside the call ranges (F1, F2, F10: what the fix should classify by)
try:
    from collections import Counter
    from torch.autograd.profiler import profile, record_function
    with profile(use_device="cuda" if CUDA else None, profile_memory=True, use_kineto=True) as raw:
        for _ in range(2):
            with record_function("gpuperf call"):
                planted()
    evs = list(raw.kineto_results.events())
    kinds = Counter((e.activity_type(), str(e.device_type()).split(".")[-1], e.is_user_annotation(), e.name()[:70]) for e in evs
                    if e.name() != "[memory]" and not e.name().startswith("aten::"))
    calls_ = sorted((e.start_ns(), e.start_ns() + e.duration_ns()) for e in evs if e.name() == "gpuperf call" and "CPU" in str(e.device_type()))
    outside = Counter(e.name() for e in evs if "CPU" in str(e.device_type()) and e.name().startswith("cu")
                      and not any(a <= e.start_ns() < b for a, b in calls_))
    for key, count in sorted(kinds.items(), key=lambda kv: (kv[0][0], kv[0][3])):
        print("RAW", count, *key)
    check(f"profile.{TAG}.raw_events", None, f"{len(evs)} events; activity types {sorted(Counter(e.activity_type() for e in evs).items())}; "
          f"cuda* host events outside the 2 call ranges: {dict(outside)}")
except Exception as exc:  # noqa: BLE001
    check(f"profile.{TAG}.raw_events", False, f"raised {type(exc).__name__}: {exc}")
# F12: in graph mode the profile (and the memory probe) run the eager step: runtime shows launches, not graph launches
@guarded(f"profile.{TAG}.F12_graph_mode")
def graph_profile():
    if not CUDA:
        return
    gm = measure(lambda: (a @ w) @ w, device=DEV, max_time=0.5, warmup_time=0.2, mode="graph")
    gp = gm.profile
    check(f"profile.{TAG}.F12_graph_mode", None, f"graph-mode record: runtime {None if gp is None else dict(gp.runtime)}; peak "
          f"{gm.memory.peak} ({gm.memory.method}); kernels {None if gp is None else [(k.name[:40], k.count) for k in gp.kernels]}")
graph_profile()
# F3: a GPU-bound step (about 40 ms of device work queued in microseconds): the counting call's kernels run on
# while the profiler starts; counted kernels per call above 8 confirm F3
def gpu_bound():
    for _ in range(8):
        spin_kernel(5e-3, RATE)
RATE = spin_rate()
@guarded(f"profile.{TAG}.F3_counting_tail")
def counting_tail():
  gpu_bound(); sync()
  prof = profile_step(gpu_bound, level="full", step_seconds=0.04, budget=0.5, on_cuda=CUDA)
  if prof is not None and CUDA:
    spins = sum(k.count for k in prof.kernels if "spin" in k.name.lower() or "sleep" in k.name.lower())
    check(f"profile.{TAG}.F3_counting_tail", spins == 8 * prof.calls, f"spin kernels {spins} over {prof.calls} calls (expect 8 per call); "
          f"kernel names {[k.name for k in prof.kernels]}")
  elif prof is not None:
    check(f"profile.{TAG}.dry", True, f"profile_step ran on the CPU: {prof.calls} calls, {len(prof.ops)} ops")
counting_tail()
EOF

cat > "$OUT/probes/nvml_energy.py" <<'EOF'
"""NVML: a reading's cost; the energy counter's step period and J/call against the counter over a plain loop; clocks
and throttle flags under a bf16 GEMM; how often gpu_idle is set in a reading taken right after a block (F7)."""
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
from common import *  # noqa: F403
from pytest_gpuperf import measure
from pytest_gpuperf.measuring import import_nvml, match_nvml_device, read_clocks
nv = import_nvml()
if not CUDA or nv is None:
    check("nvml", None, "dry run or no nvidia-ml-py: imports OK, nothing measured")
    sys.exit(0)
nv.nvmlInit()
h = match_nvml_device(nv, torch.cuda.get_device_properties(0)).handle
energy = lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h)  # millijoules since the driver loaded
n = 8192
a = torch.randn(n, n, device=DEV, dtype=torch.bfloat16); c = torch.empty_like(a)
gemm = lambda: torch.mm(a, a, out=c)
for _ in range(10):
    gemm()
sync()

@guarded("nvml.reading")
def reading_cost():
    t0 = time.perf_counter()
    for _ in range(200):
        read_clocks(nv, h)
    fig("nvml.reading_us", round((time.perf_counter() - t0) / 200 * 1e6, 1))

@guarded("energy.period")
def period():
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); gemm(); e.record(); e.synchronize(); per = s.elapsed_time(e) * 1e-3
    for _ in range(int(2.5 / per)):  # ~2.5 s of GEMMs queued (the host blocks once the launch queue is full)
        gemm()
    changes, last = [], energy()
    j0, t0 = last, time.perf_counter()
    stream = torch.cuda.current_stream()
    while not stream.query():
        v = energy()
        if v != last:
            changes.append(time.perf_counter()); last = v
        time.sleep(0.0005)
    j1, t1 = last, time.perf_counter()
    steps = [b - a_ for a_, b in zip(changes, changes[1:])]
    med = statistics.median(steps) if steps else float("nan")
    check("energy.period", bool(steps) and 0.005 <= med <= 0.2,
          f"counter stepped {len(changes)} times in {t1 - t0:.2f} s of GEMMs: median period {med * 1e3:.1f} ms (min "
          f"{min(steps, default=0) * 1e3:.1f}, max {max(steps, default=0) * 1e3:.1f}); mean power {(j1 - j0) / 1000 / (t1 - t0):.0f} W; "
          f"nvmlDeviceGetPowerUsage now {nv.nvmlDeviceGetPowerUsage(h) / 1000:.0f} W")
    fig("energy.period_ms", round(med * 1e3, 1))

@guarded("energy.j_per_call")
def joules():
    m = measure(gemm, device=DEV, flops=2.0 * n**3, max_time=2, memory=False, profile="off")
    en = m.energy
    calls = int(2.0 / m.median)  # the reference: the counter over a plain loop of about 2 s, over its calls
    sync(); j0 = energy()
    for _ in range(calls):
        gemm()
    sync(); j1 = energy()
    ref = (j1 - j0) / 1000 / calls
    got = en.joules_per_call
    check("energy.j_per_call", got is not None and abs(rel(got, ref)) <= 0.10,
          f"gpuperf {got} J/call (span {en.seconds} s of {en.timed_seconds} s timed, error {en.error}, note {en.note!r}) vs the "
          f"counter over a plain loop {ref:.4f} J/call (target 10%)")

@guarded("clocks.bf16")
def clocks():
    for run in range(2):
        m = measure(gemm, device=DEV, flops=2.0 * n**3, max_time=2, memory=False, profile="off")
        cs = m.clocks
        check(f"clocks.bf16_run{run}", cs is not None and cs.throttled == 0,
              "no clocks" if cs is None else f"{m.throughput('FLOP')} SM {cs.sm_clock_mhz_min}/{cs.sm_clock_mhz_median}/"
              f"{cs.sm_clock_mhz_max} of {cs.max_sm_clock_mhz} MHz, throttled {cs.throttled}/{cs.readings}, reasons "
              f"{list(cs.reasons)}, {cs.power_w_max} W, {cs.temperature_c_max} C")

@guarded("clocks.F7_gpu_idle")
def idle_bit():
    after, busy = 0, 0
    for _ in range(50):
        gemm(); sync()
        after += bool((read_clocks(nv, h).reasons or 0) & 0x1)
        gemm(); gemm()
        busy += bool((read_clocks(nv, h).reasons or 0) & 0x1)
        sync()
    check("clocks.F7_gpu_idle", None, f"gpu_idle set in {after}/50 readings right after a synchronized block, {busy}/50 with work queued")
    m = measure(gemm, device=DEV, max_time=0.5, memory=False, profile="off")
    check("clocks.F7_reasons", m.clocks is not None and "gpu_idle" not in m.clocks.reasons,
          f"a record's reasons {None if m.clocks is None else list(m.clocks.reasons)} (gpu_idle is no slowdown: never listed)")

for section in (reading_cost, period, joules, clocks, idle_bit):
    section()
nv.nvmlShutdown()
EOF

cat > "$OUT/probes/dobench.py" <<'EOF'
"""TFLOP/s against triton.testing.do_bench (cold L2, median) and CUDA-graph replay, bf16 and fp32 GEMMs."""
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
from common import *  # noqa: F403
from pytest_gpuperf import measure
try:
    from triton.testing import do_bench
except Exception as exc:  # noqa: BLE001
    do_bench = None
    print("no triton:", type(exc).__name__)
if not CUDA:
    check("dobench", None, "dry run: needs a GPU")
    sys.exit(0)
@guarded("dobench")
def one(dtype, n):
    a = torch.randn(n, n, device=DEV, dtype=dtype); c = torch.empty_like(a)
    fn = lambda: torch.mm(a, a, out=c)
    warm = measure(fn, device=DEV, flops=2.0 * n**3, max_time=1.5, memory=False, profile="off")
    cold = measure(fn, device=DEV, flops=2.0 * n**3, max_time=1.5, memory=False, profile="off", mode="cold")
    line = f"{dtype} n={n}: warm {2 * n**3 / warm.median / 1e12:.1f} TFLOP/s ({warm.median * 1e3:.4f} ms), cold {cold.median * 1e3:.4f} ms"
    if do_bench is not None:
        ref = do_bench(fn, return_mode="median") * 1e-3
        check(f"dobench.{str(dtype).split('.')[-1]}", abs(rel(cold.median, ref)) <= 0.03,
              f"{line}; do_bench {ref * 1e3:.4f} ms ({2 * n**3 / ref / 1e12:.1f} TFLOP/s): cold/do_bench {rel(cold.median, ref):+.2%} (target 3%)")
    else:
        check(f"dobench.{str(dtype).split('.')[-1]}", None, line + "; no triton")
for dtype, n in ((torch.bfloat16, 8192), (torch.float32, 8192)):
    one(dtype, n)
EOF

cat > "$OUT/probes/ab_planted.py" <<'EOF'
"""ab on the device with bench/planted.py's scratch repository: does ab name the planted matmul's kernel, see the planted
.item()'s syncs, and keep every count equal in an A/A run (kernel and runtime counts across processes)?"""
import json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
from common import *  # noqa: F403
import planted
work = os.path.join(WORK, "planted")
if not os.path.exists(os.path.join(work, "repo")):
    os.makedirs(work, exist_ok=True)
    planted.make_repo(__import__("pathlib").Path(work) / "repo", 0.001)
runs = (("extra_matmul", "p-extra_matmul", ["extra_matmul"]), ("item", "p-item", ["item"]),
        ("aa", "a2", ["extra_matmul", "item"]))
for label, head, select in runs if not DRY else runs[:1]:
    out = os.path.join(work, f"ab_{label}.json")
    cmd = [sys.executable, "-m", "pytest_gpuperf", "ab", "--repo", os.path.join(work, "repo"), "--base", "a", "--head", head,
           "--workloads", "perf/workloads.py", "--device", "cuda" if CUDA else "cpu", "--max-time", "1" if CUDA else "0.3",
           "--tolerance", "2%", "--json", out, "-q"]
    for name in select:
        cmd += ["-k", name]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        check(f"ab.{label}", False, "ab ran over 60 s")
        continue
    print(done.stdout[-3000:], done.stderr[-2000:])
    if not os.path.exists(out):
        check(f"ab.{label}", False, f"ab exited {done.returncode} without a JSON")
        continue
    rows = json.load(open(out))["results"]
    for row in rows:
        work_ = row.get("work") or {}  # the row's work comparison
        changes = [(c.get("key"), c.get("base"), c.get("head")) for c in work_.get("changes") or []]
        lines = [(l.get("kind"), l.get("name"), l.get("share")) for l in (row.get("why") or {}).get("lines") or []][:5]
        detail = (f"{row.get('name')}: {row.get('verdict')} ratio {(row.get('ratio') or {}).get('ratio')} work {work_.get('verdict')} "
                  f"changes {changes[:8]} why {lines} ({time.perf_counter() - t0:.0f} s)")
        if label == "aa":
            check(f"ab.aa.{row.get('name')}", not changes, detail)
        elif label == "extra_matmul":
            first = lines[0] if lines else None
            named = bool(first) and first[0] == "kernel" and first[1] != "gpuperf call"
            check("ab.extra_matmul_named", named if CUDA else None, detail)
        else:
            check("ab.item_syncs", any(str(k).startswith("sync:") for k, _, _ in changes) if CUDA else None, detail)
EOF

cat > "$OUT/probes/summarize.py" <<'EOF'
"""Collect every step's exit code, CHECK and FIG line into summary.txt; compare the two profiles' counts (A/A)."""
import glob, json, os, re, sys
out = sys.argv[1]
lines = []
for log in sorted(glob.glob(os.path.join(out, "*.log"))):
    for line in open(log, errors="replace"):
        if line.startswith(("CHECK ", "FIG ")):
            lines.append(line.rstrip())
        m = re.search(r"(\d+ (?:passed|failed|skipped|errors?|tests? collected|deselected)[^=]*?) in [\d.]+s", line)
        if m:
            lines.append(f"PYTEST {os.path.basename(log)[:-4]}: {m.group(1)}")
a, b = (os.path.join(out, f"profile_{t}.json") for t in "ab")
if os.path.exists(a) and os.path.exists(b):
    ca, cb = json.load(open(a))["counts"], json.load(open(b))["counts"]
    diff = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
    lines.append(f"CHECK profile.aa_counts {'INFO' if os.environ.get('GPU_CHECK_DRY') == '1' else 'PASS' if not diff else 'FAIL'} {len(diff)} of {len(set(ca) | set(cb))} keys differ "
                 f"between two processes: {[(k, ca.get(k), cb.get(k)) for k in diff[:12]]}")
    pa, pb = json.load(open(a)).get("peak"), json.load(open(b)).get("peak")
    verdict = "INFO" if os.environ.get("GPU_CHECK_DRY") == "1" else "PASS" if pa == pb else "FAIL"  # a CPU's is its RSS
    lines.append(f"CHECK profile.aa_peak {verdict} max_memory_allocated peak of the same step in two "
                 f"processes: {pa} and {pb} B (cuBLAS/cuDNN workspaces and autotuning would show here)")
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    try:
        data = json.load(open(path))
    except Exception:  # noqa: BLE001
        continue
    for r in data.get("records", []) if isinstance(data, dict) else []:
        m = r.get("measurement", {}); s = m.get("stats", {}); c = m.get("clocks") or {}
        lines.append(f"RECORD {os.path.basename(path)} {r.get('key', '')[:60]} {r.get('device')} median {s.get('median', 0) * 1e3:.4f} ms "
                     f"host/call {m.get('host_per_call')} peak {m.get('peak_memory_bytes')} throttled {c.get('throttled')}")
counts = {k: sum(1 for l in lines if l.startswith("CHECK ") and f" {k} " in l) for k in ("PASS", "FAIL", "INFO")}
with open(os.path.join(out, "summary.txt"), "a") as f:
    f.write("\n".join(lines) + "\n")
    f.write(f"CHECKS: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['INFO']} INFO\n")
print("\n".join(l for l in lines if not l.startswith("RECORD")))
print(f"CHECKS: {counts}")
EOF

cat > "$OUT/probes/wheel_install.sh" <<'EOF'
# wheel_install.sh PY VENV WHEELDIR WORKDIR: a venv that sees PY's packages (torch), the wheel installed in it alone
set -eu
py=$1 venv=$2 wheels=$3 work=$4
"$py" -m venv --system-site-packages "$venv"
purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# a venv made from a venv does not see the outer venv's packages: list PY's package folders (harmless where it does)
"$py" -c 'import sys; print(*[p for p in sys.path if p.endswith(("site-packages", "dist-packages"))], sep="\n")' > "$purelib/zz_gpu_check_base.pth"
"$venv/bin/python" -m pip install --no-deps --no-index --ignore-installed "$wheels"/*.whl  # never an outer copy
cd "$work"
env -u PYTHONPATH -u PYTEST_PLUGINS "$venv/bin/python" -c 'import pytest_gpuperf, torch; print("wheel import:", pytest_gpuperf.__file__, "torch", torch.__version__)'
EOF

# ====================================================================== tests written for the fixture steps
mkdir -p "$WORK/bench_tests"
cat > "$WORK/bench_tests/test_bench_cuda.py" <<'EOF'
import os
import pytest
import torch
DEV = "cuda" if torch.cuda.is_available() and os.environ.get("GPU_CHECK_DRY") != "1" else "cpu"
N = 2048 if DEV == "cuda" else 64
@pytest.fixture(scope="module")
def mats():
    return torch.randn(N, N, device=DEV)
def test_mm_benchmark(benchmark, mats):
    out = benchmark(torch.mm, mats, mats)
    assert out.shape == (N, N)
def test_mm_pedantic(benchmark, mats):
    benchmark.pedantic(torch.mm, args=(mats, mats), rounds=20, iterations=5, warmup_rounds=2)
EOF

# ====================================================================== steps
step_env() {
    run_step nvidia_smi 15 nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE
    run_step env 40 $PY "$OUT/probes/env.py"
    if [[ $DRY != 1 && $LAST_RC != 0 ]]; then
        echo "env: no usable CUDA device (rc $LAST_RC): stopping" | tee -a "$SUMMARY"
        exit 3
    fi
}
step_core() { run_step core 120 $PY "$OUT/probes/core.py"; }
step_hardware_tests() {
    pyt hardware_tests 60 tests/test_gpu_hardware.py tests/measuring/test_cuda_timing.py \
        "tests/plugin/test_small_things.py::test_torchs_numpy_warning_is_no_collection_error_under_w_error" \
        "tests/plugin/test_small_things.py::test_devices_resolved_at_the_start_are_no_error_under_w_error" -q "${COMMON[@]}"
}
step_profile_a() { run_step profile_a 45 $PY "$OUT/probes/workprofile.py" a; }
step_profile_b() { run_step profile_b 45 $PY "$OUT/probes/workprofile.py" b; }
step_nvml_energy() { run_step nvml_energy 45 $PY "$OUT/probes/nvml_energy.py"; }
step_dobench() { run_step dobench 30 $PY "$OUT/probes/dobench.py"; }
step_ab_planted() { run_step ab_planted 75 $PY "$OUT/probes/ab_planted.py"; }
step_bench_fixture() {
    local t="$WORK/bench_tests"
    # gpuperf's benchmark fixture (pytest-benchmark blocked), its JSON, then --benchmark-disable; then pytest-benchmark's own
    run_step bench_gpuperf 35 $PY -m pytest "$t" -p no:benchmark "${COMMON[@]}" --gpuperf-device=$DEV --gpuperf-max-time=0.5 \
        --benchmark-json="$OUT/bench_gpuperf_export.json" --gpuperf-json="$OUT/bench_gpuperf.json"
    run_step bench_gpuperf_disable 25 $PY -m pytest "$t" -p no:benchmark "${COMMON[@]}" --benchmark-disable
    run_step bench_pytest_benchmark 35 $PY -m pytest "$t" "${COMMON[@]}" --benchmark-json="$OUT/bench_pb_export.json" \
        --benchmark-max-time=0.5 -W error::pytest.PytestUnraisableExceptionWarning
    run_step bench_exports 10 $PY -c "
import json, sys
for p in sys.argv[1:]:
    try:
        d = json.load(open(p))
    except Exception as exc:
        print('CHECK bench.export FAIL', p, exc); continue
    for b in d.get('benchmarks', []):
        print('CHECK bench.export INFO', p.rsplit('/', 1)[-1], b.get('name'), 'params', b.get('params'),
              'median', (b.get('stats') or {}).get('median'), 'extra_info', str(b.get('extra_info'))[:200])
" "$OUT/bench_gpuperf_export.json" "$OUT/bench_pb_export.json"  # pytest-benchmark's own: no CUDA sync (read the medians)
}
step_suites_e2e() {
    # -v: each test's outcome is in the log as it ends, so a run cut by the budget still says how far it got
    pyt suites_e2e 140 suites/ --gpuperf-device=cuda --gpuperf-max-time=0.5 --gpuperf-warmup-time=0.3 \
        --gpuperf-json="$OUT/suites_e2e.json" "${COMMON[@]}" -v --durations=10
}
step_wheel_pyargs() {
    local w="$WORK/wheel" v="$WORK/venv"
    rm -rf "$w" "$v"
    run_step wheel_build 60 $PY -m pip wheel --no-deps --no-build-isolation --no-index -q -w "$w" "$ROOT"
    ((LAST_RC == 0)) || return 0
    run_step wheel_install 40 bash "$OUT/probes/wheel_install.sh" "$PY" "$v" "$w" "$WORK"
    ((LAST_RC == 0)) || return 0
    local extra=()
    [[ $DRY == 1 ]] && extra=(--co -q)
    # from another folder, without PYTHONPATH or PYTEST_PLUGINS: the wheel's own entry point and suites
    run_step wheel_pyargs 90 env -u PYTHONPATH -u PYTEST_PLUGINS bash -c "cd '$WORK' && '$v/bin/python' -m pytest --pyargs pytest_gpuperf.suites \
        -k 'test_matmul or test_bandwidth' --gpuperf-device=$DEV --gpuperf-max-time=0.3 --gpuperf-warmup-time=0.2 \
        -p no:randomly -p no:cacheprovider -rs -q ${extra[*]}"
}
step_history_anchor() {
    local h="$WORK/hist"
    rm -rf "$h" && mkdir -p "$h"
    if [[ -d "$ROOT/.git" ]]; then
        git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 cp --parents -t "$h" 2>/dev/null)
    else
        (cd "$ROOT" && tar --exclude=./.git --exclude='./gpu-check*' --exclude=./.asv --exclude=./build -cf - .) | (cd "$h" && tar -xf -)
    fi
    run_step history_repo 20 bash -c "cd '$h' && git init -q -b main && git add -A && git -c user.email=c@c -c user.name=c commit -qm a && git tag a \
        && echo '# anchored-history check' >> suites/workloads/sizes.py && git -c user.email=c@c -c user.name=c commit -qam b && git tag b"
    ((LAST_RC == 0)) || return 0
    run_step history_anchor 110 $PY -m pytest_gpuperf history record --repo "$h" --anchor a --device $DEV -k matmul_bfloat16 \
        --max-time $([[ $DRY == 1 ]] && echo 0.3 || echo 2) --no-publish --out "$WORK/history" a b
    run_step history_show 10 bash -c "find '$WORK/history' -type f | head -20; find '$WORK/history' -name '*.json' -path '*results*' | head -3 | xargs -r -n1 sh -c 'echo == \$0; head -c 1200 \$0; echo'"
}
step_speedup() {
    # the CPU-vs-GPU table: the CPU re-measured at all its cores for the headline (E12), its label "N of M cores"
    pyt speedup 60 suites/test_matmul.py::test_matmul_peak suites/test_mlp.py --gpuperf-device=cpu,cuda --gpuperf-size=medium \
        --gpuperf-max-time=0.5 --gpuperf-warmup-time=0.3 --gpuperf-json="$OUT/speedup.json" "${COMMON[@]}"
}
step_mode_graph_cold() {
    pyt mode_graph_cold 60 suites/test_matmul.py::test_matmul suites/test_bandwidth.py suites/test_inference.py::test_batch_throughput \
        --gpuperf-device=cuda --gpuperf-size=medium --gpuperf-mode=graph --gpuperf-max-time=0.5 --gpuperf-json="$OUT/mode_graph.json" "${COMMON[@]}"
    pyt mode_cold 40 suites/test_matmul.py::test_matmul --gpuperf-device=cuda --gpuperf-size=medium --gpuperf-mode=cold \
        --gpuperf-max-time=0.5 --gpuperf-json="$OUT/mode_cold.json" "${COMMON[@]}"
}
step_torchrun_1() {
    local extra=()
    [[ $DRY == 1 ]] && extra=(--co -q)
    run_step torchrun_1 60 $PY -m torch.distributed.run --standalone --nproc-per-node=1 -m pytest suites/test_mlp.py \
        suites/test_data_parallel.py --gpuperf-device=cuda --gpuperf-size=medium --gpuperf-max-time=0.5 \
        --gpuperf-json="$OUT/torchrun_1.json" "${COMMON[@]}" "${extra[@]}"
}
step_xdist_n1() {
    pyt xdist_n1 50 -n 1 suites/test_mlp.py suites/test_matmul.py::test_matmul_peak --gpuperf-device=cuda \
        --gpuperf-size=medium --gpuperf-max-time=0.5 --gpuperf-json="$OUT/xdist_n1.json" "${COMMON[@]}"
}
step_summary() {
    BUDGET=$((BUDGET + 30))  # the summary always runs
    mkdir -p "$OUT/results"  # ab's and history's JSON files (small), never the venv or the repositories
    find "$WORK" -name '*.json' -size -2M \( -path '*planted/ab_*' -o -path '*history*' \) 2>/dev/null | head -40 \
        | while read -r f; do cp "$f" "$OUT/results/$(echo "${f#$WORK/}" | tr '/' '_')"; done
    du -sh "$OUT" | tee -a "$SUMMARY"
    run_step summarize 25 $PY "$OUT/probes/summarize.py" "$OUT"
    # The device tool brings back at most 8 files from $OUT: pack every log into one archive beside summary.txt
    tar czf "$WORK/logs.tar.gz" -C "$OUT" --exclude=./summary.txt . 2>/dev/null \
        && find "$OUT" -mindepth 1 -maxdepth 1 ! -name summary.txt -exec rm -rf {} + \
        && mv "$WORK/logs.tar.gz" "$OUT/logs.tar.gz"
    ls -la "$OUT"
}

echo "gpu-check: budget ${BUDGET}s, dry=$DRY, device=$DEV, steps: $STEPS, PYTEST_PLUGINS=${PYTEST_PLUGINS:-} (entry point if empty)" | tee -a "$SUMMARY"
for step in $STEPS; do
    if ! declare -F "step_$step" >/dev/null; then echo "unknown step $step" | tee -a "$SUMMARY"; continue; fi
    "step_$step"
done
echo "gpu-check: done at ${SECONDS}s" | tee -a "$SUMMARY"
