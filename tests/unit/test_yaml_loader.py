"""The one YAML loader (``treadle.yamlload``): yaml_rs where its result is
provably PyYAML's, else libyaml's C parser where present, with the pure-Python loader's
validity, values and one-line errors."""

from __future__ import annotations

import random
import subprocess
import sys
from importlib import resources as package_files
from pathlib import Path

import pytest
import yaml

from rm.server.config import parse_rm_config
from treadle import yamlload
from treadle.errors import InputError, WorkloadError
from treadle.workload import parse_workload, parse_yaml

ROOT = Path(__file__).resolve().parents[2]
needs_libyaml = pytest.mark.skipif(not yamlload.LIBYAML, reason="PyYAML without libyaml")
needs_yaml_rs = pytest.mark.skipif(yamlload._rs() is None, reason="yaml_rs not installed")


def repo_workloads() -> dict[str, str]:
    out = {}
    for entry in package_files.files("treadle.workloads").iterdir():
        if entry.name.endswith(".yaml"):
            out[entry.name] = entry.read_text("utf-8")
    for p in sorted((ROOT / "tests" / "data").glob("*.yaml")):
        out[p.name] = p.read_text("utf-8")
    return out


WORKLOADS = repo_workloads()


def outcome(loader: type, text: str) -> tuple[str, object]:
    """("ok", data) or ("error", the pure loader's one line) of one loader on ``text``."""
    try:
        return "ok", yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        return "error", str(e)


def one_line(text: str) -> str:
    try:
        parse_yaml(text, "w.yaml")
    except WorkloadError as e:
        return str(e)
    raise AssertionError("expected an error")


def pure_line(text: str) -> str:
    """The message ``parse_yaml`` gave before the C loader: the pure loader's, converted."""
    from treadle.workload.errors import from_yaml_error

    try:
        yaml.load(text, Loader=yamlload.PureLoader)
    except yaml.YAMLError as e:
        return str(from_yaml_error(e, "w.yaml"))
    raise AssertionError("expected an error")


@needs_libyaml
def test_the_c_loader_is_used_when_libyaml_is_present(monkeypatch: pytest.MonkeyPatch) -> None:
    assert yamlload.LOADER is yamlload.FastLoader
    assert issubclass(yamlload.LOADER, yaml.cyaml.CParser)
    for text in WORKLOADS.values():
        assert yamlload.loader_for(text) is yamlload.FastLoader

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the pure-Python loader was used")

    monkeypatch.setattr(yamlload.PureLoader, "__init__", refuse)
    for name, text in WORKLOADS.items():
        parse_workload(text, name)  # valid: never touches the pure-Python loader


def test_without_libyaml_the_pure_loader_is_used() -> None:
    assert yamlload.pick_loader(False) is yamlload.PureLoader
    assert issubclass(yamlload.PureLoader, yaml.SafeLoader)


@needs_libyaml
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_both_loaders_read_the_repo_workloads_alike(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = WORKLOADS[name]
    pure = yaml.load(text, Loader=yamlload.PureLoader)
    fast = yaml.load(text, Loader=yamlload.FastLoader)
    assert repr(fast) == repr(pure)  # repr: types too (1 vs 1.0 vs '1')
    fast_workload = repr(parse_workload(text, name))  # through yaml_rs where it may
    monkeypatch.setattr(yamlload, "LOADER", yamlload.PureLoader)
    monkeypatch.setattr(yamlload, "_yaml_rs", False)  # as without yaml_rs
    assert yamlload.loader_for(text) is yamlload.PureLoader
    assert fast_workload == repr(parse_workload(text, name))


BAD = [
    ("duplicate key", "seed: 1\ncluster: {}\nseed: 2\n", "line 3", "duplicate key 'seed'"),
    ("duplicate nested key", "users:\n  a: {weight: 1, weight: 2}\n", "line 2", "duplicate key"),
    ("bad indentation", "cluster:\n  nodes: []\n bad: 1\n", "line", "invalid YAML"),
    ("indented mapping value", "seed: 1\n  extra: 2\n", "line 2", "invalid YAML"),
    ("tab indentation", "cluster:\n\tnodes: []\n", "line 2", "invalid YAML"),
    ("tab in a value", "jobs:\n  - name: a\tb\n", "line 2", "invalid YAML"),
    ("unclosed flow list", "cluster:\n  nodes: [\n  - a: b: c\n", "line 3", "invalid YAML"),
    ("unclosed list at the end", "seed: 1\njobs: [\nfoo: bar\n", "line 4", "invalid YAML"),
    ("unclosed quote", 'seed: "1\ncluster: {}\n', "line", "invalid YAML"),
    ("nested mapping on one line", "a: b: c\n", "line 1", "invalid YAML"),
    ("unhashable key", "users: {[a]: 1}\n", "line 1", "invalid YAML"),
    ("control character", "seed: 1\x07\n", None, "invalid YAML"),
    ("unknown tag", "seed: !!python/int 1\n", "line 1", "invalid YAML"),
    ("question mark in flow", "a: {b: 1? }\n", "line 1", "invalid YAML"),
    ("undefined alias", "a: *nope\n", "line 1", "invalid YAML"),
    ("implicit key over 1024 characters", "k" * 1100 + ": 1\n", "line 1", "invalid YAML"),
]


@pytest.mark.parametrize(
    ("text", "where", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_errors_are_the_pure_loaders_one_line(text: str, where: str | None, message: str) -> None:
    line = one_line(text)
    assert line == pure_line(text)
    assert line.startswith("w.yaml: " + (where or ""))
    assert message in line
    if where is not None:  # a reader error (control character) has a second line, as ever
        assert "\n" not in line


@needs_libyaml
@pytest.mark.parametrize("text", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_both_loaders_refuse_the_bad_inputs(text: str) -> None:
    assert outcome(yamlload.PureLoader, text)[0] == "error"
    assert outcome(yamlload.FastLoader, text)[0] == "error" or yamlload.loader_for(text) is (
        yamlload.PureLoader
    )


SAME_VALUES = [
    "a: 1e3\nb: 1.0e+3\nc: 1_000\nd: 0x1F\ne: 017\nf: 0o17\ng: 190:20:30\nh: .inf\ni: -.Inf\n",
    "a: yes\nb: Off\nc: ~\nd: null\ne: ''\nf: 2001-12-14\ng: 2001-12-14t21:59:43.10-05:00\n",
    "a: \"\\x41\\u00e9\\N\\_\"\nb: 'it''s'\nc: |-\n  x\n  y\nd: >\n  a\n\n  b\n",
    "base: &b {weight: 1}\nusers:\n  alice: {<<: *b, budget: 3}\n  bob:\n    <<: [*b]\n",
    "a:\r\n  - 1\r\n  - 2\r\n",
    "%YAML 1.1\n---\na: 1\n...\n",
    "",
    "# only a comment\n",
]


@needs_libyaml
@pytest.mark.parametrize("text", SAME_VALUES)
def test_values_mean_the_same_under_both_loaders(text: str) -> None:
    pure, fast = outcome(yamlload.PureLoader, text), outcome(yamlload.FastLoader, text)
    assert pure[0] == "ok"
    assert repr(fast) == repr(pure)
    assert repr(yamlload.load(text)) == repr(pure[1])


def test_exponent_numbers_are_floats_as_in_yaml_1_2() -> None:
    text = "a: 1e3\nb: 1.0e+3\nc: -2E-3\nd: .5e1\ne: 1e\nf: e3\ng: '1e3'\n"
    want = {"a": 1000.0, "b": 1000.0, "c": -0.002, "d": 5.0, "e": "1e", "f": "e3", "g": "1e3"}
    assert parse_yaml(text, "w.yaml") == want


def test_numbers_in_lists_read_as_pyyamls_own_safe_loader_reads_them() -> None:
    """The loader's shortcuts (tags resolved once per text, plain decimals read by
    ``float``) change no value: lists of numbers and look-alikes, repeated, as PyYAML's
    own safe loader reads them (exponent forms aside, which it leaves as strings)."""
    items = ["30.125", "-0.0", "0.0", "-12.5", "1_000.5", "+2.5", "2.", ".5", "1:30.5"]
    items += ["007.25", "-.inf", ".nan", "3", "-4", "0x1F", "yes", "~", "'2.5'", "!!str 2.5"]
    items += ["!!float 3", "12345678901234567890.123456789"]
    text = "a: [" + ", ".join(items * 2) + "]\nb:\n" + "".join(f"- {i}\n" for i in items)
    text += "c:\n- 2.5 # a comment\n- -0.0\n"
    got, want = parse_yaml(text, "w.yaml"), yaml.safe_load(text)
    assert repr(got) == repr(want)
    for loader in (yamlload.PureLoader, yamlload.FastLoader):
        if loader is not None:
            assert repr(yaml.load(text, Loader=loader)) == repr(want)


def test_the_global_safe_loader_is_left_as_pyyaml_has_it() -> None:
    import yaml

    assert yaml.safe_load("a: 1e3") == {"a": "1e3"}


MUTATIONS = [" ", "\t", ":", "- ", "[", "]", "{", "}", "\n", "#", "&a ", "*a", "!", '"', "'"]
MUTATIONS += ["? ", "|", ">", ",", "<<: ", "\\", "\ufeff", "1e3", "\r\n", "\x85", "\u2028"]
MUTATIONS += ["\n---\n", "!!str ", "yes", "~", '"\\N"', "0o17", "k" * 1100 + ": 1\n"]


def mutated(rng: random.Random, texts: list[str], most_lines: int, inserts: list[str]) -> str:
    """Up to ``most_lines`` lines of one of ``texts``, with one to three random edits:
    one of ``inserts`` put in, or one to three characters cut."""
    lines = rng.choice(texts).splitlines(keepends=True)
    a = rng.randrange(len(lines))
    text = "".join(lines[a : a + rng.randint(1, most_lines)])
    for _ in range(rng.randint(1, 3)):
        p = rng.randrange(len(text) + 1)
        if rng.random() < 0.6:
            text = text[:p] + rng.choice(inserts) + text[p:]
        else:
            text = text[:p] + text[p + rng.randint(1, 3) :]
    return text


@needs_libyaml
def test_fuzzed_workloads_load_exactly_as_with_the_pure_loader() -> None:
    """Mutated pieces of the repo's workloads: ``load`` accepts exactly what the
    pure-Python loader accepts, with the same data, and raises the same errors."""
    rng = random.Random(13)
    texts = list(WORKLOADS.values())
    differ = 0
    for _ in range(1500):
        text = mutated(rng, texts, 12, MUTATIONS)
        pure = outcome(yamlload.PureLoader, text)
        try:
            got: tuple[str, object] = "ok", yamlload.load(text)
        except yaml.YAMLError as e:
            got = "error", str(e)
        assert repr(got) == repr(pure), text
        differ += outcome(yamlload.FastLoader, text)[0] != pure[0]
    assert differ > 0  # the two parsers do part ways: the fallbacks are exercised


def test_the_rm_config_uses_the_same_loader() -> None:
    with pytest.raises(InputError, match=r"^c\.yaml: line 2: invalid YAML: duplicate key 'users'"):
        parse_rm_config("users: {}\nusers: {}\n", "c.yaml")
    # merge keys are not duplicates (as in workload files)
    config = parse_rm_config("users:\n  alice: &b {weight: 2}\n  bob: {<<: *b}\n", "c.yaml")
    assert config.users["bob"].weight == 2


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("2001-13-45", "month must be in 1..12"),
        ("2001-02-30", "day is out of range for month"),
        ("2001-12-14 1:02:03 -72", "offset must be a timedelta"),
    ],
)
def test_a_timestamp_no_date_can_hold_is_an_error_at_its_line(value: str, problem: str) -> None:
    text = f"seed: 1\njobs:\n- name: a\n  user: {value}\n"
    with pytest.raises(WorkloadError, match=rf"^w\.yaml: line 4: .*invalid timestamp .*{problem}"):
        parse_workload(text, "w.yaml")
    with pytest.raises(InputError, match=r"^c\.yaml: line 1: .*invalid timestamp"):
        parse_rm_config(f"users: {{alice: {{weight: {value}}}}}\n", "c.yaml")


# The yaml_rs fast path (``yamlload.load_1_2``): taken only where its result is provably
# the PyYAML path's; everything below compares with the pure-Python loader, types too.


def loaded(text: str) -> tuple[str, object]:
    """("ok", data) or ("error", message) of ``yamlload.load``, the loader in use (or
    a ValueError, should a constructor let one out)."""
    try:
        return "ok", yamlload.load(text)
    except yaml.YAMLError as e:
        return "error", str(e)
    except ValueError as e:
        return type(e).__name__, str(e)


def pure(text: str) -> tuple[str, object]:
    """``loaded``'s outcome with the pure-Python loader."""
    try:
        return outcome(yamlload.PureLoader, text)
    except ValueError as e:
        return type(e).__name__, str(e)


def rs_alone(text: str) -> tuple[str, object]:
    """What yaml_rs alone makes of ``text``, as ``load_1_2`` calls it."""
    rs = yamlload._rs()
    try:
        return "ok", yamlload._rs_loads(rs, text)
    except Exception as e:
        return "error", str(e)


def repo_yaml() -> dict[str, str]:
    """Every YAML text of the repo: the workloads, test data, deploy files, tool configs,
    and the README's and the docs' YAML examples."""
    out = dict(WORKLOADS)
    for p in [*ROOT.glob("*.y*ml"), *(ROOT / "deploy").glob("*.y*ml")]:
        out[p.name] = p.read_text("utf-8")
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        blocks = p.read_text("utf-8").split("```yaml\n")[1:]
        for i, block in enumerate(blocks):
            out[f"{p.relative_to(ROOT)}[{i}]"] = block.split("```", 1)[0]
    return out


REPO_YAML = repo_yaml()


@needs_yaml_rs
@pytest.mark.parametrize("name", sorted(REPO_YAML))
def test_the_fast_path_reads_every_repo_yaml_as_the_pure_loader(name: str) -> None:
    text = REPO_YAML[name]
    want = pure(text)
    fast = yamlload.load_1_2(text)
    if fast is not yamlload.MISS:
        assert repr(("ok", fast)) == repr(want)  # repr: types too (1 vs 1.0 vs True)
    assert repr(loaded(text)) == repr(want)


@needs_yaml_rs
def test_the_fast_path_takes_plain_workloads_large_and_small(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.benchmarks.bench_yaml import make_text

    for name in ("tiny.yaml", "demo.yaml", "dags.yaml"):  # comments with on, =, ' are cut
        assert yamlload.load_1_2(WORKLOADS[name]) is not yamlload.MISS, name
    text = make_text(120)
    fast = yamlload.load_1_2(text)
    assert fast is not yamlload.MISS
    assert repr(fast) == repr(yaml.load(text, Loader=yamlload.PureLoader))
    workload = repr(parse_workload(text, "big.yaml"))
    monkeypatch.setitem(sys.modules, "yaml_rs", None)  # its import fails: not installed
    monkeypatch.setattr(yamlload, "_yaml_rs", None)  # not imported yet
    assert yamlload._rs() is None
    assert yamlload.load_1_2(text) is yamlload.MISS
    assert repr(parse_workload(text, "big.yaml")) == workload


DIVERGENT = [
    # (why, text): yaml_rs alone reads these otherwise than PyYAML (or accepts them where
    # PyYAML refuses them): the fast path must leave each to the PyYAML path.
    ("leading-zero octal", "a: 012\n"),
    ("0o octal", "a: [0o17]\n"),
    ("0X hex", "a: 0X1F\n"),
    ("0B binary", "a: 0B1\n"),
    ("leading-zero decimal", "a: 08\n"),
    ("leading underscore", "a: _1\n"),
    ("signed dot floats", "a: [-.5, +.5]\n"),
    ("1.1 booleans", "a: [yes, No, on, OFF]\n"),
    ("1.1 boolean key", "Yes: 1\n"),
    ("sexagesimal int", "a: 1:30\n"),
    ("sexagesimal float", "a: -1:30.5\n"),
    ("date", "a: 2001-12-14\n"),
    ("timestamp", "a: 2001-12-14 21:59:43.10 -5\n"),
    ("value", "a: =\n"),
    ("merge key", "a: {<<: {b: 1}, c: 2}\n"),
    ("several documents", "a: 1\n---\nb: 2\n"),
    ("two empty documents", "---\n---\n"),
    ("a document after its end", "a: 1\n...\nb: 2\n"),
    ("a document end alone", "...\n"),
    ("YAML 2.0", "%YAML 2.0\n---\na: 1\n"),
    ("tab in a flow", "a: [1,\t2]\n"),
    ("tab after a value", "a: 1\t\n"),
    ("empty key", ": 1\n"),
    ("empty flow key", "a: {: 1}\n"),
    ("sequence key", "{[a]: 1}\n"),
    ("mapping key", "{{a: 1}: 2}\n"),
    ("multi-line flow key", "{a: 1, b\n c: 2}\n"),
    ("multi-line quoted key", "{'a\n b': 1}\n"),
    ("colon on the line after its key", "a: {b\n : 1}\n"),
    ("pipe starting a flow scalar", "a: [|6, 7]\n"),
    ("angle starting a flow scalar", "a: {b: 1,> c: 2}\n"),
    ("colon starting a flow scalar", "a: [1, :x]\n"),
    ("glued block scalar comment", "a: |#x\n"),
    ("NUL", "a: x\x00y\n"),
    ("control character", "a: \x07\n"),
    ("byte-order mark", "\ufeffa: 1\n"),
    ("next line (NEL)", "a: [x\x85y]\n"),
    ("unicode line separator", "a: \u2028b\n"),
    ("non-specific tag", "a: ! 1\n"),
    ("unknown tag", "a: !foo 1\n"),
    ("hash in a quoted scalar", "a: ['x #y', 012]\n"),
    ("hash in a multi-line quoted scalar", "a: ['x\n  #y', 012]\n"),
]


@needs_yaml_rs
@pytest.mark.parametrize("text", [d[1] for d in DIVERGENT], ids=[d[0] for d in DIVERGENT])
def test_where_yaml_rs_parts_ways_the_pyyaml_path_decides(text: str) -> None:
    want = pure(text)
    assert repr(rs_alone(text)) != repr(want)  # the case is real: yaml_rs alone differs
    assert yamlload.load_1_2(text) is yamlload.MISS
    assert repr(loaded(text)) == repr(want)


FAST_CHECKS = [
    ("gate", lambda text: True),
    ("gate_bare", lambda bare: True),
    ("tokens_agree", lambda rs, bare: True),
    ("shape", lambda data: False),
    ("without_comments", lambda text, quoted_hash: yamlload.without_comments(text, False)),
]


@needs_yaml_rs
@pytest.mark.parametrize(("name", "permissive"), FAST_CHECKS, ids=[c[0] for c in FAST_CHECKS])
def test_each_check_of_the_fast_path_is_needed(
    name: str, permissive: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With any one check made permissive, some divergent text loads wrong: the tests
    above would fail."""
    monkeypatch.setattr(yamlload, name, permissive)
    wrong = []
    for why, text in DIVERGENT:
        try:
            got = repr(loaded(text))
        except Exception as e:  # the check kept the fast path from crashing
            got = repr(e)
        if got != repr(pure(text)):
            wrong.append(why)
    assert wrong


EQUAL_KEYS = ["{0: a, false: b}", "{1: a, 1.0: b}", "{0.0: a, -0.0: b}", "{.inf: a, .Inf: b}"]
EQUAL_KEYS += ["{true: a, True: b}", "{0x10: a, 16: b}", "a: 1\nb: 2\na: 3\n", "{a: 1, a : 2}"]


@needs_yaml_rs
@pytest.mark.parametrize("text", EQUAL_KEYS)
def test_keys_equal_in_python_are_duplicates_on_every_path(text: str) -> None:
    assert rs_alone(text)[0] == "error"
    assert yamlload.load_1_2(text) is yamlload.MISS
    assert loaded(text)[0] == "error"
    assert repr(loaded(text)) == repr(pure(text))


SAME_ON_THE_FAST_PATH = [
    "a: {1: a, '1': b, ~x: c}\nb: [0, -0, +1, 0x1F, 0b101, 1_000, 0.0, -0.0, 1.5, 1., .5]\n",
    "a: [1e3, 1E3, 1.0e+3, 2.5E-3, 1e400, -1e400, .inf, -.Inf, 12345678901234567890123]\n",
    "a: [true, True, FALSE, null, Null, ~, y, n, tRue, inf, nan, 1e, e3, 0x, x#y]\n",
    "a: 'it''s'\nb: \"q\"\nc: 'x\n\n  y'\nd: x\n  y\ne:\n- 1\n- [2, 3]\n",
    "- {a: [], b: {}, c: ''}\n- - - 1\n",
    "",
    "# only a comment\n",
    "5\n",
    "a: 1\r\nb: [2,\r\n  3]\r\n",
]


@needs_yaml_rs
@pytest.mark.parametrize("text", SAME_ON_THE_FAST_PATH)
def test_the_fast_path_reads_numbers_words_and_strings_as_pyyaml(text: str) -> None:
    fast = yamlload.load_1_2(text)
    assert fast is not yamlload.MISS
    assert repr(("ok", fast)) == repr(pure(text))


@needs_yaml_rs
def test_aliases_stay_shared_and_alias_bombs_bounded_as_before() -> None:
    """Anchors leave the text to the PyYAML path: an alias is the anchored object itself
    (yaml_rs would copy it), so a billion laughs stays as small as it was."""
    data = yamlload.load("a: &x [1]\nb: *x\n")
    assert isinstance(data, dict)
    assert data["a"] is data["b"]
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    assert yamlload.load_1_2(bomb) is yamlload.MISS
    data = yamlload.load(bomb)  # 9**9 strings were it expanded
    assert isinstance(data, dict)
    assert data["i"][0] is data["i"][8] is data["h"]


@needs_yaml_rs
def test_deep_nesting_is_refused_before_yaml_rs_overflows_its_stack() -> None:
    """yaml_rs overflows the C stack (the process dies) near 20,000 block levels: such a
    text never reaches it, and parsing it is the clear error it was."""
    code = (
        "from treadle.workload import parse_yaml\n"
        "from treadle.errors import WorkloadError\n"
        "try:\n    parse_yaml('- ' * 30000 + '1\\n', 'w.yaml')\n"
        "except WorkloadError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "w.yaml: nested too deeply to be a workload"
    for text in ("- " * 64 + "1\n", "a:\n" + "".join(" " * i + "-\n" for i in range(70))):
        assert yamlload.load_1_2(text) is yamlload.MISS
        assert repr(loaded(text)) == repr(pure(text))


@needs_yaml_rs
def test_comments_do_not_leave_the_fast_path() -> None:
    text = "# 1.1 reads yes, on, 012, =, 1:30, 2001-12-14 & ! ? otherwise\na: 1 # it's on\n"
    text += "b: [1, 2] #012\nc: x#y\n"
    assert yamlload.load_1_2(text) == {"a": 1, "b": [1, 2], "c": "x#y"}
    assert repr(loaded(text)) == repr(pure(text))
    # A quoted '#': only comments without quotes are cut, here not "# it's on".
    text += "d: 'x # y'\n"
    assert yamlload.load_1_2(text) is yamlload.MISS
    assert repr(loaded(text)) == repr(pure(text))


SCALARS = ["1", "-1", "+1", "0", "-0", "012", "0o17", "0x1F", "0X1F", "0b101", "0B1", "1_000"]
SCALARS += ["_1", "1:30", "1:30.5", "08", "09.5", "1.5", "1.", ".5", "-.5", "+.5", "1e3", "1E3"]
SCALARS += ["1.0e+3", "1e-3", "+1e3", ".inf", "-.inf", "+.inf", ".Inf", ".NaN", "inf", "nan"]
SCALARS += ["NaN", "true", "True", "TRUE", "tRue", "yes", "Yes", "YES", "y", "Y", "n", "no"]
SCALARS += ["No", "NO", "on", "On", "ON", "oN", "off", "Off", "OFF", "null", "Null", "NULL"]
SCALARS += ["~", "", "false", "False", "FALSE", "fAlse"]
SCALARS += ["=", "<<", "2001-12-14", "2001-12-14 21:59:43.10 -5", "2001-12-14t21:59:43Z"]
SCALARS += ["12345678901234567890123", "-0.0", "0.0", "00", "0_0", "1__0", "1_", "0x_1"]
SCALARS += ["1.0_5", "1_0.5", "0e0", "0777", "1,5", "abc", "a b", "-x", "--", "---", "..."]
SCALARS += ["x#y", "x # y", "12.e3", "1.e3", "0.", "30.125", "1e", "e3", "0x", "0o", "0b"]
SCALARS += ["9" * 40 + ".5", "1" * 400, "0.1e400", "1e400", "-1e400", "4.9e-324", "2e-400"]
SCALARS += ["|x", ">x", ":x", "x:", "-", "@x", "%x", "'", "it's", "#", "a #b"]
SCALARS += ["café", "\xa0", "1\xa0", "\xa01", "1\u3000", "\u2003", "\U0001f600", "\x85", "\u2028"]
SCALARS += ["\ufeff", "\x9b", "\ue000", "1#", "true#", "1]", "1,000", "1'"]


def generated_text(rng: random.Random) -> str:
    """A small document of block and flow collections over ``SCALARS``, plain or quoted,
    as keys and as values, with comments and line breaks inside flows now and then."""

    def scalar() -> str:
        s = rng.choice(SCALARS)
        r = rng.random()
        if r < 0.15:
            return "'" + s.replace("'", "''") + "'"
        if r < 0.25:
            return '"' + s + '"'
        return s

    def flow(depth: int) -> str:
        r = rng.random()
        if depth > 1 or r < 0.4:
            return scalar()
        sep = rng.choice([", ", ",", ",\n  ", " , ", ", # c\n  "])
        if r < 0.7:
            return "[" + sep.join(flow(depth + 1) for _ in range(rng.randint(0, 4))) + "]"
        pairs = (f"{scalar()}: {flow(depth + 1)}" for _ in range(rng.randint(0, 3)))
        return "{" + sep.join(pairs) + "}"

    def block(indent: int, depth: int) -> str:
        out = []
        seq = rng.random() < 0.5
        for _ in range(rng.randint(1, 4)):
            head = " " * indent + ("- " if seq else f"{scalar()}: ")
            if depth < 3 and rng.random() < 0.3:
                out.append(head.rstrip() + "\n" + block(indent + rng.choice([2, 4]), depth + 1))
            else:
                comment = rng.choice(["", "", "", " # yes 012 on", "  # it's = 1:30"])
                out.append(head + flow(0) + comment + "\n")
        return "".join(out)

    return block(0, 0)


@needs_yaml_rs
def test_generated_texts_load_exactly_as_with_the_pure_loader() -> None:
    """YAML 1.1 and 1.2 part ways on many of ``SCALARS``: every generated text loads as
    the pure-Python loader loads it, and the fast path takes a fair share of them."""
    rng = random.Random(1213)
    fast = 0
    texts = [generated_text(rng) for _ in range(1500)]
    for text in texts:
        assert repr(loaded(text)) == repr(pure(text)), text
        fast += yamlload.load_1_2(text) is not yamlload.MISS
    assert len(texts) // 10 < fast < len(texts) * 9 // 10


@needs_yaml_rs
def test_mutated_workloads_with_1_1_scalars_load_exactly_as_with_the_pure_loader() -> None:
    rng = random.Random(1214)
    texts = list(REPO_YAML.values())
    fast = 0
    for _ in range(1500):
        text = mutated(rng, texts, 15, MUTATIONS + SCALARS)
        assert repr(loaded(text)) == repr(pure(text)), text
        fast += yamlload.load_1_2(text) is not yamlload.MISS
    assert fast > 100


@needs_yaml_rs
def test_the_rm_config_takes_the_fast_path_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "# the RM's config\nusers:\n  alice: {weight: 2}\n  bob: {weight: 1}\n"
    assert yamlload.load_1_2(text) is not yamlload.MISS
    fast = repr(parse_rm_config(text, "c.yaml"))
    monkeypatch.setattr(yamlload, "_yaml_rs", False)
    assert repr(parse_rm_config(text, "c.yaml")) == fast
