"""How a core is built, apart from the function it computes (issue 41, item 5).

A config (eatt/config.py: CoreConfig, WindowConfig) says what a core computes: kind, sizes,
masks, formats, and ``reuse_factor``, the HLS contract a config file carries (a YAML
``reuse_factor:`` stays there). :class:`BuildOptions` says how that core is turned into
hardware: which RTL levels, the folded engine's folding, the adder trees' pipelining
(``adder_levels``), the E-ATT datapath variant, the hls4ml backend and reuse override, and what
the steps of a flow do (eatt/steps.py). ``generate_rtl(cfg, weights, out_dir, level,
options)`` (rtl_sim/generate.py) and the units' generators it dispatches to take it whole.

Imports nothing of eatt: the steps, rtl_sim and hls all sit above it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BuildOptions:
    """How a core is built, apart from the function it computes (its config and weights)."""

    #: RTL levels built and simulated; the first is the one synthesized and measured
    #: (generate_rtl writes one level, its own argument)
    levels: tuple = ("alignment",)
    #: the folded engine's {lanes, simd, pe[, macro_rows]} (level "folded"), or None
    folding: dict | None = None
    #: at most N adder levels between registers in the adder trees; 0: the fixed pipeline
    adder_levels: int = 0
    #: keys of EATT_DATAPATH (rtl_sim/eatt_datapath.py) the unrolled E-ATT levels override
    #: (metadata.json "eatt_datapath"), or None
    datapath: dict | None = None
    #: hls4ml backend and reuse factor (None: the config's)
    backend: str = "vitis"
    hls_reuse_factor: int | None = None
    abc_verify: bool = True
    #: at most this many vectors in the netlist simulation of the power step (minutes per 100)
    power_vectors: int = 100
    #: a missing tool of the power step skips it with a line (a flow) instead of failing (a sweep)
    power_optional: bool = False
    #: per-level results keyed by level ({"alignment": ...}); else the one level's own result
    by_level: bool = False

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """ValueError (one line) for a choice no generator takes; run when made, and again by
        generate_rtl (a field may be set after)."""
        n = self.adder_levels
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"adder_levels: must be an integer >= 0, got {n!r}")
