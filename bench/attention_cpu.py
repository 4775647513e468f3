"""CPU forward+backward cost of E-ATT vs vanilla dot-product attention.

Measures, for self-attention on a (batch, length, dim) input that requires grad:

* time: median wall time (time.perf_counter) of one ``forward + backward`` after warm-ups;
* saved memory: bytes of the distinct tensors the autograd graph saves for backward
  (recorded with ``torch.autograd.graph.saved_tensors_hooks``, de-duplicated by storage,
  excluding parameters and the input itself) -- the activation memory a training step holds
  between forward and backward. This is the ``memory_ratio`` reported;
* peak RSS: increase of the process's peak resident set size (``VmHWM``) over one
  forward+backward, measured in a fresh subprocess with glibc's mmap threshold pinned so that
  large tensors are really returned to the OS. It includes transient buffers (e.g. the
  per-chunk temporaries of the L1 backward) and is reported for information.

Usage: ``python bench/attention_cpu.py [--quick] [--out PATH]``. The last stdout line is a
JSON object with ``time_ratio`` and ``memory_ratio`` (E-ATT over vanilla, main config).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from eatt.config import atomic_write_text
from eatt.model import functional as F
from eatt.model.attention import DotProductAttention, EAttention

MODELS = {"eatt": EAttention, "vanilla": DotProductAttention}
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "attention_cpu.json"


def _make(kind: str, batch: int, length: int, dim: int, heads: int, seed: int = 0):
    torch.manual_seed(seed)
    module = MODELS[kind](dim, heads)
    # unit-variance inputs: with tau = 1 about 16% of features are selected, a realistic rate
    x = torch.randn(batch, length, dim, requires_grad=True)
    grad = torch.randn(batch, length, dim)
    return module, x, grad


def _step(module, x, grad) -> None:
    module.zero_grad(set_to_none=True)
    x.grad = None
    module(x).backward(grad)


def time_steps(kinds, batch, length, dim, heads, warmup, repeats) -> dict:
    """Median forward+backward time per kind; repeats interleave the kinds so that load
    changes on the machine hit all of them alike. ``eatt@cdist`` forces the eager L1 kernel."""
    setups, first = {}, {}
    for kind in kinds:
        setups[kind] = _make(kind.split("@")[0], batch, length, dim, heads)
    times = {kind: [] for kind in kinds}
    for rep in range(warmup + repeats):
        for kind in kinds:
            impl = kind.split("@")[1] if "@" in kind else "auto"
            saved_impl, F.L1_IMPL = F.L1_IMPL, impl
            try:
                t0 = time.perf_counter()
                _step(*setups[kind])
                elapsed = time.perf_counter() - t0
            finally:
                F.L1_IMPL = saved_impl
            if rep == 0:
                first[kind] = elapsed  # includes one-off costs such as torch.compile
            if rep >= warmup:
                times[kind].append(elapsed)
    return {
        kind: {
            "median_ms": 1e3 * statistics.median(ts),
            "min_ms": 1e3 * min(ts),
            "first_call_ms": 1e3 * first[kind],
            "repeats": repeats,
        }
        for kind, ts in times.items()
    }


def saved_bytes(kind, batch, length, dim, heads) -> dict:
    module, x, grad = _make(kind, batch, length, dim, heads)
    exclude = {p.untyped_storage().data_ptr() for p in module.parameters()}
    exclude.add(x.untyped_storage().data_ptr())
    storages: dict[int, int] = {}
    largest = 0

    def pack(t: torch.Tensor):
        nonlocal largest
        storage = t.untyped_storage()
        if storage.data_ptr() not in exclude:
            storages[storage.data_ptr()] = storage.nbytes()
            largest = max(largest, t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(x)
    out.backward(grad)
    return {"bytes": sum(storages.values()), "tensors": len(storages), "largest_numel": largest}


def _vm_hwm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmHWM not found")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_child(kind, batch, length, dim, heads) -> int:
    """Runs inside the subprocess: peak RSS increase of one forward+backward."""
    module, x, grad = _make(kind, batch, length, dim, heads)
    _step(module, x, grad)  # warm-up: lazy initialisation, thread pools
    module.zero_grad(set_to_none=True)
    x.grad = None
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = _rss_bytes()
    _step(module, x, grad)
    return _vm_hwm_bytes() - base


def peak_rss(kind, batch, length, dim, heads) -> int | None:
    if not sys.platform.startswith("linux"):
        return None
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    cmd = [sys.executable, __file__, "--_rss-child", json.dumps([kind, batch, length, dim, heads])]
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=600)
        return int(res.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return None


def bench_config(name, batch, length, dim, heads, warmup, repeats) -> dict:
    result = {"batch": batch, "length": length, "dim": dim, "heads": heads}
    times = time_steps(
        ["eatt", "vanilla", "eatt@cdist"], batch, length, dim, heads, warmup, repeats
    )
    result["eatt_eager_cdist_time"] = times.pop("eatt@cdist")
    for kind in MODELS:
        result[kind] = {
            "time": times[kind],
            "saved": saved_bytes(kind, batch, length, dim, heads),
            "peak_rss_bytes": peak_rss(kind, batch, length, dim, heads),
        }
    e, d = result["eatt"], result["vanilla"]
    result["time_ratio"] = e["time"]["median_ms"] / d["time"]["median_ms"]
    # min is the least disturbed by other load on the machine; reported next to the median
    result["time_ratio_min"] = e["time"]["min_ms"] / d["time"]["min_ms"]
    result["eager_cdist_time_ratio"] = (
        result["eatt_eager_cdist_time"]["median_ms"] / d["time"]["median_ms"]
    )
    result["memory_ratio"] = e["saved"]["bytes"] / d["saved"]["bytes"]
    if e["peak_rss_bytes"] and d["peak_rss_bytes"]:
        result["peak_rss_ratio"] = e["peak_rss_bytes"] / d["peak_rss_bytes"]
    print(
        f"[{name}] L={length}: eatt {e['time']['median_ms']:.2f} ms, vanilla "
        f"{d['time']['median_ms']:.2f} ms (x{result['time_ratio']:.2f}); saved "
        f"{e['saved']['bytes'] / 2**20:.1f} vs {d['saved']['bytes'] / 2**20:.1f} MiB "
        f"(x{result['memory_ratio']:.2f}); eager cdist x{result['eager_cdist_time_ratio']:.2f}",
        file=sys.stderr,
    )
    return result


def _write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results path")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--_rss-child", dest="rss_child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    if args.rss_child:
        print(_peak_rss_child(*json.loads(args.rss_child)))
        return {}

    if args.quick:
        batch, dim, heads, lengths, warmup, repeats = 2, 32, 4, {"main": 8, "long": 16}, 1, 3
    else:
        batch, dim, heads, lengths, warmup, repeats = 16, 256, 4, {"main": 64, "long": 256}, 3, 60
    configs = {
        # the long config is ~10x slower per step: fewer repeats keep the run short
        name: bench_config(
            name, batch, length, dim, heads, warmup, max(3, repeats // (length // 64))
        )
        for name, length in lengths.items()
    }
    summary = {
        "time_ratio": configs["main"]["time_ratio"],
        "memory_ratio": configs["main"]["memory_ratio"],
        "long_time_ratio": configs["long"]["time_ratio"],
        "long_memory_ratio": configs["long"]["memory_ratio"],
        "eatt_ms": configs["main"]["eatt"]["time"]["median_ms"],
        "vanilla_ms": configs["main"]["vanilla"]["time"]["median_ms"],
        "long_eatt_ms": configs["long"]["eatt"]["time"]["median_ms"],
        "long_vanilla_ms": configs["long"]["vanilla"]["time"]["median_ms"],
        "eager_cdist_time_ratio": configs["main"]["eager_cdist_time_ratio"],
        "long_eager_cdist_time_ratio": configs["long"]["eager_cdist_time_ratio"],
    }
    results = {
        **summary,
        "quick": args.quick,
        "configs": configs,
        "memory_measure": (
            "bytes of distinct tensors saved for backward (saved_tensors_hooks, by storage, "
            "excluding parameters and the input); peak_rss_bytes = VmHWM increase over one "
            "forward+backward in a fresh subprocess"
        ),
        "time_measure": (
            "median wall time of forward+backward (time.perf_counter), kinds interleaved; "
            "eatt uses the default L1 kernel (L1_IMPL='auto': torch.compile'd above "
            "L1_COMPILE_MIN_ELEMENTS, compile time in first_call_ms); eatt_eager_cdist_time "
            "forces the eager torch.cdist kernel"
        ),
        "l1_impl": F.L1_IMPL,
        "l1_compile_min_elements": F.L1_COMPILE_MIN_ELEMENTS,
        "env": {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "machine": platform.machine(),
            "processor": platform.processor(),
        },
    }
    _write_json(args.out, results)
    print(json.dumps(summary))
    return results


if __name__ == "__main__":
    main()
