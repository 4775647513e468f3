"""Core configuration: defaults, round trips, and one clear line per bad value."""

from __future__ import annotations

import json

import pytest

from eatt.config import FILE_MODE, ConfigError, CoreConfig, default_config, load_config, save_config


def test_defaults_follow_the_paper_and_design():
    cfg = CoreConfig("eatt", 4, 4, 8, 2)
    assert cfg.tau == 1.0  # the paper's threshold
    assert cfg.weight_frac == cfg.weight_bits - 2
    assert cfg.d_head == 4
    assert default_config().kind == "eatt" and default_config("vanilla").kind == "vanilla"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_load_round_trip(tmp_path, suffix):
    cfg = CoreConfig("vanilla", 3, 5, 12, 3, tau=0.5, weight_bits=4, qk_bits=6)
    path = tmp_path / f"core{suffix}"
    save_config(cfg, path)
    assert load_config(path) == cfg
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left
    # the usual mode of a new file (umask), not the temporary file's 0600
    assert path.stat().st_mode & 0o777 == FILE_MODE


def test_replace_rederives_weight_frac():
    cfg = CoreConfig("eatt", 4, 4, 8, 2)
    assert cfg.replace(weight_bits=4).weight_frac == 2
    assert cfg.replace(weight_bits=4, weight_frac=3).weight_frac == 3


BAD = [
    ({"colour": 1}, "unknown key 'colour'"),
    ({"kind": "dot"}, "kind: 'dot' is now called 'vanilla'"),
    ({"kind": "conv"}, "kind: must be one of eatt, vanilla, dense, randinit, window"),
    ({"dim": 10, "heads": 3}, "heads: dim=10 is not divisible by heads=3"),
    ({"len_q": 0}, "len_q: must be in [1, 4096], got 0"),
    ({"len_k": -2}, "len_k: must be in"),
    ({"dim": 2.5}, "dim: must be an integer"),
    ({"heads": True}, "heads: must be an integer"),
    ({"tau": float("nan")}, "tau: must be a finite number"),
    ({"tau": "high"}, "tau: must be a finite number"),
    ({"tau": 100.0}, "tau: 100.0 is outside the input range"),
    ({"weight_bits": 1}, "weight_bits: must be in [2, 16], got 1"),
    ({"weight_bits": 33}, "weight_bits: must be in [2, 16], got 33"),
    ({"qk_bits": 0}, "qk_bits: must be in"),
    ({"exp_table_size": 100}, "exp_table_size: must be a power of two"),
    ({"v_bits": 24, "exp_frac": 16, "recip_frac": 20, "len_k": 4096}, "recip_frac: numerator"),
]


@pytest.mark.parametrize("change,message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_values_name_the_key(tmp_path, change, message):
    data = {"kind": "eatt", "len_q": 4, "len_k": 4, "dim": 8, "heads": 2, **change}
    with pytest.raises(ConfigError) as err:
        CoreConfig.from_dict(data)
    text = str(err.value)
    assert message in text and "\n" not in text
    # the same through a file: the path is named too
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="bad.json"):
        load_config(path)


def test_missing_required_key_and_unparsable_files(tmp_path):
    with pytest.raises(ConfigError, match="missing required key 'heads'"):
        CoreConfig.from_dict({"kind": "eatt", "len_q": 4, "len_k": 4, "dim": 8})
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: eatt\n  len_q: [\n")
    with pytest.raises(ConfigError, match="cannot parse") as err:
        load_config(broken)
    assert "\n" not in str(err.value)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(listy)


def test_renamed_keys_name_the_new_word():
    """A config written before a key was renamed gets one line naming the new key."""
    from eatt.config import RENAMED_KEYS
    from eatt.model.config import RENAMED_KEYS as MODEL_RENAMED
    from eatt.model.config import ModelConfig

    base = dict(kind="window", len_q=1, len_k=4, dim=4, heads=1)
    for old, new in RENAMED_KEYS.items():
        with pytest.raises(ConfigError, match=f"key '{old}' is now called '{new}'"):
            CoreConfig.from_dict({**base, old: 1})
    for old, new in MODEL_RENAMED.items():
        with pytest.raises(ConfigError, match=f"model.{old}: is now called {new}"):
            ModelConfig.from_dict({old: 1.0})
        # a checkpoint written before the rename still loads, under the new name
        assert getattr(ModelConfig.from_dict({old: 1.0}, upgrade=True), new) == 1.0


def test_each_kind_builds_its_units_config_class():
    from eatt.config import WindowConfig, config_class

    assert config_class("eatt") is CoreConfig and config_class("window") is WindowConfig
    window = CoreConfig.from_dict(dict(kind="window", len_q=1, len_k=4, dim=4, heads=1))
    assert type(window) is WindowConfig and window.window_rows == 4
    assert type(window.replace(kind="eatt")) is CoreConfig  # the window keys are dropped
    with pytest.raises(ConfigError, match="kind: expected one of window"):
        WindowConfig.from_dict(dict(kind="eatt", len_q=1, len_k=4, dim=4, heads=1))
