"""The one YAML loader of treadle's input files (workloads, the RM's config file).

YAML 1.1 safe loading, as ``yaml.safe_load``, except that a duplicate mapping key is an
error (PyYAML keeps the last silently); merge keys (``<<: *anchor``) are not duplicates.
The text goes through libyaml's C parser when PyYAML was built with it
(``yaml.__with_libyaml__``): several times faster on large workloads. The constructor and
the resolver are PyYAML's own either way, so values mean the same, with one addition to
YAML 1.1's resolver in both: a plain scalar that is a number in YAML 1.2 and JSON
(``1e3``, ``2.5E-3``, ``1.0e12``) is a float, where YAML 1.1 reads it as a string and a
user writing ``duration_s: 1e3`` would be told it is not a number.

What is valid, what values mean and the errors stay the pure-Python loader's:

- libyaml words its syntax errors differently and marks some at another line, so when the
  C parser refuses a text, the pure-Python loader parses it again and its error is the
  one raised (should it accept the text, its result is returned);
- libyaml accepts a few texts the pure-Python loader refuses (tabs as separators or
  inside plain scalars, ``?`` inside flow collections, a byte-order mark after the start)
  and reads an empty ``!`` tag as ``''`` where PyYAML reads ``None``: a text holding any
  of ``\t ? ! \ufeff`` is left to the pure-Python loader. Workload files rarely hold
  them; ``tests/unit/test_yaml_loader.py`` fuzzes the two loaders against each other.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

LIBYAML: bool = bool(getattr(yaml, "__with_libyaml__", False))
"""Whether PyYAML has libyaml's C parser here."""


_PLAIN_DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+")
"""A float as workloads write most of them, which ``float`` reads as YAML 1.1 does."""
_FLOAT_TAG = "tag:yaml.org,2002:float"
_SCALAR = yaml.ScalarNode


class _UniqueKeys(yaml.constructor.SafeConstructor):
    """Refuses duplicate mapping keys, at the second occurrence's line.

    Two shortcuts that change no value (a workload holds a few hundred thousand scalars):
    a plain scalar's tag is resolved once per distinct text (it depends on the text alone
    while no path resolvers are added, and none are), and a sequence's plain decimal
    floats are read by ``float`` directly (the value YAML 1.1's constructor gives)."""

    def resolve(self, kind: Any, value: str, implicit: tuple[bool, bool]) -> str:
        if kind is _SCALAR and implicit[0]:
            tags: dict[str, str] | None = self.__dict__.get("_tags")
            if tags is None:
                tags = self.__dict__["_tags"] = {}
            tag = tags.get(value)
            if tag is None:
                tag = tags[value] = super().resolve(kind, value, implicit)  # type: ignore[misc]
            return tag
        found: str = super().resolve(kind, value, implicit)  # type: ignore[misc]
        return found

    def construct_sequence(self, node: yaml.Node, deep: bool = False) -> list[Any]:
        if not isinstance(node, yaml.SequenceNode):
            return super().construct_sequence(node, deep)  # type: ignore[arg-type]  # its error
        out: list[Any] = []
        add = out.append
        plain = _PLAIN_DECIMAL.fullmatch
        construct = self.construct_object
        for child in node.value:
            if child.tag == _FLOAT_TAG and type(child) is _SCALAR and plain(child.value):
                add(float(child.value))
            else:
                add(construct(child, deep=deep))
        return out

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


class PureLoader(_UniqueKeys, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader, refusing duplicate keys."""


_FLOAT_1_2 = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")
"""Exponent floats YAML 1.1's resolver misses (it wants a dot and a signed exponent)."""
_FLOAT_FIRST = list("-+0123456789.")

PureLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, _FLOAT_FIRST)

FastLoader: type[yaml.CSafeLoader] | None = None
"""libyaml's C parser with the same constructor and resolver (None without libyaml)."""

if LIBYAML:

    class _FastLoader(_UniqueKeys, yaml.CSafeLoader):
        """libyaml's C parser, PyYAML's safe constructor refusing duplicate keys."""

    _FastLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_1_2, _FLOAT_FIRST)
    FastLoader = _FastLoader


def pick_loader(with_libyaml: bool = LIBYAML) -> type[Any]:
    """The loader ``load`` parses with: the C one when libyaml is present."""
    return FastLoader if with_libyaml and FastLoader is not None else PureLoader


LOADER: type[Any] = pick_loader()
"""The loader in use."""


_PURE_ONLY = ("\t", "?", "!", "\ufeff")
"""Characters where libyaml and PyYAML's pure-Python parser part ways (see above)."""


def loader_for(text: str) -> type[Any]:
    """The loader ``load`` tries first on ``text``."""
    if LOADER is not PureLoader and any(c in text for c in _PURE_ONLY):
        return PureLoader
    return LOADER


def load(text: str) -> object:
    """``text`` as plain data; a ``yaml.YAMLError`` as the pure-Python loader raises it."""
    loader = loader_for(text)
    if loader is PureLoader:
        return yaml.load(text, Loader=PureLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        pass  # the pure-Python loader's error (or result) instead: the same as ever
    return yaml.load(text, Loader=PureLoader)
