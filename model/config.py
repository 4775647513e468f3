"""The model description: :class:`ModelConfig`, the typed, validated config of a seq2seq model
(YAML/JSON; docs/models.md lists the keys), and the names it chooses from.

It sits below every model module (seq2seq.py, rnn.py, windowed.py import it; it imports none of
them). ``eatt.model.seq2seq`` re-exports everything here, so ``from eatt.model.seq2seq import
ModelConfig`` keeps working.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from eatt.config import ConfigError, CoreConfig, WindowConfig, read_mapping
from eatt.mechanisms import synthesized_kinds

from .data import check_fields, dataclass_from_dict

__all__ = [
    "ARCHS",
    "ATTENTION_KINDS",
    "L0DROP_RULES",
    "MAX_LAYER_PARAMETERS",
    "QUANT_KINDS",
    "POSITIONAL_KINDS",
    "QUANT_WINDOW_KINDS",
    "FLEXIBLE_KINDS",
    "ROLES",
    "WINDOW_KINDS",
    "WINDOW_GAUSSIANS",
    "WINDOW_SCORES",
    "ModelConfig",
    "load_model_config",
]

ATTENTION_KINDS = (
    "vanilla",
    "eatt",
    "binary-dot",
    "linear-l1",
    "dense",
    "randinit",
    "quant-eatt",
    "quant-vanilla",
    "quant-dense",
    "quant-randinit",
)
#: kinds run by eatt.quant.modules.QuantAttentionCore, and the hardware kind of each
QUANT_KINDS = {
    "quant-eatt": "eatt",
    "quant-vanilla": "vanilla",
    "quant-dense": "dense",
    "quant-randinit": "randinit",
}
#: Luong / Flexible windowed single-head cross-attention (eatt.model.windowed); ``cross`` only
WINDOW_KINDS = ("global", "local-m", "local-p", "flexible")
#: windowed kinds computed by the window unit (eatt.quant.window_cross), and the float kind of
#: each; ``cross`` only (docs/window.md, "Models on the unit")
QUANT_WINDOW_KINDS = {
    "quant-global": "global",
    "quant-local-m": "local-m",
    "quant-local-p": "local-p",
    "quant-flexible": "flexible",
}
#: cross kinds whose weights depend on source positions: L0Drop's compacted memory
#: (Algorithm 1) renumbers them, so these decode on the full gated memory
POSITIONAL_KINDS = (
    "local-m", "local-p", "flexible", "quant-local-m", "quant-local-p", "quant-flexible"
)  # fmt: skip
#: the cross kinds with Flexible Attention's strength g(t) (Eq. 8) and its Eq. 9 loss term
FLEXIBLE_KINDS = ("flexible", "quant-flexible")
#: scores the window unit computes
QUANT_WINDOW_SCORES = ("eatt", "dot")
WINDOW_SCORES = ("dot", "general", "concat", "eatt")
#: where local-p's Gaussian weight goes (ModelConfig.window_gaussian)
WINDOW_GAUSSIANS = ("after", "inside")
#: the cross kinds with a Gaussian (window_gaussian)
GAUSSIAN_KINDS = ("local-p", "quant-local-p")
#: the cross kinds with a real centre the window unit takes as an integer (window_p_round):
#: local-p's p_t, Flexible's focus p_{t-1}
CENTRE_KINDS = (*GAUSSIAN_KINDS, *FLEXIBLE_KINDS)
ARCHS = ("transformer", "lstm")
L0DROP_RULES = ("freq", "inv-freq", "group")
ROLES = ("enc_self", "dec_self", "cross")

#: keys renamed (one name per idea across the toolkit's layers): old -> new
RENAMED_KEYS = {"flexible_sigma": "window_sigma"}

#: most layer weights of a model: 16 bytes a weight with Adam's state is 16 GB
MAX_LAYER_PARAMETERS = 1_000_000_000


@dataclass(frozen=True)
class ModelConfig:
    """A Transformer encoder-decoder. Every key is optional; docs/models.md lists them."""

    dim: int = 128
    heads: int = 4
    ffn_dim: int = 256
    enc_layers: int = 2
    dec_layers: int = 2
    dropout: float = 0.1
    #: "pre" (LayerNorm before each sub-layer, plus a final one) or "post" (Vaswani et al.)
    norm: str = "pre"
    #: share the decoder's input embedding with the output projection
    tie_embeddings: bool = False
    #: attention kind of every role, unless the role's own key below says otherwise
    attention: str = "vanilla"
    enc_self: str | None = None
    dec_self: str | None = None
    cross: str | None = None
    #: E-ATT binarization threshold (Eq. 4), 1.0 as in the paper
    tau: float = 1.0
    #: longest source (with <eos>) and target (with <bos>) a dense/randinit model accepts
    max_len: int = 64
    #: "transformer" (Seq2Seq) or "lstm" (eatt.model.rnn.LSTMSeq2Seq); see build_model
    arch: str = "transformer"
    #: score of the windowed cross-attention kinds (Luong Eq. 8, or E-ATT's -L1)
    window_score: str = "general"
    #: D: half width of the local-m / local-p window [p_t - D, p_t + D] (Luong Sec. 3.2)
    window_d: int = 10
    #: sigma of the position term of local-p (Luong Eq. 10) and Flexible (its Eq. 6); None =
    #: each paper's pick, D / 2 and 1.5 (Flexible Sec. 5.2). The hardware key has this name too
    window_sigma: float | None = None
    #: where local-p's Gaussian goes: "after" the softmax, unnormalized (Luong Eq. 10), or
    #: "inside" it as a log-domain penalty (Flexible Attention Eq. 7; the window unit's form).
    #: None: the kind's own, after for local-p, inside for quant-local-p
    window_gaussian: str | None = None
    #: the centre rounded to a source position (straight-through) as the window unit takes it:
    #: local-p's p_t in the Gaussian, Flexible's focus p_{t-1} in the penalty and the window
    #: (docs/window.md, "Models on the unit"). None: the kind's own, real for local-p and
    #: flexible, rounded for quant-local-p and quant-flexible
    window_p_round: bool | None = None
    #: Flexible's g(t) rounded to a level l / flexible_g_levels (straight-through) as the window
    #: unit takes it. None: the kind's own, real for flexible, levels for quant-flexible
    window_g_round: bool | None = None
    #: test-time threshold tau of Flexible Attention (Sec. 3.1); None = infinity (no window)
    flexible_tau: float | None = None
    #: Flexible's window applied in training too, at this tau: positions outside it are not
    #: scored, so fine-tuning teaches the model the cut it is decoded with (docs/window.md,
    #: "Fine-tuning with the window"). None: no window in training (the paper's procedure)
    flexible_train_tau: float | None = None
    #: beta of the fine-tuning loss -beta * mean g(t) (Eq. 9)
    flexible_beta: float = 0.0
    #: quant-flexible (and flexible with window_g_round): g(t) rounded to a level l in
    #: [0, flexible_g_levels], g = l / levels (straight-through), the window unit's g input
    #: (its g_levels)
    flexible_g_levels: int = 8
    #: L0Drop gates between encoder and decoder (Zhang et al., 2021)
    l0drop: bool = False
    #: lambda, weight of the expected-L0 penalty
    l0drop_lambda: float = 0.0
    #: lambda rises linearly from 0 over this many training steps (the authors' warm-up for
    #: training from scratch, bzhangGo/zero's l0_norm_*_reg_ramp_up); 0 = lambda from step 0
    l0drop_ramp: int = 0
    #: the last this many training steps decode through the test-time gates (Eq. 13), detached,
    #: with no penalty: the network settles on its pruned memory without the HardConcrete
    #: noise (prune, then fine-tune the pruned model); 0 = sampled gates to the end
    l0drop_fix: int = 0
    #: rule-based pattern instead of learned gates: "freq", "inv-freq", "group" (None: learned)
    l0drop_rule: str | None = None
    #: fraction of source tokens a rule pattern drops
    l0drop_rule_rate: float = 0.5
    #: quant-eatt / quant-vanilla: weights <bits, frac> (frac None: bits - 2, the core's
    #: default, range about +-2: coarse for trained weights, which are mostly far smaller;
    #: eatt.quant.modules.calibrate_weight_frac picks one for a trained float model)
    quant_weight_bits: int = 8
    quant_weight_frac: int | None = None
    #: ... and the attention inputs' grid <bits, frac> (E-ATT binarizes them at tau)
    quant_in_bits: int = 8
    quant_in_frac: int = 4
    #: widths Q/K, V and the output are requantized to (the core's qk_bits, v_bits, out_bits).
    #: The core derives its shifts from worst-case bounds, which grow with dim: at dim 128 and
    #: 8-bit weights of frac 8 the core's 12-bit default leaves the output a step of 16, 24 bits
    #: 1/64 (and Q/K/V unshifted: the accumulators fit)
    quant_acc_bits: int = 24

    def layer_parameters(self) -> int:
        """Weights of the encoder and decoder layers (embeddings not counted: the vocabulary
        comes with the data): 4 d^2 per attention, 2 d ffn_dim per feed-forward."""
        d, f = self.dim, self.ffn_dim
        return self.enc_layers * (4 * d * d + 2 * d * f) + self.dec_layers * (8 * d * d + 2 * d * f)

    def __post_init__(self) -> None:
        check_fields(self, "model")
        for key, low, high in (
            ("dim", 1, 65536),
            ("heads", 1, 4096),
            ("ffn_dim", 1, 1 << 20),
            ("enc_layers", 1, 64),
            ("dec_layers", 1, 64),
            ("max_len", 1, 1 << 16),
            ("l0drop_ramp", 0, 10**9),
            ("l0drop_fix", 0, 10**9),
        ):
            value = getattr(self, key)
            if not low <= value <= high:
                raise ConfigError(f"{key}: must be in [{low}, {high}], got {value}")
        if self.dim % self.heads:
            raise ConfigError(f"heads: dim={self.dim} is not divisible by heads={self.heads}")
        params = self.layer_parameters()
        if params > MAX_LAYER_PARAMETERS:
            raise ConfigError(
                f"dim/ffn_dim/layers: about {params:,} parameters in the layers "
                f"({16 * params / 1e9:,.0f} GB with Adam's state); at most "
                f"{MAX_LAYER_PARAMETERS:,}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout: must be in [0, 1), got {self.dropout}")
        if self.norm not in ("pre", "post"):
            raise ConfigError(f"norm: must be 'pre' or 'post', got {self.norm!r}")
        cross_kinds = ATTENTION_KINDS + WINDOW_KINDS + tuple(QUANT_WINDOW_KINDS)
        for key in ("attention", *ROLES):
            value = getattr(self, key)
            allowed = cross_kinds if key == "cross" else ATTENTION_KINDS
            if (value in WINDOW_KINDS or value in QUANT_WINDOW_KINDS) and key != "cross":
                raise ConfigError(f"{key}: {value!r} is a windowed kind, valid for cross only")
            if value is not None and value not in allowed:
                raise ConfigError(f"{key}: must be one of {', '.join(allowed)}, got {value!r}")
        if self.arch not in ARCHS:
            raise ConfigError(f"arch: must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if self.window_score not in WINDOW_SCORES:
            raise ConfigError(
                f"window_score: must be one of {', '.join(WINDOW_SCORES)}, "
                f"got {self.window_score!r}"
            )
        if self.window_gaussian is not None and self.window_gaussian not in WINDOW_GAUSSIANS:
            raise ConfigError(
                f"window_gaussian: must be one of {', '.join(WINDOW_GAUSSIANS)} or null, "
                f"got {self.window_gaussian!r}"
            )
        cross = self.attention_of("cross")
        if self.window_gaussian is not None and cross not in GAUSSIAN_KINDS:
            raise ConfigError(
                "window_gaussian: only local-p and quant-local-p have a Gaussian; cross is "
                f"{cross!r}"
            )
        if self.window_p_round is not None and cross not in CENTRE_KINDS:
            raise ConfigError(
                "window_p_round: only local-p, flexible and their quantized kinds have a centre "
                f"to round; cross is {cross!r}"
            )
        if self.window_g_round is not None and cross not in FLEXIBLE_KINDS:
            raise ConfigError(
                f"window_g_round: only flexible and quant-flexible have a g(t); cross is {cross!r}"
            )
        if not 0 <= self.window_d <= 4096:
            raise ConfigError(f"window_d: must be in [0, 4096], got {self.window_d}")
        if self.window_sigma is not None and not self.window_sigma > 0:
            raise ConfigError(f"window_sigma: must be > 0, got {self.window_sigma}")
        if self.flexible_tau is not None and not self.flexible_tau > 0:
            raise ConfigError(
                f"flexible_tau: must be > 0 (null = infinity), got {self.flexible_tau}"
            )
        if self.flexible_train_tau is not None:
            if not self.flexible_train_tau > 0:
                raise ConfigError(
                    "flexible_train_tau: must be > 0 (null = no window in training), got "
                    f"{self.flexible_train_tau}"
                )
            if cross != "flexible":
                raise ConfigError(
                    "flexible_train_tau: only flexible has a window in training; cross is "
                    f"{cross!r}"
                )
        levels = self.flexible_g_levels  # the unit's g_levels: [1, 64]
        if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= 64:
            raise ConfigError(f"flexible_g_levels: must be an integer in [1, 64], got {levels!r}")
        for key in ("flexible_beta", "l0drop_lambda"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key}: must be >= 0, got {getattr(self, key)}")
        if self.l0drop_rule is not None and self.l0drop_rule not in L0DROP_RULES:
            raise ConfigError(
                f"l0drop_rule: must be one of {', '.join(L0DROP_RULES)} or null, "
                f"got {self.l0drop_rule!r}"
            )
        if self.l0drop_fix and not (self.l0drop and self.l0drop_rule is None):
            raise ConfigError(
                "l0drop_fix: fixing the gates needs learned ones (l0drop: true, no rule)"
            )
        if self.l0drop_rule is not None and not self.l0drop:
            raise ConfigError("l0drop_rule: a rule pattern needs l0drop: true")
        if not 0.0 <= self.l0drop_rule_rate <= 1.0:
            raise ConfigError(f"l0drop_rule_rate: must be in [0, 1], got {self.l0drop_rule_rate}")
        for kind in sorted({k for k in self.attentions.values() if k in QUANT_KINDS}):
            self.quant_core(kind)  # the core's own checks, under this config's key names
        if self.attention_of("cross") in QUANT_WINDOW_KINDS:
            self._check_quant_window()

    def _check_quant_window(self) -> None:
        """A quantized windowed kind is the window unit: its scores, its forms."""
        kind = self.attention_of("cross")
        if self.window_score not in QUANT_WINDOW_SCORES:
            raise ConfigError(
                f"window_score: {kind} computes {' or '.join(QUANT_WINDOW_SCORES)} scores "
                f"(the window unit's), got {self.window_score!r}"
            )
        if self.window_gaussian == "after":
            raise ConfigError(
                f"window_gaussian: {kind} puts the Gaussian inside the softmax (the window "
                "unit's form); set inside or null"
            )
        if self.window_p_round is False:
            what = "its focus" if kind == "quant-flexible" else "the Gaussian"
            raise ConfigError(
                f"window_p_round: {kind} centres {what} on an integer p (the window unit's "
                "input); set true or null"
            )
        if self.window_g_round is False:
            raise ConfigError(
                f"window_g_round: {kind} takes g(t) as a level of flexible_g_levels (the window "
                "unit's input); set true or null"
            )
        if self.l0drop and kind != "quant-global":
            raise ConfigError(
                f"l0drop: {kind}'s window is on source positions, which L0Drop's compacted "
                "memory renumbers; quant-global decodes on it (docs/window.md)"
            )
        self.quant_window()  # the unit's own checks, under this config's key names

    def quant_window(self):
        """The eatt.config.WindowConfig of the quantized windowed cross kind: one head of the
        model's width, a memory of max_len rows, the Gaussian (quant-local-p), Flexible's
        penalty at flexible_g_levels levels (quant-flexible) or no position term (quant-local-m,
        quant-global), the quant_* formats. quant-global's window is the whole memory: D =
        max_len - 1 around p = 0; quant-flexible's D is max_len - 1 too, and its window comes
        per step from tau (window_d is not used by either)."""
        kind = self.attention_of("cross")
        if kind not in QUANT_WINDOW_KINDS:
            raise ValueError(f"cross {kind!r} is not a quantized windowed kind")
        fields = dict(
            window_score=self.window_score,
            window_d=(
                self.max_len - 1 if kind in ("quant-global", "quant-flexible") else self.window_d
            ),
            position={"quant-local-p": "gaussian", "quant-flexible": "flexible"}.get(kind, "none"),
            window_sigma=self.window_sigma,
            g_levels=self.flexible_g_levels,
        )
        try:
            return WindowConfig(
                kind="window",
                len_q=1,
                len_k=self.max_len,
                dim=self.dim,
                heads=1,
                tau=self.tau,
                **self._quant_formats(),
                **fields,
            )
        except ConfigError as err:
            raise ConfigError(self._quant_key_names(str(err))) from None

    def _quant_formats(self) -> dict:
        """The hardware formats of the quantized kinds (cores and the window unit alike), under
        the hardware's key names."""
        return {
            "in_bits": self.quant_in_bits,
            "in_frac": self.quant_in_frac,
            "weight_bits": self.quant_weight_bits,
            "weight_frac": self.quant_weight_frac,
            **dict.fromkeys(("qk_bits", "v_bits", "out_bits"), self.quant_acc_bits),
        }

    def quant_core(self, kind: str) -> CoreConfig:
        """The eatt.config.CoreConfig of a quantized kind's core (lengths: max_len)."""
        if kind not in QUANT_KINDS:
            raise ValueError(f"{kind!r} is not a quantized kind ({', '.join(QUANT_KINDS)})")
        try:
            return CoreConfig(
                kind=QUANT_KINDS[kind],
                len_q=self.max_len,
                len_k=self.max_len,
                dim=self.dim,
                heads=self.heads,
                tau=self.tau,
                **self._quant_formats(),
            )
        except ConfigError as err:
            raise ConfigError(self._quant_key_names(str(err))) from None

    @staticmethod
    def _quant_key_names(message: str) -> str:
        """A core's message under this config's key names (the core's weight_bits is quant_
        weight_bits here, its len_k max_len)."""
        names = {k: "quant_acc_bits" for k in ("qk_bits", "v_bits", "out_bits")}
        names.update(len_q="max_len", len_k="max_len")
        for key in ("weight_bits", "weight_frac", "in_bits", "in_frac", *names):
            if message.startswith(f"{key}:"):
                return names.get(key, f"quant_{key}") + message[len(key) :]
        return message

    def attention_of(self, role: str) -> str:
        """The attention kind of ``role`` (one of :data:`ROLES`)."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; choose from {ROLES}")
        return getattr(self, role) or self.attention

    @property
    def positional_cross(self) -> bool:
        """Whether the cross-attention's weights depend on source positions (windows, the
        synthesizers): then L0Drop decodes on the full gated memory, not the compacted one."""
        return self.attention_of("cross") in (*POSITIONAL_KINDS, *synthesized_kinds())

    @property
    def windowed(self) -> bool:
        """Whether the cross-attention is one of the windowed kinds (eatt.model.windowed, or
        the window unit's quantized ones)."""
        kind = self.attention_of("cross")
        return kind in WINDOW_KINDS or kind in QUANT_WINDOW_KINDS

    @property
    def attentions(self) -> dict[str, str]:
        return {role: self.attention_of(role) for role in ROLES}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> ModelConfig:
        return ModelConfig.from_dict({**self.to_dict(), **changes})

    @classmethod
    def from_dict(cls, data: Any, source: str = "model", upgrade: bool = False) -> ModelConfig:
        """The config of a mapping; ``upgrade`` reads a file eatt wrote before a key was
        renamed (a checkpoint) under the new name, otherwise an old name is one line."""
        if isinstance(data, dict):
            for old, new in RENAMED_KEYS.items():
                if old in data and upgrade:
                    data = {(new if k == old else k): v for k, v in data.items()}
                elif old in data:
                    raise ConfigError(f"{source}.{old}: is now called {new}")
        return dataclass_from_dict(cls, data, source)


def load_model_config(path: str | os.PathLike) -> ModelConfig:
    """A model config from a file: the whole file, or its ``model`` section if it has one."""
    data = read_mapping(path)
    if "model" in data:
        data = data["model"]
    try:
        return ModelConfig.from_dict(data)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
