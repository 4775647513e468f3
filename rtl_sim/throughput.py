"""Throughput as users count it: calls and tokens per second of a core at a measured clock.

Every report of an RTL folder that measures a clock (``eatt power``: OpenSTA's Fmax at the ASIC
cells; ``eatt pnr``: nextpnr's Fmax on the FPGA) turns it into calls per second with the
folder's own cycles per call (metadata.json), so a number a user compares is the rate, not the
clock:

    level       cycles a call (II)                 tokens a call
    alignment   1 (fully pipelined, ap_ctrl_hs)    len_q (query tokens scored against len_k)
    attention   1                                  len_q
    folded      metadata ii_cycles (the busiest     len_q
                unit's: the cocotb stream checks
                every beat against folded_schedule)
    window      window_rows (one decoder step)     1 (the step's query token)

    calls_per_s  = Fmax / II          tokens_per_s = calls_per_s x tokens a call
    latency_us   = latency_cycles / Fmax (a call's first input to its output)
    power_mw     = energy a call x calls_per_s (where the energy is known: the core busy at Fmax)

The unrolled cores' II of 1 is their ap_pipe_ctrl protocol (a start every cycle); the folded
engine's phases overlap across calls (docs/folded.md, "Overlapped phases"), so its II is its
busiest unit's cycles a call (the walks or the attention unit), not the sum of its phases.
"""

from __future__ import annotations


def ii_cycles(meta: dict) -> int:
    """Cycles between the starts of consecutive calls when the core is kept busy."""
    level = meta["level"]
    if level == "folded":
        return int(meta["ii_cycles"])
    if level == "window":
        return int(meta["window_rows"])
    return 1


def latency_cycles(meta: dict) -> int | None:
    for key in ("latency_cycles", "latency_cycles_max"):
        if isinstance(meta.get(key), int):
            return meta[key]
    return None


def tokens_per_call(meta: dict) -> int:
    """Query tokens a call: len_q, or the window unit's one decoder step."""
    return 1 if meta["level"] == "window" else int(meta["config"]["len_q"])


def throughput(meta: dict, fmax_mhz: float | None, energy_pj: float | None = None) -> dict:
    """{"fmax_mhz", "ii_cycles", "calls_per_s", "tokens_per_call", "tokens_per_s",
    "latency_cycles", "latency_us", "energy_per_call_pj", "power_mw"} of the core of ``meta``
    (an RTL folder's metadata.json) at ``fmax_mhz``; the rates are None without a clock."""
    ii, tokens, lat = ii_cycles(meta), tokens_per_call(meta), latency_cycles(meta)
    ok = bool(fmax_mhz) and fmax_mhz > 0
    calls = fmax_mhz * 1e6 / ii if ok else None
    return {
        "fmax_mhz": fmax_mhz,
        "ii_cycles": ii,
        "calls_per_s": round(calls, 3) if calls else None,
        "tokens_per_call": tokens,
        "tokens_per_s": round(calls * tokens, 3) if calls else None,
        "latency_cycles": lat,
        "latency_us": round(lat / fmax_mhz, 4) if ok and lat is not None else None,
        "energy_per_call_pj": energy_pj,
        "power_mw": round(energy_pj * calls * 1e-9, 6) if calls and energy_pj else None,
    }


def _rate(v: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.4g} {unit} "
    return f"{v:.4g} "


def line(t: dict | None) -> str:
    """One report line: ``throughput   1.23 k calls/s, 78.7 k tokens/s at 69.1 MHz (II ...)``
    (a result written before the throughput was reported has none)."""
    if not t or not t["calls_per_s"]:
        return "throughput   no clock measured"
    lat = f", latency {t['latency_us']:g} us" if t["latency_us"] is not None else ""
    pw = f", {t['power_mw']:.4g} mW busy" if t["power_mw"] else ""
    return (
        f"throughput   {_rate(t['calls_per_s'])}calls/s, {_rate(t['tokens_per_s'])}tokens/s at "
        f"{t['fmax_mhz']:g} MHz (II {t['ii_cycles']:,} cycles, {t['tokens_per_call']} tokens a "
        f"call{lat}{pw})"
    )
