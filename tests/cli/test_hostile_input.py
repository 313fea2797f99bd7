"""Hostile-input harness: a corpus of files, paths and flags plus hypothesis strategies, run against the CLI
in-process with a per-case time limit. Zero tracebacks, zero hangs; every error one line naming the field
with exit status 2; every --json output strict JSON. The counts by category and outcome are printed in the
terminal summary (tests/conftest.py). HOSTILE_COUNT_ONLY=1 records without failing (to measure old code).
"""

from __future__ import annotations

import os
import string

import pytest
import yaml
from hostile_harness import (
    FAILURES,
    FLAG_VALUES,
    ROOT,
    catalogue_plan_cases,
    file_cases,
    flag_cases,
    invoke,
    plot_cases,
    silent_wrong_cases,
    spec_field_cases,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

COUNT_ONLY = os.environ.get("HOSTILE_COUNT_ONLY") == "1"
SETTINGS = settings(max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "250")), deadline=None, database=None,
                    derandomize=True, suppress_health_check=list(HealthCheck),
                    phases=[Phase.explicit, Phase.generate] + ([] if COUNT_ONLY else [Phase.shrink]))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


def run_all(category: str, cases, counts) -> None:
    failures = []
    for label, argv in cases:
        outcome = invoke(argv)
        counts[(category, outcome.kind)] += 1
        if outcome.kind in FAILURES:
            failures.append(f"{label}: {outcome}")
            counts.failures.append(f"[{category}] {label}: {outcome}")
    if not COUNT_ONLY:
        assert not failures, f"{len(failures)} of {len(cases)} failed:\n" + "\n".join(failures[:20])


def check_one(category: str, argv: list[str], counts) -> None:
    outcome = invoke(argv)
    counts[(category, outcome.kind)] += 1
    if outcome.kind in FAILURES:
        counts.failures.append(f"[{category}] {argv!r}: {outcome}")
        if not COUNT_ONLY:
            pytest.fail(f"{argv!r}: {outcome}")


def test_spec_fields(tmp, hostile_counts) -> None:
    run_all("spec field", spec_field_cases(tmp), hostile_counts)


def test_flags(hostile_counts) -> None:
    run_all("flag", flag_cases(), hostile_counts)


def test_files_and_paths(tmp, hostile_counts) -> None:
    run_all("file/path", file_cases(tmp), hostile_counts)


def test_plot_targets(tmp, hostile_counts) -> None:
    run_all("--plot", plot_cases(tmp), hostile_counts)


def test_silent_wrong_answers_are_errors(tmp, hostile_counts) -> None:
    """Each input that once gave a wrong answer with exit 0 (issue 32) is refused in one line naming the flag."""
    failures = []
    for label, argv, needle in silent_wrong_cases(tmp):
        outcome = invoke(argv)
        hostile_counts[("silent wrong", outcome.kind)] += 1
        if outcome.kind != "error" or needle not in outcome.stderr:
            failures.append(f"{label}: {outcome}")
            hostile_counts.failures.append(f"[silent wrong] {label}: {outcome}")
    if not COUNT_ONLY:
        assert not failures, "\n".join(failures)


def test_catalogue_plans(hostile_counts) -> None:
    run_all("catalogue plan", catalogue_plan_cases(), hostile_counts)


# ---- hypothesis ------------------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.integers(min_value=0, max_value=5000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(FLAG_VALUES),
    st.text(alphabet=string.printable + "éß٣²\x00", max_size=12),
)
CHEAP = {"--model": ["Llama-3.2-1B", "Mistral-7B-v0.1", "Phi-3-mini", "nope"],
         "--method": ["bf16", "kivi-2", "h2o-2048", "kivi:bits=true", "kivi:bits=1e300", "baseline:dtype=x", "+"],
         "--hardware": ["H100-SXM", "L4", "x"], "--weight-dtype": ["bf16", "fp8", "int3"]}
COMMAND_FLAGS = {
    "kv": ["--context", "--batch", "--model", "--method", "--hardware"],
    "plan": ["--context", "--batch", "--prompt", "--generated", "--tp", "--pp", "--utilization", "--reserve-gib",
             "--prefill-chunk", "--micro-batches", "--tpot-target-ms", "--weight-dtype"],
    "limits": ["--bits", "--batch", "--model", "--hardware"],
}


@st.composite
def argvs(draw) -> list[str]:
    """A command with a few of its flags set to hostile numbers or text (plan: one cheap method)."""
    command = draw(st.sampled_from(sorted(COMMAND_FLAGS)))
    argv = [command] + (["remat"] if command == "limits" else [])
    if command == "plan":
        argv += ["--model", draw(st.sampled_from(CHEAP["--model"][:3])), "--method", draw(st.sampled_from(
            CHEAP["--method"]))]
    if command == "kv":
        argv += ["--context", draw(numbers)]
    for flag in draw(st.lists(st.sampled_from(COMMAND_FLAGS[command]), max_size=3, unique=True)):
        value = draw(st.sampled_from(CHEAP[flag])) if flag in CHEAP else draw(numbers)
        argv += [flag, value]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@settings(SETTINGS, max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "150")))
@given(argv=argvs())
def test_hypothesis_flags(argv, hostile_counts) -> None:
    check_one("hypothesis argv", argv, hostile_counts)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)
SPECS = {kind: yaml.safe_load((ROOT / folder / f"{name}.yaml").read_text())
         for kind, folder, name in (("hardware", "hardware", "H100-SXM"), ("model", "models", "Llama-3.2-1B"))}


@SETTINGS
@given(kind=st.sampled_from(sorted(SPECS)), data=st.data())
def test_hypothesis_specs(kind, data, tmp_path_factory, hostile_counts) -> None:
    """A catalogue spec with one to three fields (or new keys) set to arbitrary YAML values, shown and used."""
    spec = dict(SPECS[kind])
    keys = data.draw(st.lists(st.sampled_from(sorted(spec) + ["extra", "measured", "mla", "moe", "attention"]),
                              min_size=1, max_size=3))
    for key in keys:
        spec[key] = data.draw(json_values)
    path = tmp_path_factory.getbasetemp() / f"hyp-{kind}.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    check_one("hypothesis spec", ["show", kind, str(path)], hostile_counts)


@SETTINGS
@given(text=st.text(alphabet=string.printable + "\u00e9\u2028\ufeff", max_size=200))
def test_hypothesis_raw_text(text, tmp_path_factory, hostile_counts) -> None:
    """Arbitrary text as a YAML hardware file."""
    path = tmp_path_factory.getbasetemp() / "hyp-raw.yaml"
    path.write_text(text)
    check_one("hypothesis raw", ["show", "hardware", str(path)], hostile_counts)
