"""The hardware units' configurations: typed, validated objects.

A core (:class:`CoreConfig`, one kind per attention mechanism of eatt.mechanisms: eatt and
vanilla in the E-ATT paper's words, the Synthesizer's dense and randinit) is one
multi-head attention layer in hardware: ``len_q`` queries attend to ``len_k`` keys/values of
width ``dim`` split into ``heads``. Every
stage (golden model, Brevitas, QONNX, hls4ml, RTL) is driven by this object, so every check of
a value lives here, and every error names the key it is about in one line.

Each hardware unit declares its config class in eatt/units.py; :meth:`CoreConfig.from_dict`
(and so :func:`load_config`) builds the class of the ``kind`` it reads. The windowed
cross-attention unit of one decoding step (quant/window.py, docs/window.md) is
:class:`WindowConfig`: a core's formats plus the keys of :data:`WINDOW_KEYS`, with ``len_q`` 1
and ``len_k`` the memory size l_k.

Formats are signed fixed point ``<bits, frac>``: an integer ``n`` stands for ``n * 2**-frac``.
docs/golden.md explains what each width is for and why nothing overflows.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import yaml

from eatt.fileio import (  # noqa: F401 - re-exported: the file helpers' old home
    FILE_MODE,
    ConfigError,
    atomic_write,
    atomic_write_text,
    first_line,
    read_mapping,
)
from eatt.mechanisms import MECHANISMS, core_kinds, query_key_scores

#: renamed keys and kinds: an old config gets one line naming the new word
RENAMED_KEYS = {"half_width": "window_d", "sigma": "window_sigma", "score": "window_score"}
RENAMED_KINDS = {"dot": "vanilla"}
#: the window unit's score functions: the mechanisms scoring queries against keys (Luong's
#: names: "dot"; E-ATT's "eatt", -L1 of binarized-query projections)
SCORES = query_key_scores()
#: the score function (mechanism) of each core kind, and back: vanilla scores with Q . K
SCORE_OF_KIND = {m.kind: m.name for m in MECHANISMS.values()}
KIND_OF_SCORE = {score: kind for kind, score in SCORE_OF_KIND.items()}
POSITIONS = ("none", "gaussian", "flexible")


#: every config class by the kinds it describes: CoreConfig and each subclass register
#: themselves (CoreConfig.__init_subclass__); the units name the same classes (eatt/units.py)
CONFIG_CLASSES: dict[str, type] = {}


def kinds() -> tuple[str, ...]:
    """Every kind a config class describes (each a registered unit's, tests/test_units.py)."""
    return tuple(CONFIG_CLASSES)


def config_class(kind: Any) -> type[CoreConfig]:
    """The config class of a kind (the unit's ``config`` stage); ConfigError if none."""
    if isinstance(kind, str) and kind in RENAMED_KINDS:
        raise ConfigError(f"kind: {kind!r} is now called {RENAMED_KINDS[kind]!r}")
    if not isinstance(kind, str) or kind not in kinds():
        raise ConfigError(f"kind: must be one of {', '.join(kinds())}, got {kind!r}")
    return CONFIG_CLASSES[kind]


@dataclass(frozen=True)
class CoreConfig:
    """One attention core. Required: kind, len_q, len_k, dim, heads; the rest has defaults."""

    kind: str
    len_q: int
    len_k: int
    dim: int
    heads: int
    #: binarization threshold of E-ATT's selection (Eq. 4: 1 if x > tau), 1.0 as in the paper
    tau: float = 1.0
    #: inputs X (queries side) and Y (keys/values side): signed <in_bits, in_frac>
    in_bits: int = 8
    in_frac: int = 4
    #: W_Q, W_K, W_V, W_O: signed narrow-range integers |w| <= 2**(weight_bits-1) - 1
    weight_bits: int = 8
    #: fraction bits of the weights; None means weight_bits - 2 (range about +-2)
    weight_frac: int | None = None
    #: Q and K are requantized (arithmetic right shift, derived from their bound) to this width
    qk_bits: int = 12
    #: V (and the attention output before W_O, a convex combination of V) width
    v_bits: int = 12
    #: output of W_O, requantized like Q/K
    out_bits: int = 12
    #: softmax exp table: entries (a power of two) and fraction bits (exp(0) = 2**exp_frac)
    exp_table_size: int = 256
    exp_frac: int = 10
    #: reciprocal table: entries (a power of two) indexed by the mantissa of the exp sum
    recip_table_size: int = 256
    recip_frac: int = 12
    #: per-call masks (issue 18; len_q and len_k are then maxima): key_padding adds an input
    #: ``length`` in [1, len_k] (keys j >= length get no weight), causal an input ``offset`` in
    #: [0, len_k - 1] (query i sees keys j <= i + offset: incremental decoding)
    key_padding: bool = False
    causal: bool = False
    #: hls4ml's word for folding (issue 19): at most this many cycles per call. 1 is the
    #: unrolled core (every operation in one cycle); R > 1 selects the folded engine with the
    #: fewest lanes and features per cycle whose cycles per call (II) are at most R
    #: (rtl_sim/folded.py folding_for_reuse, docs/folded.md)
    reuse_factor: int = 1

    #: keys that shape the hardware, not the function: a core at any of their values computes
    #: the same outputs (captures, a trained layer's weights, golden checks hold for all)
    HARDWARE_KEYS: ClassVar[tuple[str, ...]] = ("reuse_factor",)

    #: the kinds this class describes, one per attention mechanism (eatt.mechanisms; the unit
    #: registers the same in eatt/units.py)
    KINDS: ClassVar[tuple[str, ...]] = core_kinds()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _register(cls)

    #: the embedded default (`make flow`); a kind of the class other than the file's is
    #: the file with that kind
    DEFAULT_FILE: ClassVar[str] = "eatt_default.yaml"

    def __post_init__(self) -> None:
        if self.weight_frac is None:
            object.__setattr__(self, "weight_frac", self.weight_bits - 2)
        if not isinstance(self.kind, str) or self.kind not in self.KINDS:
            raise ConfigError(
                f"kind: {type(self).__name__} is one of {', '.join(self.KINDS)}, got {self.kind!r}"
            )
        self._validate()

    # -- derived quantities -------------------------------------------------------------------
    @property
    def d_head(self) -> int:
        return self.dim // self.heads

    @property
    def tau_int(self) -> int:
        """Integer threshold on the input grid: x > tau  <=>  x_int > floor(tau * 2**in_frac)."""
        return math.floor(self.tau * 2**self.in_frac)

    @property
    def weight_max(self) -> int:
        return 2 ** (self.weight_bits - 1) - 1

    @property
    def score_kind(self) -> str:
        """The score function (a mechanism's name): eatt (-L1), dot (vanilla's Q . K), dense,
        randinit."""
        return SCORE_OF_KIND.get(self.kind, self.kind)

    @property
    def window_rows(self) -> int:
        """Most key rows one softmax reads: every key of a core."""
        return self.len_k

    @property
    def softmax_terms(self) -> int:
        """Most weight units one softmax sums (docs/golden.md): a weight of 1 per row."""
        return self.window_rows

    @property
    def score_lanes(self) -> int:
        """|q - k| (or q k) lanes computed at once: the golden model holds them all."""
        return self.len_q * self.len_k * self.dim

    def rtl_megabytes(self) -> float:
        """Estimated SystemVerilog of the unrolled core, in MB."""
        products = 2 * (self.len_q + self.len_k) * self.dim * self.dim
        return (self.score_lanes * RTL_BYTES_PER_LANE + products * RTL_BYTES_PER_PRODUCT) / 1e6

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def function_dict(self) -> dict[str, Any]:
        """to_dict without HARDWARE_KEYS: what decides the core's outputs."""
        return {k: v for k, v in asdict(self).items() if k not in self.HARDWARE_KEYS}

    def replace(self, **changes: Any) -> CoreConfig:
        """A copy with ``changes`` (weight_frac re-derived when weight_bits changes alone); a
        new kind may change the class: keys the new class lacks are dropped."""
        data = self.to_dict()
        if "weight_bits" in changes and "weight_frac" not in changes:
            data["weight_frac"] = None  # re-derive
        data.update(changes)
        cls = config_class(data.get("kind"))
        known = {f.name for f in fields(cls)}
        return cls.from_dict({k: v for k, v in data.items() if k in known or k in changes})

    @classmethod
    def from_dict(cls, data: Any, source: str = "config") -> CoreConfig:
        """The config that ``data`` describes, of its kind's class (a subclass of ``cls``)."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a mapping of keys to values")
        if "kind" not in data:
            raise ConfigError(f"{source}: missing required key 'kind'")
        try:
            target = config_class(data["kind"])
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None
        if not issubclass(target, cls):
            raise ConfigError(
                f"{source}: kind: expected one of {', '.join(cls.KINDS)}, got {data['kind']!r}"
            )
        known = {f.name for f in fields(target)}
        unknown = sorted(set(data) - known)
        if unknown:
            key = unknown[0]
            if key in RENAMED_KEYS and RENAMED_KEYS[key] in known:
                raise ConfigError(f"{source}: key '{key}' is now called '{RENAMED_KEYS[key]}'")
            if owners := _kind_with(key):
                raise ConfigError(
                    f"{source}: {key}: only for kind {owners} (kind is {data['kind']})"
                )
            raise ConfigError(f"{source}: unknown key '{key}' (known: {', '.join(sorted(known))})")
        missing = [k for k in ("len_q", "len_k", "dim", "heads") if k not in data]
        if missing:
            raise ConfigError(f"{source}: missing required key '{missing[0]}'")
        try:
            return target(**data)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None

    # -- checks ---------------------------------------------------------------------------------
    @property
    def mask_inputs(self) -> tuple[str, ...]:
        """The per-call mask inputs the core takes: ("length",) with key_padding, ("offset",)
        with causal (eatt.quant.golden.MASK_INPUTS is their order)."""
        return (("length",) if self.key_padding else ()) + (("offset",) if self.causal else ())

    def _validate(self) -> None:
        for key in ("key_padding", "causal"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"{key}: must be true or false, got {getattr(self, key)!r}")
        for key, (low, high) in _INT_RANGES.items():
            _check_int(key, getattr(self, key), low, high)
        if self.dim % self.heads:
            raise ConfigError(f"heads: dim={self.dim} is not divisible by heads={self.heads}")
        tau = self.tau
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau):
            raise ConfigError(f"tau: must be a finite number, got {tau!r}")
        in_lo, in_hi = -(2 ** (self.in_bits - 1)), 2 ** (self.in_bits - 1) - 1
        mechanism = MECHANISMS.get(self.score_kind)  # tau is the binarization's threshold
        binarized = mechanism is not None and mechanism.binarized
        if binarized and not in_lo - 1 <= tau * 2**self.in_frac <= in_hi:
            # A threshold outside the input range makes every bit constant: surely a mistake.
            lo, hi = in_lo / 2**self.in_frac, in_hi / 2**self.in_frac
            raise ConfigError(f"tau: {tau} is outside the input range [{lo}, {hi}]")
        for key in ("exp_table_size", "recip_table_size"):
            value = getattr(self, key)
            if value & (value - 1):
                raise ConfigError(f"{key}: must be a power of two, got {value}")
        # Widest intermediate: the softmax numerator times the reciprocal (docs/golden.md).
        numer_bits = math.ceil(math.log2(self.softmax_terms)) + self.exp_frac + 1 + self.v_bits
        if numer_bits + self.recip_frac + 1 > 62:
            raise ConfigError(
                f"recip_frac: numerator ({numer_bits} bits) times reciprocal "
                f"({self.recip_frac + 1} bits) exceeds 62 bits; lower v_bits, exp_frac or "
                "recip_frac"
            )
        lanes = self.score_lanes
        if lanes > MAX_LANES:
            gb = 24 * lanes / 1e9
            raise ConfigError(
                f"len_q x len_k x dim: {self.len_q} x {self.len_k} x {self.dim} = {lanes:,} score "
                f"lanes; one vector of the golden model would need about {gb:,.0f} GB "
                f"(at most {MAX_LANES:,})"
            )


#: keys of kind window only, with their defaults (docs/window.md)
WINDOW_KEYS = ("window_score", "window_d", "position", "window_sigma", "g_levels", "count_bits")


def _register(cls: type) -> None:
    """Record a config class under each of its KINDS (one class per kind)."""
    for kind in cls.KINDS:
        if CONFIG_CLASSES.setdefault(kind, cls) is not cls:
            raise TypeError(f"kind {kind!r}: {cls.__name__} and {CONFIG_CLASSES[kind].__name__}")


_register(CoreConfig)


@dataclass(frozen=True)
class WindowConfig(CoreConfig):
    """The windowed cross-attention unit of one decoding step (docs/window.md): a core's
    formats (score_kind is window_score) plus the window. len_q must be 1; len_k is l_k."""

    #: score function of the window: "eatt" (L1 of binarized-query projections) or "dot"
    window_score: str = "eatt"
    #: Luong's D, the static maximum half-width: positions [p - D, p + D] (local-p, Eq. 9-10)
    window_d: int = 4
    #: position term in the log domain: "none", "gaussian" (local-p, sigma = D/2) or
    #: "flexible" (Flexible Attention Eq. 5-7, g quantized to g_levels levels)
    position: str = "gaussian"
    #: sigma of the position term; None: D / 2 for gaussian (Luong), 1.5 for flexible (its
    #: Sec. 5.2), as the model's window_sigma
    window_sigma: float | None = None
    #: Flexible's strength g(t) in (0, 1] is an input level l in [0, g_levels]: g = l / g_levels
    g_levels: int = 4
    #: bits of a memory row's count (L0Drop Algorithm 1 compaction): counts in [1, 2**bits - 1]
    count_bits: int = 8

    KINDS: ClassVar[tuple[str, ...]] = ("window",)
    DEFAULT_FILE: ClassVar[str] = "window_default.yaml"

    @property
    def score_kind(self) -> str:
        return self.window_score

    @property
    def window_rows(self) -> int:
        """Most memory rows one window reads: min(2 D + 1, len_k)."""
        return min(2 * self.window_d + 1, self.len_k)

    @property
    def softmax_terms(self) -> int:
        """A row weighs its count, < 2**count_bits (docs/window.md)."""
        return self.window_rows * (2**self.count_bits - 1)

    @property
    def score_lanes(self) -> int:
        """Sequential over the memory: one row's lanes at a time."""
        return self.dim

    def rtl_megabytes(self) -> float:
        """Sequential: the text hardly grows with the memory (38,171 B at l_k 16, 38,183 B at
        1024; dim 4)."""
        return 0.04 + self.dim * self.dim * 100 / 1e6

    def _validate(self) -> None:
        if self.len_q != 1:
            raise ConfigError(
                f"len_q: must be 1 for kind window (one decoding step), got {self.len_q}"
            )
        if self.window_score not in SCORES:
            raise ConfigError(
                f"window_score: must be one of {', '.join(SCORES)}, got {self.window_score!r}"
            )
        if self.position not in POSITIONS:
            raise ConfigError(
                f"position: must be one of {', '.join(POSITIONS)}, got {self.position!r}"
            )
        for key in ("key_padding", "causal"):
            if getattr(self, key) is not False:
                raise ConfigError(
                    f"{key}: the window unit takes its own length input and no causal mask; "
                    "leave it false"
                )
        for key, low, high in (("window_d", 0, 4096), ("g_levels", 1, 64), ("count_bits", 1, 16)):
            _check_int(key, getattr(self, key), low, high)
        sigma = self.window_sigma
        if sigma is not None and (
            isinstance(sigma, bool)
            or not isinstance(sigma, (int, float))
            or not (math.isfinite(sigma) and sigma > 0)
        ):
            raise ConfigError(
                f"window_sigma: must be a positive number or null (the paper's pick), got {sigma!r}"
            )
        if self.position == "flexible" and self.window_rows > 2 ** (self.v_bits - 1):
            raise ConfigError(
                f"v_bits: the focus output F (position flexible) is O's normalization clamped "
                f"into v_bits, which must hold a window's {self.window_rows} rows: at least "
                f"{self.window_rows.bit_length() + 1}, got {self.v_bits}"
            )
        super()._validate()

    def core(self) -> CoreConfig:
        """The core config (kind = the score function) whose formats and tables it shares."""
        data = {f.name: getattr(self, f.name) for f in fields(CoreConfig)}
        return CoreConfig.from_dict({**data, "kind": KIND_OF_SCORE[self.window_score]})


def _kind_with(key: str) -> str:
    """The kinds whose config class has this key ('' if none)."""
    found = [k for k, cls in CONFIG_CLASSES.items() if key in {f.name for f in fields(cls)}]
    return ", ".join(found)


def _check_int(key: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}: must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{key}: must be in [{low}, {high}], got {value}")


_INT_RANGES = {
    # key: (low, high) inclusive; highs keep every intermediate inside int64 (docs/golden.md)
    "len_q": (1, 4096),
    "len_k": (1, 4096),
    "dim": (1, 4096),
    "heads": (1, 4096),
    "in_bits": (2, 16),
    "in_frac": (-16, 32),
    "weight_bits": (2, 16),
    "weight_frac": (-16, 32),
    "qk_bits": (2, 24),
    "v_bits": (2, 24),
    "out_bits": (2, 24),
    "exp_table_size": (2, 65536),
    "exp_frac": (1, 16),
    "recip_table_size": (2, 65536),
    "recip_frac": (2, 20),
    "reuse_factor": (1, 2**31 - 1),
}


#: most score lanes (len_q x len_k x dim) of a core: one vector of the golden model holds a few
#: int64 arrays of that many elements (the L1 broadcast), about 1.6 GB at this bound
MAX_LANES = 2**26
#: bytes of SystemVerilog per score lane (len_q x len_k x dim) and per projection product
#: ((2 len_q + 2 len_k) x dim x dim) of the unrolled cores, fitted to generate_rtl's E-ATT
#: attention level (the larger of the two kinds): 0.73 / 14.8 / 88.6 / 294 MB measured at
#: 8x8x16 / 32x32x32 / 4x4x256 / 64x64x128, estimated 0.7 / 15.2 / 85 / 441 MB
RTL_BYTES_PER_LANE = 200
RTL_BYTES_PER_PRODUCT = 80
#: most SystemVerilog `eatt rtl` writes for an unrolled core (EATT_MAX_RTL_MB overrides)
MAX_RTL_MB = 512


#: most memory the test vectors of one check may take (inputs, golden outputs, their copies)
MAX_VECTOR_GB = 8.0


def check_vectors(c: CoreConfig, n: int, flag: str = "--vectors") -> None:
    """Refuse, before any work, more test vectors than fit in memory (one-line ConfigError)."""
    per_vector = (2 * c.len_q + c.len_k) * c.dim * 8 * 8  # int64 and float copies
    gb = n * per_vector / 1e9
    if gb > MAX_VECTOR_GB:
        most = int(MAX_VECTOR_GB * 1e9 // per_vector)
        raise ConfigError(
            f"{flag}: {n:,} vectors of this core would need about {gb:,.0f} GB; at most {most:,}"
        )


def rtl_megabytes(c: CoreConfig) -> float:
    """Estimated SystemVerilog of the unit's RTL, in MB."""
    return c.rtl_megabytes()


def check_rtl_size(c: CoreConfig) -> None:
    """Refuse, before any work, an unrolled core whose RTL would be too big to build."""
    limit = float(os.environ.get("EATT_MAX_RTL_MB", MAX_RTL_MB))
    mb = c.rtl_megabytes()
    if mb > limit:
        raise ConfigError(
            f"core too big for unrolled RTL: {c.len_q} x {c.len_k} queries x keys at dim {c.dim} "
            f"would be about {mb:,.0f} MB of SystemVerilog (limit {limit:,.0f} MB, "
            "EATT_MAX_RTL_MB); use smaller len_q, len_k or dim: sizes like this are for the "
            "folded engine (eatt rtl --level folded, docs/folded.md), not the unrolled core"
        )


# -- files ----------------------------------------------------------------------------------------
def load_config(path: str | os.PathLike) -> CoreConfig:
    """Load a core config from YAML (.yaml/.yml) or JSON (.json)."""
    return CoreConfig.from_dict(read_mapping(path), source=str(path))


def save_config(config: CoreConfig, path: str | os.PathLike) -> None:
    """Save as JSON (.json) or YAML (anything else); load_config reads it back equal."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        text = json.dumps(config.to_dict(), indent=2) + "\n"
    else:
        text = yaml.safe_dump(config.to_dict(), sort_keys=False)
    atomic_write_text(path, text)


CONFIGS_DIR = Path(__file__).parent / "configs"
DEFAULT_CONFIG_PATH = CONFIGS_DIR / CoreConfig.DEFAULT_FILE


def default_config(kind: str = "eatt") -> CoreConfig:
    """The embedded default of a kind (what `make flow` runs): its config class's file."""
    base = load_config(CONFIGS_DIR / config_class(kind).DEFAULT_FILE)
    return base if kind == base.kind else base.replace(kind=kind)
