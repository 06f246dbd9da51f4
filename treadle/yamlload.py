"""The one YAML loader of treadle's input files (workloads, the RM's config file).

YAML 1.1 safe loading, as ``yaml.safe_load``, except that a duplicate mapping key is an
error (PyYAML keeps the last silently); merge keys (``<<: *anchor``) are not duplicates.
The text goes through libyaml's C parser when PyYAML was built with it
(``yaml.__with_libyaml__``): several times faster on large workloads. The constructor and
the resolver are PyYAML's own either way, so values mean the same, with one addition to
YAML 1.1's resolver in both: a plain scalar that is a number in YAML 1.2 and JSON
(``1e3``, ``2.5E-3``, ``1.0e12``) is a float, where YAML 1.1 reads it as a string and a
user writing ``duration_s: 1e3`` would be told it is not a number.

Before either, ``load_1_2`` tries the Rust parser yaml_rs (when installed) and keeps its
result only when that is provably the value the PyYAML path would return (see the
comment above ``MISS``): large workloads load several times faster than with libyaml
(``python -m tests.benchmarks yaml``).

What is valid, what values mean and the errors stay the pure-Python loader's:

- every text yaml_rs refuses, or that the fast path's checks do not pass, goes the PyYAML
  way below as it did before yaml_rs;
- libyaml words its syntax errors differently and marks some at another line, so when the
  C parser refuses a text, the pure-Python loader parses it again and its error is the
  one raised (should it accept the text, its result is returned);
- libyaml accepts a few texts the pure-Python loader refuses (tabs as separators or
  inside plain scalars, ``?`` inside flow collections, a byte-order mark after the start,
  a comment glued to a block scalar's header: ``|#``) and reads an empty ``!`` tag as
  ``''`` where PyYAML reads ``None``: a text holding any of ``\t ? ! \ufeff`` or ``|#``
  is left to the pure-Python loader. Workload files rarely hold them;
  ``tests/unit/test_yaml_loader.py`` fuzzes the three loaders against each other.
"""

from __future__ import annotations

import importlib
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

    def construct_checked_timestamp(self, node: yaml.ScalarNode) -> Any:
        """A timestamp as PyYAML reads it; one its resolver matches but no date or time
        can hold (``2001-13-45``, an offset of -72 hours) is an error at its line, where
        PyYAML lets a bare ``ValueError`` escape."""
        try:
            return self.construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as e:
            raise yaml.constructor.ConstructorError(
                None, None, f"invalid timestamp {node.value!r}: {e}", node.start_mark
            ) from None


_UniqueKeys.add_constructor(  # type: ignore[type-var]
    "tag:yaml.org,2002:timestamp", _UniqueKeys.construct_checked_timestamp
)


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


_COMMENT_AS_HEADER = re.compile(r"[|>][-+0-9]*#")
"""A block scalar header with a comment glued on: libyaml reads ``''``, PyYAML refuses."""


def loader_for(text: str) -> type[Any]:
    """The loader ``load`` tries first on ``text``."""
    if LOADER is not PureLoader and (
        any(c in text for c in _PURE_ONLY)
        or (("|" in text or ">" in text) and _COMMENT_AS_HEADER.search(text) is not None)
    ):
        return PureLoader
    return LOADER


def load(text: str) -> object:
    """``text`` as plain data; a ``yaml.YAMLError`` as the pure-Python loader raises it."""
    data = load_1_2(text)
    if data is not MISS:
        return data
    loader = loader_for(text)
    if loader is PureLoader:
        return yaml.load(text, Loader=PureLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        pass  # the pure-Python loader's error (or result) instead: the same as ever
    return yaml.load(text, Loader=PureLoader)


# The yaml_rs fast path. yaml_rs (Rust, YAML 1.2 with extras of its own: ``0x``, ``0b``,
# ``_`` in numbers, ``+.5``...) reads a large workload much faster than libyaml; its
# result is returned only when it is provably what the loaders above would return:
#
# 1. the text is gated on what a result cannot show: control characters (NUL...), the
#    characters YAML 1.1 and 1.2 read otherwise (BOM, NEL and the Unicode line breaks,
#    C1 controls, surrogates), tabs, backslashes (escapes), lone CRs, directives and
#    document markers (yaml_rs reads several documents as a list), deep block nesting
#    (yaml_rs overflows the C stack near 20,000 levels; a line opening with
#    ``_MAX_DEPTH`` spaces or dashes is refused), then, comments cut (see
#    ``without_comments``): ``? ! &`` (complex keys, tags, anchors: aliases without
#    anchors are errors, so alias bombs go the PyYAML way), ``:`` before a digit (the
#    1.1 scalars that hold spaces or colons: sexagesimal numbers, timestamps with a time;
#    a date alone is a token, step 3), a ``|``, ``>`` or ``:x``
#    starting a line or a flow entry (block scalars; plain scalars yaml_rs takes and
#    PyYAML refuses in a flow), and a line opening with ``:`` (a key's ``:`` on the line
#    after it in a flow: yaml_rs takes it, PyYAML refuses it);
# 2. every yaml_rs error goes to the loaders above (their errors are the ones raised);
# 3. every distinct token of what is left (a run between spaces and ``,[]{}#:'"``;
#    every plain scalar that either side reads as a non-string is one) is read by yaml_rs
#    alone and by PyYAML's resolver and constructor: one difference in type or value
#    (``012``, ``0o17``, ``yes``, ``1e3``, ``2001-12-14``, ``<<``, ``=``...) and the text
#    goes to the loaders above; a plain scalar's meaning depends on its text alone;
# 4. the result is walked: a key holding a space or a line break (maybe a multi-line
#    implicit key, which PyYAML refuses), a null key (YAML 1.2 reads ``: v`` so), a key
#    yaml_rs made of a collection (a tuple, a frozenset: PyYAML refuses unhashable keys),
#    a NaN key (never a duplicate in Python), or nesting deeper than ``_MAX_DEPTH`` sends
#    the text to the loaders above. Duplicate keys are errors to yaml_rs as to PyYAML,
#    Python's equality deciding (``1``, ``1.0`` and ``true`` are one key to both).
#
# tests/unit/test_yaml_loader.py fuzzes this path against the pure-Python loader and
# shows each check is needed.

MISS: Any = object()
"""What ``load_1_2`` returns when the text is left to the loaders above."""

_yaml_rs: Any = None
_MAX_DEPTH = 64

_GATED = ("\t", "\\", "\n%", "\n---", "\n...")
"""Substrings that send a text to the loaders above (see the comment above)."""
_GATED_START = ("%", "---", "...")
_GATED_OUTSIDE_COMMENTS = ("?", "!", "&")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_UNICODE_APART = re.compile("[\x80-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
"""Non-ASCII characters YAML 1.1 (PyYAML) and 1.2 read otherwise, or PyYAML refuses."""
_LONE_CR = re.compile(r"\r(?!\n)")
_DEEP = re.compile(rf"\n[ -]{{{_MAX_DEPTH}}}")
_SEXAGESIMAL_OR_TIME = re.compile(r":[0-9]")
_PIPE_OR_ANGLE = re.compile(r"[|>]")
_COLON_BEFORE_TEXT = re.compile(r":\S")
_COLON_OPENS_LINE = re.compile(r"\n *:")
_TOKEN_BREAK = frozenset(" \r\n[{,:'\"")
"""What may stand before a plain scalar's first character (and a bit more, to be safe)."""
_SEPARATORS = bytes.maketrans(b",[]{}#:'\"", b"         ")
_NOT_PLAIN = tuple("*@`%")
"""Tokens starting so are no plain scalars to yaml_rs (it refuses ``[t]``): not probed."""
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")


def _rs() -> Any:
    """The yaml_rs module, imported on first use; None when it is not installed."""
    global _yaml_rs
    if _yaml_rs is None:
        try:  # by name: the workload package has no deferred import statements
            _yaml_rs = importlib.import_module("yaml_rs")
        except ImportError:
            _yaml_rs = False
    return _yaml_rs or None


def gate(text: str) -> bool:
    """Whether ``text`` may go to yaml_rs at all (step 1, before comments are cut)."""
    # Separate searches, each led by a literal or one character class: an alternation
    # would make the regex engine try every position of a 2 MB text.
    if text.startswith(_GATED_START):
        return False
    if not text.isascii() and _UNICODE_APART.search(text) is not None:
        return False
    for needle in _GATED:
        if needle in text:
            return False
    for pattern in (_CONTROL, _LONE_CR):
        if pattern.search(text) is not None:
            return False
    return not (_DEEP.search("\n" + text[: _MAX_DEPTH + 1]) or _DEEP.search(text))


def gate_bare(bare: str) -> bool:
    """Whether a gated text less its comments may stay on the fast path (step 1, after)."""
    for needle in _GATED_OUTSIDE_COMMENTS:
        if needle in bare:
            return False
    for pattern in (_SEXAGESIMAL_OR_TIME, _COLON_OPENS_LINE):
        if pattern.search(bare) is not None:
            return False  # ``{a\n: 1}``: a key to yaml_rs, an error to PyYAML
    if ("|" in bare or ">" in bare) and _starts_token(_PIPE_OR_ANGLE, bare):
        return False  # a block scalar, or (in a flow) a plain scalar PyYAML refuses
    return not _starts_token(_COLON_BEFORE_TEXT, bare)  # ``[:x]``: PyYAML refuses it


def without_comments(text: str, quoted_hash: bool) -> str:
    """``text`` less each ``#`` after a space or at a line's start, to the line's end;
    with ``quoted_hash`` (a string of the result holds such a ``#``), only where that rest
    of the line holds no quote.

    What is cut holds no plain scalar. Such a ``#`` outside a quoted scalar starts a
    comment (after a space a ``#`` ends a plain scalar; block scalars are refused anyway).
    Inside a quoted scalar, the scalar's string holds that ``#``: with none in the result
    there is no such case; else only the rest of lines without a quote is cut, and there
    the scalar does not close on that line, so the rest of the line is inside it."""
    at = text.find("#")
    if at < 0:
        return text
    kept: list[str] = []
    start = 0
    while at >= 0:
        end = text.find("\n", at)
        if end < 0:
            end = len(text)
        if (at == 0 or text[at - 1] in " \n") and not (
            quoted_hash and ("'" in text[at:end] or '"' in text[at:end])
        ):
            kept.append(text[start:at])
            start = at = end
        at = text.find("#", at + 1)
    kept.append(text[start:])
    return "".join(kept)


def _starts_token(pattern: re.Pattern[str], text: str) -> bool:
    """Whether ``pattern`` matches at the start of the text, a line or a flow entry."""
    for found in pattern.finditer(text):
        at = found.start()
        if at == 0 or text[at - 1] in _TOKEN_BREAK:
            return True
    return False


def _rs_loads(rs: Any, text: str) -> Any:
    return rs.loads(text, parse_datetime=False, duplicate_key_policy=rs.DuplicateKeyPolicy.Error)


def tokens_agree(rs: Any, bare: str) -> bool:
    """Whether every token of ``bare`` (a gated text) means the same to yaml_rs and to
    PyYAML."""
    # Bytes split on ASCII whitespace alone: YAML's (str.split would cut at U+00A0 too).
    words = {w.decode() for w in set(bare.encode().translate(_SEPARATORS).split())}
    probe = [t for t in words if t != "-" and not t.startswith(_NOT_PLAIN)]
    try:
        values = _rs_loads(rs, "[" + ",".join(probe) + "]")
    except Exception:
        values = None
    if type(values) is not list or len(values) != len(probe):
        values = []
        for token in probe:  # one that cannot be a plain scalar stops the batch
            try:
                values.append(_rs_loads(rs, "[" + token + "]")[0])
            except Exception:
                values.append(token)  # not a plain scalar to yaml_rs: not in its result
    # PyYAML's resolver (``BaseResolver.resolve`` on a plain scalar), inlined: its tables.
    table = PureLoader.yaml_implicit_resolvers
    if table.get(None):  # PyYAML adds no wildcard resolver; were one added, go the long way
        return False
    plain_float, plain_int = _PLAIN_DECIMAL.fullmatch, _PLAIN_INT.fullmatch
    left: list[tuple[str, object]] = []
    for token, value in zip(probe, values, strict=True):
        tag = _STR_TAG
        for resolver_tag, regexp in table.get(token[0], ()):
            if regexp.match(token):
                tag = resolver_tag
                break
        if tag == _STR_TAG:
            if type(value) is not str or value != token:
                return False
        elif tag == _FLOAT_TAG and plain_float(token):
            theirs = float(token)  # what PyYAML's constructor gives for a plain decimal
            if type(value) is not float or value != theirs:
                return False
            if not value and repr(value) != repr(theirs):
                return False  # -0.0 against 0.0
        elif tag == _INT_TAG and plain_int(token):
            if type(value) is not int or value != int(token):
                return False
        else:
            left.append((token, value))
    if not left:
        return True
    try:
        theirs = yaml.load("[" + ",".join(t for t, _ in left) + "]", Loader=LOADER)
    except Exception:
        return False  # ``=`` and ``<<``: PyYAML has no plain value for them
    for (_, value), their in zip(left, theirs, strict=True):
        if type(value) is not type(their) or repr(value) != repr(their):
            return False
    return True


def _cut_hash(string: str) -> bool:
    """Whether ``string`` may hold a ``#`` that ``without_comments`` would cut from the
    text: one after a space or at a line's start stays so in a quoted scalar (folding
    makes a line break a space or keeps it; escapes are refused)."""
    return " #" in string or "\n#" in string or string.startswith("#")


def shape(data: object) -> bool | None:
    """None when a key or the nesting of ``data`` sends the text the PyYAML way (step 4),
    else whether a string of it (a key or a value) holds a ``#`` as a comment could."""
    quoted_hash = False
    stack: list[tuple[object, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if type(node) is dict:
            for key in node:
                if type(key) is str:
                    if " " in key or "\n" in key:
                        return None  # maybe a multi-line implicit key: PyYAML refuses them
                    quoted_hash = quoted_hash or ("#" in key and _cut_hash(key))
                elif key is None or type(key) in (tuple, frozenset) or key != key:
                    return None
            children: Any = node.values()
        elif type(node) is list:
            children = node
        else:
            children = (node,)  # a scalar document
            depth = -1
        for child in children:
            if type(child) is str:
                quoted_hash = quoted_hash or ("#" in child and _cut_hash(child))
            elif type(child) is dict or type(child) is list:
                if depth >= _MAX_DEPTH:
                    return None
                stack.append((child, depth + 1))
    return quoted_hash


def load_1_2(text: str) -> object:
    """``text`` read by yaml_rs when that is provably what ``load`` returns, else ``MISS``."""
    rs = _rs()
    if rs is None or not gate(text):
        return MISS
    try:
        data = _rs_loads(rs, text)
    except Exception:
        return MISS
    quoted_hash = shape(data)
    if quoted_hash is None:
        return MISS
    bare = without_comments(text, quoted_hash)
    if not gate_bare(bare) or not tokens_agree(rs, bare):
        return MISS
    return data
