"""The folded engine's folding (rtl_sim/folded.py): LANES keys scored per cycle, SIMD features
per cycle, PE columns of E-ATT's V/O tile; the foldings a reuse factor selects, the peer kinds'
foldings at equal cycles, and the cycles per call each folding takes (docs/folded.md).
"""

from __future__ import annotations

from eatt.config import CoreConfig
from eatt.mechanisms import mechanism_of


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check_folding(cfg: CoreConfig, lanes: int, simd: int, pe: int | None = None) -> None:
    """ValueError (one line, naming the flag and what is allowed) for a bad folding."""
    for flag, value, of, what in (
        ("--lanes", lanes, cfg.len_k, "len_k"),
        ("--simd", simd, cfg.d_head, "d_head = dim / heads"),
        ("--pe", simd if pe is None else pe, simd, "simd"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or of % value:
            allowed = ", ".join(str(d) for d in _divisors(of))
            raise ValueError(
                f"{flag}: must divide {what} = {of} (allowed: {allowed}), got {value!r}"
            )
    if pe is not None and pe != simd and not mechanism_of(cfg).binarized:
        raise ValueError(
            f"--pe: only E-ATT narrows its V/O tile (vanilla's one tile computes Q, K, V and O: "
            f"pe = simd = {simd}), got {pe}"
        )


def default_folding(cfg: CoreConfig) -> dict[str, int]:
    """lanes: the largest divisor of len_k up to 4; simd: the largest divisor of d_head up to 4;
    pe = simd."""
    simd = max(d for d in _divisors(cfg.d_head) if d <= 4)
    return {"lanes": max(d for d in _divisors(cfg.len_k) if d <= 4), "simd": simd, "pe": simd}


def datapath_cost(cfg: CoreConfig, lanes: int, simd: int, pe: int) -> int:
    """A size estimate of the folded datapath in adder-equivalents, for choosing a folding: a
    multiplier counts as weight_bits adders (an array multiplier's rows). vanilla: the S x S
    multiply tile, P x S dot-product lanes and P x S numerator products; E-ATT: the S x S
    select tile (adders), the S x PE multiply tile, P x S L1 lanes (a subtract and an add
    each) and the P x S numerator products."""
    s, p, w = simd, lanes, cfg.weight_bits
    mechanism = mechanism_of(cfg)
    if mechanism.binarized:  # E-ATT's select tile
        return w * (s * pe + p * s) + s * s + s * pe + 2 * p * s + p * s
    lane = mechanism.folded_lane_terms(s)  # a lane's products (RandInit: none, a read)
    return (w + 1) * (s * s + p * s + p * lane)


def folding_for_reuse(cfg: CoreConfig, reuse: int) -> dict[str, int]:
    """The folding a ``reuse_factor`` selects: of every (lanes, simd, pe) whose cycles per call
    (II, :func:`folded_cycles`) are at most ``reuse``, the one with the least datapath
    (:func:`datapath_cost`), fewer cycles among equals. ValueError (one line) when even the
    widest folding needs more cycles."""
    best = None
    for lanes in _divisors(cfg.len_k):
        for simd in _divisors(cfg.d_head):
            for pe in _divisors(simd) if mechanism_of(cfg).binarized else [simd]:
                ii = folded_cycles(cfg, lanes, simd, pe)["ii"]
                cost = (datapath_cost(cfg, lanes, simd, pe), ii)
                if ii <= reuse and (best is None or cost < best[0]):
                    best = (cost, lanes, simd, pe)
    if best is None:
        fewest = folded_cycles(cfg, cfg.len_k, cfg.d_head)["ii"]
        raise ValueError(
            f"reuse_factor: {reuse} is below the folded engine's fewest cycles per call, "
            f"{fewest} (lanes {cfg.len_k}, simd {cfg.d_head}); 1 is the unrolled core"
        )
    return {"lanes": best[1], "simd": best[2], "pe": best[3]}


def peer_foldings(cfg: CoreConfig, reuse: int) -> dict[str, dict[str, int]]:
    """The E-ATT engine and its dot-product peer at equal cycles per call, as the flows compare
    them: vanilla takes the folding ``reuse`` selects for it (:func:`folding_for_reuse`), E-ATT
    the same lanes and simd with the narrowest multiply walk (the least pe) whose II is at most
    vanilla's: pe = simd / 2 where len_q <= len_k (two cycles fewer than vanilla; docs/folded.md,
    "Two projection walks"), else pe = simd; a Synthesizer's config (Dense, RandInit) adds its
    own kind, the folding R selects for it (its score phase differs: no equal lanes to keep).
    ValueError (one line) as folding_for_reuse."""
    peer = cfg.replace(kind="vanilla")
    try:
        dot = folding_for_reuse(peer, reuse)
    except ValueError as err:  # the pair needs the peer: say whose fewest cycles these are
        raise ValueError(f"{err} (the vanilla peer's, which the pair needs)") from None
    bound = folded_cycles(peer, **dot)["ii"]
    eatt = cfg.replace(kind="eatt")
    lanes, simd = dot["lanes"], dot["simd"]
    pe = min(
        p for p in _divisors(simd) if folded_cycles(eatt, lanes, simd, p)["ii"] <= bound
    )  # pe = simd always qualifies: E-ATT's two walks take fewer cycles than vanilla's one
    pair = {"eatt": {"lanes": lanes, "simd": simd, "pe": pe}, "vanilla": dot}
    if cfg.kind not in pair:  # a Synthesizer: its own least datapath within R, as vanilla's
        pair[cfg.kind] = folding_for_reuse(cfg, reuse)
    return pair


#: cycles that drain a projection walk's pipeline after a pass (folded_proj_walk.sv: stage 1
#: the tile, stage 2 the accumulators), adder_levels 0
WALK_DRAIN = 2


#: cycles per query and head that drain the attention phases' pipelines (folded_attention.sv):
#: three each for scores, exp and numerators (their stages 1-3 after the last stage 0)
ATTENTION_FILL = 9


def tree_stages(simd: int, adder_levels: int = 0) -> int:
    """Stages adder_levels N >= 1 adds to a walk's tile or a score lane (folded_proj_walk.sv
    EXTRA less its first read register, folded_attention.sv S_EXTRA): one for the registered
    reads, one for the registered terms and one after every N levels of the simd-term adder
    tree (ceil(log2 simd) levels) but the last; 0 without adder_levels."""
    if not adder_levels:
        return 0
    depth = (simd - 1).bit_length()
    return 2 + ((depth - 1) // adder_levels if depth else 0)


def walk_drain(simd: int, adder_levels: int = 0) -> int:
    """A walk's drain cycles a pass (folded_proj_walk.sv DRAIN): WALK_DRAIN + tree_stages, and
    with adder_levels five more (the memories' words registered twice before the operand is
    chosen from them: the block RAM's output register, then beside the walk; the chunk's codes
    registered before the memories they are written to; a multiply walk's products with a
    register on each side of the DSP multiplier, MUL_REGS 3: two, which the select walk pads
    to drain alike)."""
    return WALK_DRAIN + tree_stages(simd, adder_levels) + (5 if adder_levels else 0)


def walk_start(adder_levels: int = 0) -> int:
    """Cycles adder_levels >= 1 adds at the start of each walk job, before and after attention
    (folded_attention.sv g_start_reg: the hand-over's decision registered beside each walk);
    0 without adder_levels."""
    return 1 if adder_levels else 0


def max_stages(lanes: int, adder_levels: int = 0) -> int:
    """Cycles adder_levels N >= 1 gives the max over a key block's lanes (folded_attend.sv
    MAX_PIPE, folded_max_tree STAGES): a register after every N of its ceil(log2 lanes)
    compare levels and after the last; one for a single lane; 0 without adder_levels."""
    if not adder_levels:
        return 0
    depth = (lanes - 1).bit_length()
    return -(-depth // adder_levels) if depth else 1


def attention_fill(
    simd: int, adder_levels: int = 0, lane_terms: int | None = None, lanes: int = 1
) -> int:
    """The attention unit's drain cycles per query and head (folded_attention.sv): three a
    phase (ATTENTION_FILL), and with adder_levels: the score lanes' tree_stages, one more (q
    and k registered twice as read: the block RAM's output register, then beside the lanes),
    the block max's max_stages before max S; six for exp (S, its table's index and word
    registered, the word twice, E's leading one and the reciprocal's index registered);
    twelve for the numerators (e and V registered twice as read, e x V's DSP-sized pieces
    with a register on each side: three; N and R registered beside the multipliers, N x R's
    pieces likewise, N x R, then its shift in two stages: recip_normalize PIPE 3; then O
    registered before its memory).
    ``lane_terms``: a score lane's terms where they are not simd (Mechanism.folded_lane_terms;
    RandInit's 0: its score is read, two stages as a one-term lane's)."""
    lane = simd if lane_terms is None else max(1, lane_terms)
    if not adder_levels:
        return ATTENTION_FILL
    lane_stages = tree_stages(lane, adder_levels) + 1  # + q and k's second read register
    return ATTENTION_FILL + lane_stages + max_stages(lanes, adder_levels) + 18


def folded_cycles(
    cfg: CoreConfig, lanes: int, simd: int, pe: int | None = None, adder_levels: int = 0
) -> dict[str, int]:
    """The engine's cycles per vector with no stall on either stream (folded_attention.sv).

    load: one input beat per cycle; projections: each walk (folded_proj_walk.sv) takes one
    weight tile per cycle plus walk_drain cycles per pass to write the last chunk (more with
    adder_levels: the walks' pipeline registers for a clock); vanilla's one
    walk does K, V, Q before attention; E-ATT's multiply walk (simd / pe = m times narrower)
    does V, m x DC^2 cycles a key token, while the select walk does that token's K in the first DC^2
    (the same y chunks) and a Q token in each of the other m - 1, the Q tokens left after the
    last key token following; the other mechanisms' one walk does its ``folded_passes`` (K, V,
    Q; Dense V, H; RandInit V); O comes after attention, on the multiply walk; per query and
    head: scores (KB x SC: SC = HC, Dense DC, RandInit 1: ``folded_score_chunks``), exp (KB),
    numerators (HC x KB), each a pipeline behind its memory
    reads, ATTENTION_FILL cycles in all to drain them (``attention_fill``: those cycles of a
    call); out: one output beat per cycle, after one cycle reading the first word.

    The phases overlap across vectors (folded_schedule): the loader, the walks (pre and post,
    ``walks``), the attention unit and the output each work on their own vector, one cycle
    between two vectors on a unit (its start: the hand-over flags are registered).
    latency: first input beat accepted -> first output beat of one vector alone (a cycle at
    each of the four hand-overs, one reading the first Z word); ii: first input beat of one
    vector -> the next's in a settled stream, the busiest unit's cycles a vector;
    longest_phase: the longest of load, projections (the walks' work), attention, out."""
    pe = simd if pe is None else pe
    dc, hc, kb = cfg.dim // simd, cfg.d_head // simd, cfg.len_k // lanes
    tiles, m = dc * dc, simd // pe  # S x S tiles of one token; the narrower walk m times more
    drain = walk_drain(simd, adder_levels)
    start = walk_start(adder_levels)
    load = (cfg.len_q + cfg.len_k) * dc
    mechanism = mechanism_of(cfg)
    if mechanism.binarized:  # Q tokens past the (m - 1) slots per key token: after
        rest = max(0, cfg.len_q - (m - 1) * cfg.len_k)
        before = (m * cfg.len_k + rest) * tiles + drain + start
        after = m * cfg.len_q * tiles + drain + start
    else:  # the walk's passes, each its tokens' tiles and a drain
        passes = mechanism.folded_passes
        tokens = sum(cfg.len_q if p == "q" else cfg.len_k for p in passes)
        before = tokens * tiles + len(passes) * drain + start
        after = cfg.len_q * tiles + drain + start
    sc = mechanism.folded_score_chunks(cfg, simd)
    lane = mechanism.folded_lane_terms(simd)
    fill = cfg.len_q * cfg.heads * attention_fill(simd, adder_levels, lane, lanes)
    attention = cfg.len_q * cfg.heads * (kb * sc + kb + kb * hc) + fill
    out = cfg.len_q * dc
    compute = before + attention + after
    walks = before + after + 2  # + each job's start cycle
    return {
        "load": load,
        "projections": before + after,
        "projections_before": before,
        "projections_after": after,
        "attention": attention,
        "attention_fill": fill,
        "out": out,
        "compute": compute,
        "walks": walks,
        "longest_phase": max(load, before + after, attention, out),
        "latency": load + compute + HANDOVER + in_extra(adder_levels) + out_extra(adder_levels),
        "ii": max(walks, attention + 1, load, out + 1 + out_extra(adder_levels)),
    }


#: cycles of a lone vector's latency past its phases: one at each hand-over between units
#: (loader -> walks -> attention -> walks -> out) and one reading the first Z word
HANDOVER = 4


def in_extra(adder_levels: int = 0) -> int:
    """Cycles adder_levels >= 1 adds between a vector's last input beat and its bank's full
    flag (folded_attention.sv g_in_reg: the loader writes x and y a cycle after each beat,
    from registers beside the memories); 0 without adder_levels."""
    return 1 if adder_levels else 0


def out_extra(adder_levels: int = 0) -> int:
    """Cycles adder_levels >= 1 adds before a vector's first output beat (folded_out.sv
    g_out_ahead): each Z read is decided a cycle ahead, its word registered as it leaves the
    memory and written to the output FIFO the cycle after; 0 without adder_levels."""
    return 3 if adder_levels else 0


#: vectors a stream with no stall takes to settle: from the seventh on, every first input beat
#: follows the one before by II (folded_schedule; tests/test_folded.py checks the sizes that
#: matter, the testbench streams at least this many)
SETTLED_VECTORS = 8


def folded_schedule(
    cfg: CoreConfig,
    lanes: int,
    simd: int,
    pe: int | None = None,
    vectors: int = 1,
    adder_levels: int = 0,
) -> dict[str, list[int]]:
    """The cycle of each vector's first input beat and first output beat (relative to the first
    vector's first input beat) when `vectors` vectors stream with no stall on either side:
    the overlapped engine's hand-over (folded_attention.sv) replayed unit by unit.

    A unit starts a vector in the cycle after it is free, its input bank full and its output
    bank free (flags set at the end of the producer's last cycle); its last cycle is its start
    + its phase's cycles (load: the beats - 1; out: the beats, the first offered a cycle after
    the start). The walks owe at most two posts: with two, the older post waits; with one, a
    pre that can go goes first, else the post."""
    c = folded_cycles(cfg, lanes, simd, pe, adder_levels)
    extra = out_extra(adder_levels)
    landed = in_extra(adder_levels)  # the last beat's write, then the bank full
    load, pre, attn, post, out = (
        c["load"],
        c["projections_before"],
        c["attention"],
        c["projections_after"],
        c["out"],
    )
    first_in: list[int] = []
    first_out: list[int] = []
    pre_end: list[int] = []  # the last cycle of each unit's job, by vector
    att_end: list[int] = []
    post_end: list[int] = []
    out_end: list[int] = []

    def before2(ends: list[int], v: int) -> int:  # bank v mod 2 freed by vector v - 2's end
        return ends[v - 2] + 1 if v >= 2 else 0

    loader_free = walk_free = att_free = out_free = 0
    while len(post_end) < vectors:
        while len(first_in) < vectors and len(first_in) - 2 < len(pre_end):
            t = max(loader_free, before2(pre_end, len(first_in)))
            first_in.append(t)
            loader_free = t + load
        while len(att_end) < len(pre_end) and len(att_end) - 2 < len(post_end):
            v = len(att_end)
            g = max(att_free, pre_end[v] + 1, before2(post_end, v))
            att_end.append(g + attn)
            att_free = g + attn + 1
        n_pre, n_post = len(pre_end), len(post_end)
        # what these read is known: with owed < 2, attention of vector n_pre - 2 waited only
        # on posts before n_post; a post's vector had its pre and attention computed above
        owed = n_pre - n_post
        go_pre = go_post = None
        if n_pre < vectors and owed < 2:
            go_pre = max(walk_free, first_in[n_pre] + load + landed, before2(att_end, n_pre))
        if owed:
            go_post = max(walk_free, att_end[n_post] + 1, before2(out_end, n_post))
        if go_pre is None or (go_post is not None and go_post < go_pre):
            post_end.append(go_post + post)
            walk_free = post_end[-1] + 1
        else:
            pre_end.append(go_pre + pre)
            walk_free = pre_end[-1] + 1
        while len(out_end) < len(post_end):
            g = max(out_free, post_end[len(out_end)] + 1)
            first_out.append(g + 1 + extra)
            out_end.append(g + out + extra)
            out_free = g + out + extra + 1
    return {"in": first_in, "out": first_out}


#: the formula folded_cycles evaluates, as written in metadata.json and docs/folded.md
CYCLE_FORMULA = {
    "symbols": "DC = dim/simd, HC = d_head/simd, KB = len_k/lanes, M = simd/pe, SC = the "
    "score chunks of a key block: HC (eatt, vanilla), DC (dense), 1 (randinit)",
    "load": "(len_q + len_k) * DC",
    "projections": (
        "vanilla: (2*len_k + len_q) * DC^2 + 3 * 2 before attention (K, V, Q), len_q * DC^2 + 2 "
        "after; dense: (len_k + len_q) * DC^2 + 2 * 2 before (V, H), randinit: len_k * DC^2 + 2 "
        "before (V), both len_q * DC^2 + 2 after; eatt: (M * len_k + max(0, len_q - (M - 1) * "
        "len_k)) * DC^2 + 2 before (the "
        "select and multiply walks at once), M * len_q * DC^2 + 2 after (2: a walk's drain "
        "cycles a pass; with adder_levels N >= 1: 7 + (ceil(log2 simd) - 1) // N, simd > 1, "
        "and + 1 before and + 1 after: each walk job's start registered)"
    ),
    "attention": "len_q * heads * (KB*SC + KB + KB*HC + 9)  (9: the pipelines' drain cycles; "
    "with adder_levels N >= 1: 9 + 21 + (ceil(log2 simd) - 1) // N + max(1, ceil(ceil(log2 "
    "lanes) / N)), simd > 1; randinit: 9 + 21 + max(1, ...))",
    "out": "len_q * DC",
    "longest_phase": "max(load, projections, attention, out)",
    "latency": "load + projections + attention + 4  (one vector alone: first input beat -> "
    "first output beat; a cycle at each hand-over between units, one reading Z; with "
    "adder_levels + 1 + 3: the loader's writes registered, Z read ahead into a FIFO)",
    "ii": "max(projections + 2, attention + 1, load, out + 1 (+ 3 with adder_levels))  (the "
    "phases overlap across "
    "vectors: the busiest unit, + its start cycle; first input beat -> the next vector's, "
    "the stream settled)",
}
