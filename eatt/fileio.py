"""File I/O every stage shares: reading a config file (YAML or JSON) into a mapping with one-line
errors, and writing a file whole (a temporary file beside it, then a rename), with the mode the
umask gives. The bottom layer: it imports no eatt module."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml


class ConfigError(ValueError):
    """A bad configuration value; the message is one line that names the key."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (parser errors span many lines)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _yaml_loader():
    """PyYAML's SafeLoader that refuses a key given twice in one mapping (PyYAML takes the
    later one silently), pointing at the second occurrence."""

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            try:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"duplicate key {key!r} (first at line {seen[key].line + 1})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
            except TypeError:  # an unhashable key: PyYAML's own constructor says so
                break
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def _yaml_error(err: Exception) -> str:
    """PyYAML's problem with its line and column (1-based), on one line."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or first_line(err)
    if mark is None:
        return problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def read_mapping(path: str | os.PathLike) -> dict:
    """A YAML (.yaml/.yml) or JSON (.json) file holding a mapping; one-line ConfigErrors
    naming the file (and, for a parse error, the line and column).

    Shared by every config file of the toolkit (cores here, models in eatt.model.seq2seq).
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, not a config file")
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    if b"\0" in raw[:8192]:
        raise ConfigError(f"{path}: binary file, not a YAML or JSON config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}); not a config") from None
    if path.suffix.lower() == ".json":

        def no_duplicates(pairs: list) -> dict:
            keys = [k for k, _ in pairs]
            for k in keys:
                if keys.count(k) > 1:
                    raise ConfigError(f"{path}: duplicate key {k!r}")
            return dict(pairs)

        try:
            data = json.loads(text, object_pairs_hook=no_duplicates)
        except json.JSONDecodeError as err:
            raise ConfigError(
                f"{path}: cannot parse: line {err.lineno}, column {err.colno}: {err.msg}"
            ) from None
        except RecursionError:
            raise ConfigError(f"{path}: cannot parse: nested too deeply") from None
    else:
        try:
            data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader)
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: cannot parse: {_yaml_error(err)}") from None
        except RecursionError:
            raise ConfigError(f"{path}: cannot parse: nested too deeply") from None
        except (ValueError, OverflowError) as err:  # a value PyYAML cannot build (a bad date)
            raise ConfigError(f"{path}: cannot parse: {first_line(err)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values")
    return data


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()


def atomic_write(path: str | os.PathLike, write: Callable[[str], None], suffix: str = "") -> None:
    """Call write(temporary path) in the same folder, then rename: never half a file. The
    temporary name ends in ``suffix`` (for writers that look at the extension)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    try:
        try:
            write(tmp)
        except RuntimeError as err:  # torch.save's writer on a full disk or past `ulimit -f`
            if "inline_container" not in str(err) and "PytorchStreamWriter" not in str(err):
                raise
            raise OSError(
                errno.ENOSPC,
                f"could not write it whole (disk full or a file size limit); "
                f"the previous {path.name} is as it was",
                str(path),
            ) from None
        os.chmod(tmp, FILE_MODE)  # mkstemp makes 0600; a written file gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
