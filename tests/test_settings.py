"""The settings model: each study.toml key declared once, and what reads it."""
import tomllib
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from satcal import settings
from satcal.errors import SatcalError
from satcal.settings import SECTIONS, Settings, render_template, stream_seed, validate_config

DOCS = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def test_docs_table_is_current():
    assert DOCS.read_text(encoding="utf-8").endswith(settings.settings_table())


def test_template_round_trip_gives_the_declared_defaults():
    """A default study.toml parses, validates, and reads back as the declared defaults (the new
    study's value where one is declared: abandoned = 0.02)."""
    config = validate_config(tomllib.loads(render_template({"study.judgments": "q.txt"})), Path("s.toml"))
    s = Settings.from_config(config)
    assert s.generator.min_per_cell == 200 and s.quality.trust_threshold == 0.7
    assert s.simulation.abandoned == 0.02  # the template's value for new studies
    assert s.formulations.gains == ("bin2", "bin1", "exp5", "exp3", "exp2", "lin")
    written = [n for body in config.values() for n in body]
    declared = [f.name for k in SECTIONS.values() for f in fields(k) if not f.metadata["example"]]
    assert sorted(written) == sorted(declared)


def test_old_study_without_later_keys_gets_their_defaults():
    """Keys added after studies existed default to the old behaviour (abandoned = 0, not 0.02)."""
    config = tomllib.loads(render_template({"study.judgments": "q.txt"}))
    del config["simulation"]["abandoned"], config["design"]
    s = Settings.from_config(validate_config(config, Path("s.toml")))
    assert s.simulation.abandoned == 0.0 and s.design.answers_per_example == 1


@pytest.mark.parametrize("section,key,value,expected", [
    ("generator", "method", "best", "generator.method = 'best': expected one of optimal, greedy, published"),
    ("quality", "trust_threshold", 1.5, "quality.trust_threshold = 1.5: expected a number in [0, 1]"),
    ("quality", "trust_threshold", True, "quality.trust_threshold = True: expected a number in [0, 1]"),
    ("presentation", "items_per_page", 0, "presentation.items_per_page = 0: expected a positive integer or \"auto\""),
    ("serve", "completion_code", "a b", "serve.completion_code = 'a b': expected letters, digits, _ or -, at most 64"),
    ("serve", "traps_per_participant", "all", "serve.traps_per_participant = 'all': expected an integer from 0 to "
                                              "10,000 or \"auto\""),
    ("serve", "traps_per_participant", True, "serve.traps_per_participant = True: expected an integer from 0 to "
                                             "10,000 or \"auto\""),
])
def test_one_line_error_names_file_key_and_expected(section, key, value, expected):
    config = tomllib.loads(render_template({"study.judgments": "q.txt"}))
    config[section][key] = value
    with pytest.raises(SatcalError) as err:
        validate_config(config, Path("x/study.toml"))
    assert str(err.value) == f"x/study.toml: {expected}"


def test_missing_required_key_is_named():
    config = tomllib.loads(render_template({"study.judgments": "q.txt"}))
    del config["quality"]["min_traps"]
    with pytest.raises(SatcalError, match=r"^s.toml: missing key quality.min_traps "):
        validate_config(config, Path("s.toml"))


def test_legacy_streams_keep_their_old_seeds():
    """Streams that existed before names: seed + 1 (traps) ... + 5 (power), batches 7919 apart,
    as every study made so far was seeded."""
    assert [stream_seed(100, n) for n in ("generate", "traps", "export", "preview", "simulate", "power")] \
        == [100, 101, 102, 103, 104, 105]
    assert stream_seed(100, "export", 2) == 100 + 2 + 2 * 7919


def test_new_streams_are_apart_and_reproducible():
    """A new name gets SeedSequence(seed, spawn_key=(crc32(name), index)): same inputs, same seed."""
    import zlib
    a = stream_seed(7, "adaptive")
    expected = np.random.SeedSequence(7, spawn_key=(zlib.crc32(b"adaptive"), 0)).generate_state(1, np.uint64)[0] >> 1
    assert a == int(expected) and a == stream_seed(7, "adaptive")
    assert len({stream_seed(7, "adaptive", i) for i in range(5)} | {stream_seed(8, "adaptive")}) == 6
    assert 0 <= a < 2 ** 63


def test_cli_choices_and_defaults_come_from_the_declarations():
    from satcal.cli import PLATFORM_NAMES, init
    assert PLATFORM_NAMES == ["appen", "toloka", "labelstudio", "csv", "serve"]
    opts = {p.name: p for p in init.params}
    assert opts["min_per_cell"].default == settings.default("generator.min_per_cell") == 200
    assert opts["seed"].default == 2015 and opts["k"].default == 5
