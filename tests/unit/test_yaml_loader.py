"""The one YAML loader (``treadle.workload.yamlload``): libyaml's C parser where present,
with the pure-Python loader's validity, values and one-line errors."""

from __future__ import annotations

import random
from importlib import resources as package_files
from pathlib import Path

import pytest
import yaml

from treadle.cluster.config import parse_rm_config
from treadle.errors import InputError, WorkloadError
from treadle.workload import parse_workload, parse_yaml, yamlload

ROOT = Path(__file__).resolve().parents[2]
needs_libyaml = pytest.mark.skipif(not yamlload.LIBYAML, reason="PyYAML without libyaml")


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
    fast_workload = repr(parse_workload(text, name))
    monkeypatch.setattr(yamlload, "LOADER", yamlload.PureLoader)
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


@needs_libyaml
def test_fuzzed_workloads_load_exactly_as_with_the_pure_loader() -> None:
    """Mutated pieces of the repo's workloads: ``load`` accepts exactly what the
    pure-Python loader accepts, with the same data, and raises the same errors."""
    rng = random.Random(13)
    texts = list(WORKLOADS.values())
    differ = 0
    for _ in range(1500):
        lines = rng.choice(texts).splitlines(keepends=True)
        a = rng.randrange(len(lines))
        text = "".join(lines[a : a + rng.randint(1, 12)])
        for _ in range(rng.randint(1, 3)):
            p = rng.randrange(len(text) + 1)
            if rng.random() < 0.6:
                text = text[:p] + rng.choice(MUTATIONS) + text[p:]
            else:
                text = text[:p] + text[p + rng.randint(1, 3) :]
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
