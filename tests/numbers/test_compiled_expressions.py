"""roofline.numbers.codegen and the compiled graphs: generated code equals sympy's exact evaluation, and the cache is
keyed by content, bounded, and survives a new process (disk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.catalogue import load_hardware, load_model
from roofline.methods import parse_method
from roofline.numbers import codegen, codeprint
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload
from roofline.units import B, L, ceildiv

LLAMA8, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")


def _function(expr, flavour="scalar"):
    fns, _ = codegen.compiled(None, lambda: ([B, L], {"f": expr}, {}), flavour)
    return fns["f"]


def test_mod_inside_a_product_keeps_its_parentheses() -> None:
    # sympy's Python printer writes 3*Mod(x, 5) as `3*x % 5`, i.e. (3x) mod 5: by hand 25604 x 124 here
    expr = B * (25604 * L - 25604 * sp.Mod(sp.Max(0, L - 4), 128) - 25604 * sp.Min(4, L))
    assert _function(expr)(16, 32768) == 16 * 25604 * (32768 - 124 - 4)
    assert float(_function(expr, "vector")(16, 32768)) == 16 * 25604 * (32768 - 124 - 4)


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 512), l=st.integers(1, 1 << 22))
def test_generated_code_equals_exact_evaluation(b: int, l: int) -> None:
    expr = (3 * sp.Mod(L, 96) + ceildiv(L, 2048) * B - sp.Min(L, 4096) / 7 + sp.Max(B * L / 3, 10**6)) * B
    exact = float(expr.subs({B: b, L: l}))
    assert _function(expr)(b, l) == pytest.approx(exact, rel=1e-12)
    assert float(_function(expr, "vector")(b, l)) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("spec", ["bf16", "kivi-2", "aquakv-2", "xquant-cl-2", "zack-50+kvquant-4+keyformer-50"])
def test_compiled_step_equals_the_sympy_graph(spec: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    w = Workload(batch=16, context_tokens=32768)
    phases = PhaseModel.build(LLAMA8, H100, w, parse_method(spec))
    graph_time = phases.roofline.time(phases.decode)
    for b, ctx in ((1, 1), (16, 32768), (7, 100_003)):
        assert phases.decode_time(b, ctx) == pytest.approx(float(graph_time.subs({B: b, L: ctx})), rel=1e-12)


def test_cache_is_keyed_by_content_and_kept_on_disk(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    built = []

    def build():
        built.append(1)
        return [B, L], {"f": B * L + 1}, {"note": "meta"}

    key = codegen.content_key("test", LLAMA8, "x")
    assert key != codegen.content_key("test", LLAMA8, "y")
    assert key != codegen.content_key("test", LLAMA8.model_copy(update={"num_layers": 31}), "x")
    fns, meta = codegen.compiled(key, build)
    assert fns["f"](2, 3) == 7 and meta == {"note": "meta"} and len(built) == 1
    codegen._MEMORY.clear()  # a new process: memory empty, disk kept
    fns, _ = codegen.compiled(key, build)
    assert fns["f"](2, 3) == 7 and len(built) == 1
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1 and "sources" in json.loads(files[0].read_text())


def test_cache_off_writes_nothing_and_memory_is_bounded(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", "off")
    lru = codegen.LRU(3)
    for i in range(10):
        lru.get_or(str(i), lambda i=i: i)
    assert list(lru) == ["7", "8", "9"]
    codegen.compiled(codegen.content_key("test-off", 1), lambda: ([B], {"f": B}, {}))
    assert not list(tmp_path.iterdir())


def test_unwritable_cache_folder_is_skipped(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(blocker / "cache"))
    fns, _ = codegen.compiled(codegen.content_key("test-unwritable", 2), lambda: ([B], {"f": 2 * B}, {}))
    assert fns["f"](4) == 8


def test_a_repeated_call_is_computed_once_and_changes_no_float() -> None:
    # min(L, 4096) three times and max(B L / 3, 10^6) twice: each becomes one local; the values are those of the
    # unhoisted expressions (the same operations in the same order), checked against sympy's exact value
    w = sp.Min(L, 4096)
    exprs = {"f": 3 * w * B + w / 7 + sp.Max(B * L / 3, 10**6) + w, "g": [sp.Max(B * L / 3, 10**6) * 2, L + 1]}
    sources = codeprint.sources([B, L], exprs, "scalar")
    assert sources["f"].count("min(") == 1 and sources["f"].count("max(") == 1
    assert "_h" not in sources["g"] or "max(" in sources["g"]  # g defines what it uses
    fns, _ = codegen.compiled(None, lambda: ([B, L], exprs, {}), "scalar")
    for b, l in ((1, 1), (16, 32768), (3, 4096), (7, 100_003)):
        assert fns["f"](b, l) == pytest.approx(float(exprs["f"].subs({B: b, L: l})), rel=1e-15)
        assert fns["g"](b, l)[0] == pytest.approx(float(exprs["g"][0].subs({B: b, L: l})), rel=1e-15)


def _clear_print_memos() -> None:
    for memo in (codeprint._PLAINED, codeprint._PRECEDENCE, codeprint._ORDERED, *codeprint._TEXTS.values()):
        memo.clear()


@pytest.mark.parametrize("flavour", ["scalar", "vector"])
def test_the_process_wide_print_memos_change_no_text(flavour: str) -> None:
    # the same subtrees as a Program's local, a hoisted call and plain text in other function sets printed first:
    # a text that names a local of another set must never be reused, so the set prints as in a fresh process
    x, w, v = sp.Max(B * L / 3, 2 * L + 7), sp.Min(L, 4096), 2 * B * L + 3
    y = w + x / 5
    exprs = {"rows": [[x, y, x + y], [y * B, sp.Mod(L, 128) + w]],
             "total": codegen.Program((("_t0", x), ("_t1", y), ("_t2", v), ("_t3", v * L + 1)), ("return _t3",)),
             "sum": x + y + x * y}
    # each of these holds min(L, 4096) once (printed inline), where `exprs`' rows hoist it; u holds v, total's _t2
    others = {"q": x + y, "r": y * B, "s": sp.Mod(L, 128) + w, "t": codegen.Program((("_t0", x + y),), ("return 1",)),
              "u": v * L + 1}
    fresh = {}
    for name, functions in (("exprs", exprs), ("others", others)):
        _clear_print_memos()
        fresh[name] = codeprint.sources([B, L], functions, flavour)
    for first, then in (("others", "exprs"), ("exprs", "others")):
        _clear_print_memos()
        codeprint.sources([B, L], {"exprs": exprs, "others": others}[first], flavour)
        assert codeprint.sources([B, L], {"exprs": exprs, "others": others}[then], flavour) == fresh[then]


def test_ordered_terms_is_sympys_order() -> None:
    # codeprint.ordered_terms must give sympy's as_ordered_terms on every sum of the graphs it prints (decode and
    # prefill, dense, MoE and windowed methods, with the device's ceilings as symbols), else None
    sums = [3 - 2 * L, 2 * L - 3, L / 3 + sp.Rational(5, 7) * B + 2, sp.sqrt(2) * L + B, sp.I * L + B,
            sp.Float(0.5) * B * L**2 + L + sp.Min(L, 4096) / 7, 4 * sp.Mod(L, 96) - sp.Max(B, L) ** 2 + B * L]
    for model in (LLAMA8, load_model("Qwen3-30B-A3B")):
        for spec in ("bf16", "kivi-2", "xquant-cl-2"):
            phases = PhaseModel.build(model, H100, Workload(batch=16, context_tokens=32768, tp=2), parse_method(spec))
            roof = phases.roofline.as_symbolic()
            for phase in ("decode", "prefill"):
                for op in phases.graph(phase).ops:
                    sums += [e for e in sp.preorder_traversal(roof.op_times(op).total) if isinstance(e, sp.Add)]
    fast = 0
    for expr in sums:
        terms = codeprint.ordered_terms(expr)
        if terms is not None:
            fast += 1
            assert list(terms) == expr.as_ordered_terms(), expr
    assert codeprint.ordered_terms(sp.sqrt(2) * L + B) is None and codeprint.ordered_terms(sp.I * L + B) is None
    assert fast > 100


def test_a_program_runs_its_assignments_then_its_body() -> None:
    program = codegen.Program((("_a", sp.Max(B, L)), ("_b", B * L)), ("return 'big' if _a > 100 else _b",))
    fns, _ = codegen.compiled(None, lambda: ([B, L], {"p": program}, {}), "scalar")
    assert fns["p"](3, 5) == 15 and fns["p"](3, 500) == "big"


@pytest.mark.parametrize("spec", ["bf16", "kivi-2", "aquakv-2", "xquant-2", "zack-50+kvquant-4+keyformer-50"])
def test_summary_agrees_with_the_rows_it_replaces(spec: str) -> None:
    # the generated summary classifies each op in code; rows() classifies with device.binding_ceiling: the
    # phase's bound (time-weighted), top op and time sums must be the same at decode and prefill points
    w = Workload(batch=16, context_tokens=32768, tp=2)
    phases = PhaseModel.build(LLAMA8, load_hardware("H200"), w, parse_method(spec))
    for phase, args in (("decode", (1, 1)), ("decode", (16, 32768)), ("decode", (256, 4096)),
                        ("prefill", (1, 512, 1)), ("prefill", (8, 8192, 8))):
        kernel = phases.kernel(phase)
        rows = kernel.rows(*args)
        s = kernel.summary(*args)
        by_bound: dict[str, float] = {}
        for op, row in zip(kernel.ops, rows, strict=True):
            by_bound[row["bound"]] = by_bound.get(row["bound"], 0.0) + op["count"] * row["time_s"]
        top = max(range(len(rows)), key=lambda k: kernel.ops[k]["count"] * rows[k]["time_s"])
        assert s["bound"] == max(by_bound, key=by_bound.get)
        assert (s["dominant_op"], s["dominant_bound"]) == (rows[top]["name"], rows[top]["bound"])
        assert s["total_s"] == pytest.approx(sum(by_bound.values()), rel=1e-12)
        compute = sum(o["count"] * r["compute_s"] for o, r in zip(kernel.ops, rows, strict=True))
        assert s["compute_s"] == pytest.approx(compute, rel=1e-12)


def test_a_disk_hit_loads_code_objects_and_another_python_compiles(tmp_path, monkeypatch) -> None:
    # the stored code objects are used only under this Python's magic number; otherwise the source is compiled
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    key = codegen.content_key("test-marshal", 1)
    codegen.compiled(key, lambda: ([B, L], {"f": sp.Max(B, L) * 2}, {}))
    compiled_texts = []

    def counting_compile(*args, **kwargs):
        compiled_texts.append(args[0])
        return compile(*args, **kwargs)

    monkeypatch.setattr(codegen, "compile", counting_compile, raising=False)
    codegen._MEMORY.clear()
    assert codegen.compiled(key, lambda: pytest.fail("rebuilt"))[0]["f"](3, 5) == 10 and not compiled_texts
    path = next(tmp_path.glob("*.json"))
    data = json.loads(path.read_text())
    data["compiled"]["magic"] = "00000000"  # written by another Python
    path.write_text(json.dumps(data))
    codegen._MEMORY.clear()
    assert codegen.compiled(key, lambda: pytest.fail("rebuilt"))[0]["f"](7, 5) == 14 and len(compiled_texts) == 1


def test_the_disk_cache_is_bounded_and_keeps_what_was_read_last(tmp_path, monkeypatch) -> None:
    # 10 entries at a cap of 10, the oldest written read again, then an 11th: the write that exceeds the cap
    # removes the least recently *read* files down to 9 (a tenth below it): entries 1 and 2 go, entry 0 stays
    import os

    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codegen, "DISK_ENTRIES", 10)
    monkeypatch.setattr(codegen, "_COUNT_EVERY", 1)
    keys = [codegen.content_key("test-bound", i) for i in range(11)]
    for i, key in enumerate(keys[:10]):
        codegen.compiled(key, lambda i=i: ([B], {"f": B + i}, {}))
        os.utime(tmp_path / f"{key}-scalar.json", (1_000_000 + i, 1_000_000 + i))  # written in this order
    codegen._MEMORY.clear()
    assert codegen.compiled(keys[0], lambda: pytest.fail("rebuilt"))[0]["f"](1) == 1  # read: now the newest
    codegen.compiled(keys[10], lambda: ([B], {"f": B + 10}, {}))
    left = {p.name for p in tmp_path.glob("*.json")}
    assert len(left) == 9 and f"{keys[0]}-scalar.json" in left
    assert not {f"{keys[1]}-scalar.json", f"{keys[2]}-scalar.json"} & left


def test_kink_pairs_do_not_depend_on_the_hash_seed() -> None:
    """The kinks of a total come from a set of Min/Max nodes: their order (and so the generated `kinks` code, and the
    disk cache's text) must be the same in every process, whatever PYTHONHASHSEED is."""
    import os
    import subprocess
    import sys

    code = ("from roofline.lazy import sp\nfrom roofline.units import B, L, _kink_pairs\n"
            "e = sp.Max(3*L, 7*B + 2) + sp.Min(L, 4096) + sp.Max(B*L, 5*L + 9) + sp.Min(2*L + 1, 11*B)\n"
            "print(_kink_pairs(e, L))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("0", "1", "2", "3")}
    assert len(outs) == 1 and outs.pop().count(",") >= 3


def test_code_version_hashes_every_model_source(tmp_path, monkeypatch) -> None:
    """The cache's version covers the whole roofline package but report/ and cli/ (not only numbers/, where
    codegen lives): an edit to kv/quant.py, two floors away, must give a new version."""
    import shutil

    from roofline.numbers import codegen

    root = Path(codegen.__file__).resolve().parent.parent
    copy = tmp_path / "roofline"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.yaml"))
    fake = copy / "numbers" / "codegen.py"
    monkeypatch.setattr(codegen, "__file__", str(fake))
    codegen.code_version.cache_clear()
    before = codegen.code_version()
    (copy / "report" / "display.py").write_text("# presentation only\n")
    codegen.code_version.cache_clear()
    assert codegen.code_version() == before  # report/ only presents numbers
    quant = copy / "kv" / "quant.py"
    quant.write_text(quant.read_text() + "\n# an edit\n")
    codegen.code_version.cache_clear()
    assert codegen.code_version() != before
    codegen.code_version.cache_clear()
