"""Quality figures the seed papers report, as data: one entry per printed number, each with its citation.

Every value is copied from a table that docs/papers/*.md quotes verbatim (paper, table, model, dataset,
metric, value, and the same table's uncompressed baseline). Nothing is interpolated or invented: a cell the
paper leaves empty has no entry. Each entry maps, where one exists, to a roofline method SPEC on a catalogue
model, so the dashboard can put the paper's quality beside the memory our model computes for that SPEC;
`spec` is None where no SPEC expresses the paper's configuration (the note says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

SEEDS = {"XQuant": "000_a607c3ad204fc52b.txt", "AQUA-KV": "001_6a95a518950107cd.txt",
         "InnerQ": "002_74442fd528a9c58d.txt", "ZACK": "003_7ecb4415d61e84e3.txt",
         "SKVQ": "004_3b18b267e69fb508.txt"}
DOCS = {"XQuant": "docs/papers/xquant.md", "AQUA-KV": "docs/papers/aquakv.md", "InnerQ": "docs/papers/innerq.md",
        "ZACK": "docs/papers/zack.md", "SKVQ": "docs/papers/skvq.md"}


@dataclass(frozen=True)
class QualityFigure:
    """One number a paper prints, with what it measures and where it stands."""

    paper: str
    table: str
    model: str  # as the paper names it
    catalogue_model: str | None  # the roofline catalogue entry with that architecture, if any
    dataset: str
    metric: str
    higher_is_better: bool
    method: str  # the paper's row label
    value: float
    baseline: float | None  # the same table's uncompressed value for this model and column
    paper_memory: str  # the memory the paper reports for the row (its own units)
    spec: str | None  # roofline method SPEC of the same configuration
    note: str = ""

    @property
    def benchmark(self) -> str:
        """The group it belongs to: '<paper> <table>: <model>, <dataset> (<metric>)'."""
        return f"{self.paper} {self.table}: {self.model}, {self.dataset} ({self.metric})"

    @property
    def source(self) -> str:
        """Where the figure is printed: paper, seed file and table, and the notes that quote it."""
        return f"{self.paper} ({SEEDS[self.paper]}), {self.table}; quoted in {DOCS[self.paper]}"


Column = tuple[str, str | None, float | None]  # (paper's model, catalogue model, baseline value)
Row = tuple[str, str, str | None, Sequence[float | None]]  # (method, paper memory, spec, value per column)


def _table(paper: str, table: str, dataset: str, metric: str, higher: bool, columns: Sequence[Column],
           rows: Sequence[Row], note: str = "") -> list[QualityFigure]:
    out = []
    for method, memory, spec, values in rows:
        if len(values) != len(columns):
            raise ValueError(f"{paper} {table} {method}: {len(values)} values for {len(columns)} columns")
        for (model, catalogue, baseline), value in zip(columns, values, strict=True):
            if value is None:  # the paper prints no number here
                continue
            out.append(QualityFigure(paper, table, model, catalogue, dataset, metric, higher, method, value,
                                     baseline, memory, spec if catalogue else None, note))
    return out


def _kivi_star(bits: int) -> str:
    # XQuant's KIVI*: K per-channel (pre-RoPE), V per-token, group 128, fp16 scale and zero, 128-token residual
    return f"kivi:bits={bits},group_size=128"


XQ_T1_NOTE = "KV = cache size normalized to fp16, residual window excluded (XQuant Table 1)."
XQ_T4_NOTE = ("First 3 layers at 4 bits for KIVI*, XQuant and XQuant-CL (Table 4); KIVI* with that override has "
              "no SPEC (layer overrides are not SPEC syntax), so its rows are not mapped.")


def _xquant() -> list[QualityFigure]:
    gqa = [("Llama-3.1-8B", "Llama-3.1-8B", 6.24), ("Mistral-7B", "Mistral-7B-v0.3", 5.32)]
    gqa_c4 = [("Llama-3.1-8B", "Llama-3.1-8B", 9.54), ("Mistral-7B", "Mistral-7B-v0.3", 8.47)]
    t1_gqa: list[tuple[str, str, str | None, list[float], list[float]]] = [
        ("KIVI*-4bit", "KV 0.27", _kivi_star(4), [6.31, 5.34], [9.66, 8.51]),
        ("XQuant-4bit", "KV 0.27", "xquant-4", [6.28, 5.33], [9.60, 8.49]),
        ("KIVI*-3bit", "KV 0.20", _kivi_star(3), [6.59, 5.43], [10.13, 8.62]),
        ("XQuant-3bit", "KV 0.20", "xquant-3", [6.43, 5.39], [9.89, 8.57]),
        ("KIVI*-2bit", "KV 0.14", _kivi_star(2), [9.95, 6.36], [15.98, 9.88]),
        ("XQuant-2bit", "KV 0.14", "xquant-2", [7.74, 5.79], [12.27, 9.13]),
    ]
    mha = [("Llama-2-7B", "Llama-2-7B", 5.47), ("Llama-2-13B", "Llama-2-13B", 4.88)]
    mha_c4 = [("Llama-2-7B", "Llama-2-7B", 7.26), ("Llama-2-13B", "Llama-2-13B", 6.73)]
    t1_mha = [
        ("KIVI*-4bit", "KV 0.27", _kivi_star(4), [5.49, 4.90], [7.30, 6.75]),
        ("XQuant-8bit", "KV 0.26", "xquant:bits=8", [5.47, 4.88], [7.26, 6.73]),
        ("KIVI*-3bit", "KV 0.20", _kivi_star(3), [5.58, 4.97], [7.40, 6.83]),
        ("KIVI*-2bit", "KV 0.14", _kivi_star(2), [6.42, 5.61], [8.46, 7.67]),
        ("XQuant-4bit", "KV 0.13", "xquant-4", [5.54, 4.94], [7.36, 6.79]),
        ("XQuant-3bit", "KV 0.10", "xquant-3", [6.65, 5.22], [8.65, 7.07]),
    ]
    out = []
    for cols, cols_c4, rows in ((gqa, gqa_c4, t1_gqa), (mha, mha_c4, t1_mha)):
        out += _table("XQuant", "Table 1", "WikiText-2", "perplexity", False, cols,
                      [(m, kv, s, w) for m, kv, s, w, _ in rows], XQ_T1_NOTE)
        out += _table("XQuant", "Table 1", "C4", "perplexity", False, cols_c4,
                      [(m, kv, s, c) for m, kv, s, _, c in rows], XQ_T1_NOTE)
    t4_cols = [("Llama-2-7B", "Llama-2-7B", 5.47), ("Llama-2-13B", "Llama-2-13B", 4.88),
               ("Llama-3.1-8B", "Llama-3.1-8B", 6.24), ("Mistral-7B", "Mistral-7B-v0.3", 5.32)]
    t4 = []
    for e, kv_mha, kv_gqa, values in (
        (4, "0.27 / 0.13 / 0.13", "0.27", {"KIVI*": [5.49, 4.90, 6.30, 5.34], "KVQuant": [5.49, 4.90, 6.30, 5.34],
                                           "XQuant": [5.54, 4.94, 6.31, 5.33], "XQuant-CL": [5.48, 4.89, 6.29, 5.32]}),
        (3, "0.21 / 0.10 / 0.10", "0.21", {"KIVI*": [5.57, 4.96, 6.55, 5.41], "KVQuant": [5.56, 4.96, 6.48, 5.41],
                                           "XQuant": [6.10, 5.10, 6.43, 5.37], "XQuant-CL": [5.48, 4.92, 6.32, 5.34]}),
        (2, "0.15 / 0.08 / 0.08", "0.15", {"KIVI*": [6.20, 5.46, 8.72, 6.14], "KVQuant": [5.99, 5.34, 7.45, 5.87],
                                           "XQuant": [11.21, 7.00, 7.38, 5.69],
                                           "XQuant-CL": [5.57, 5.11, 6.60, 5.46]}),
    ):
        mha_kv = dict(zip(("KIVI*", "XQuant", "XQuant-CL"), kv_mha.split(" / "), strict=True))
        mha_kv["KVQuant"] = mha_kv["KIVI*"]
        specs = {"KIVI*": None, "KVQuant": f"kvquant-{e}", "XQuant": f"xquant:bits={e},high_precision_layers=3",
                 "XQuant-CL": f"xquant-cl-{e}"}
        for name, vals in values.items():
            label = f"KVQuant-{e}bit-1%" if name == "KVQuant" else f"{name}-{e}bit"
            memory = f"KV {mha_kv[name]} (MHA), {kv_gqa} (GQA)"
            t4.append((label, memory, specs[name], vals))
    out += _table("XQuant", "Table 4", "WikiText-2", "perplexity", False, t4_cols, t4, XQ_T4_NOTE)
    return out


AQ_NOTE = ("Table 2: WikiText-2 perplexity of base models at 8,192 tokens; LongBench average of 14 tasks, Instruct "
           "models. Its bits column is Llama-3.2-3B's (Tables 10-14 give each model's own). HIGGS alone (no "
           "predictors) has no SPEC.")


def _aquakv() -> list[QualityFigure]:
    def rows(qwen: bool) -> list[tuple[str, str, str | None]]:
        first = ",first_layer_bits=16" if qwen else ""  # Qwen keeps layer 0 in bf16 (Tables 13-14)
        return [("AQUA-KV", "2.09 bits", f"aquakv:bits=2{first}"), ("HIGGS", "2.02 bits", None),
                ("KIVI", "2.25 bits", _kivi_star(2)), ("KVQuant", "2.33 bits", "kvquant-2"),
                ("AQUA-KV", "3.06 bits", f"aquakv:bits=3{first}"), ("HIGGS", "3.02 bits", None),
                ("KIVI", "3.05 bits", _kivi_star(3)), ("KVQuant", "3.33 bits", "kvquant-3"),
                ("AQUA-KV", "4.02 bits", f"aquakv:bits=4{first}"), ("HIGGS", "4.02 bits", None),
                ("KIVI", "4.25 bits", _kivi_star(4)), ("KVQuant", "4.33 bits", "kvquant-4")]

    llama_ppl = [[7.03, 5.72, 2.62], [7.47, 5.89, 2.77], [9.34, 7.37, 3.06], [9.43, 6.64, 3.28],
                 [6.98, 5.64, 2.55], [7.05, 5.66, 2.57], [7.87, 6.04, 2.87], [7.26, 5.84, 2.75],
                 [6.98, 5.61, 2.54], [7.01, 5.62, 2.55], [7.03, 5.64, 2.61], [7.04, 5.65, 2.58]]
    llama_lb = [[44.30, 47.77, 52.79], [42.80, 47.37, 52.18], [39.64, 46.28, 52.45], [20.56, 37.17, 46.14],
                [44.37, 48.10, 52.81], [44.41, 47.86, 52.56], [41.40, 46.98, 52.87], [41.40, 46.42, 50.74],
                [44.48, 48.10, 52.95], [44.41, 48.07, 52.97], [43.11, 47.57, 52.88], [43.62, 47.77, 52.89]]
    qwen_ppl = [6.17, 8.08, 7.02, None, 6.14, 7.20, 6.37, None, 6.14, 6.88, 6.14, None]
    qwen_lb = [46.43, 25.97, 32.78, None, 46.81, 11.54, 32.63, None, 46.77, 11.54, 33.40, None]
    ppl_cols = [("Llama-3.2-3B", "Llama-3.2-3B", 6.98), ("Llama-3.1-8B", "Llama-3.1-8B", 5.61),
                ("Llama-3.1-70B", "Llama-3.1-70B", 2.54)]
    lb_cols = [("Llama-3.2-3B", "Llama-3.2-3B", 44.61), ("Llama-3.1-8B", "Llama-3.1-8B", 48.13),
               ("Llama-3.1-70B", "Llama-3.1-70B", 52.92)]
    qwen_note = AQ_NOTE + " HIGGS 3-bit LongBench 11.54 is as printed in Table 2 (Table 14: 14.61)."
    out = _table("AQUA-KV", "Table 2", "WikiText-2", "perplexity", False, ppl_cols,
                 [(*r, v) for r, v in zip(rows(False), llama_ppl, strict=True)], AQ_NOTE)
    out += _table("AQUA-KV", "Table 2", "LongBench", "average score", True, lb_cols,
                  [(*r, v) for r, v in zip(rows(False), llama_lb, strict=True)], AQ_NOTE)
    out += _table("AQUA-KV", "Table 2", "WikiText-2", "perplexity", False, [("Qwen2.5-7B", "Qwen2.5-7B", 6.13)],
                  [(*r, [v]) for r, v in zip(rows(True), qwen_ppl, strict=True)], AQ_NOTE)
    out += _table("AQUA-KV", "Table 2", "LongBench", "average score", True, [("Qwen2.5-7B", "Qwen2.5-7B", 46.82)],
                  [(*r, [v]) for r, v in zip(rows(True), qwen_lb, strict=True)], qwen_note)
    return out


INNERQ_METHODS = [("KIVI", "3 bits (Table 3)", "kivi-2"), ("KIVI_Sink", "3 bits (as KIVI)", "kivi-sink-2"),
                  ("TurboQuant", "3.75 bits (Table 3)", "turboquant"), ("Base", "3.5 bits (Table 3)", "innerq-base"),
                  ("Hybrid", "3.25 bits (Table 3)", "innerq-hybrid"), ("Small", "3 bits (Table 3)", "innerq-small")]
# LongBench (Table 2) per task, Llama-3.1-8B-Instruct: Baseline, KIVI, KIVI_Sink, Base, Hybrid, Small (no TurboQuant)
INNERQ_LONGBENCH_8B = {
    "qasper": (44.58, 44.08, 43.61, 44.59, 42.40, 42.36), "gov-report": (34.61, 34.47, 34.33, 34.33, 33.62, 33.80),
    "multinews": (26.95, 26.39, 26.76, 26.73, 26.20, 26.09), "trec": (39.50, 32.50, 34.50, 37.00, 37.50, 38.00),
    "triviaqa": (91.64, 90.53, 91.33, 91.51, 91.70, 91.70), "samsum": (43.57, 42.33, 43.09, 43.38, 42.82, 43.12),
    "lcc": (43.02, 42.85, 42.66, 42.97, 42.76, 42.84), "repobench-p": (38.26, 38.21, 38.37, 38.23, 38.08, 37.93),
}


def _innerq() -> list[QualityFigure]:
    gsm8k = {  # Table 1, GSM8k flexible_extract: Baseline, KIVI, KIVI_Sink, TurboQuant, Base, Hybrid, Small
        ("Llama 3.2-1B", "Llama-3.2-1B"): (6.22, 2.81, 4.02, 5.84, 5.53, 5.31, 4.63),
        ("Llama 3.2-3B", "Llama-3.2-3B"): (26.46, 19.33, 23.35, 25.47, 27.14, 23.12, 24.03),
        ("Llama 3.1-8B", "Llama-3.1-8B"): (49.96, 42.84, 47.84, 48.90, 48.22, 47.31, 45.94),
        ("Llama 2-7B", "Llama-2-7B"): (13.04, 13.12, 11.90, 12.59, 13.42, 11.30, 0.46),
        ("Mistral 7B v0.3", "Mistral-7B-v0.3"): (36.92, 32.30, 33.81, 34.72, 36.47, 33.89, 33.89),
    }
    note = "Table 1: GSM8k flexible_extract; K3/V3 or K3/V2 with 32 sinks + 96 recent fp16 tokens (§5.1)."
    out = []
    for (model, catalogue), (base, *values) in gsm8k.items():
        out += _table("InnerQ", "Table 1", "GSM8k", "accuracy (%)", True, [(model, catalogue, base)],
                      [(m, mem, s, [v]) for (m, mem, s), v in zip(INNERQ_METHODS, values, strict=True)], note)
    return out


def innerq_longbench_mean(column: int) -> float:
    """Mean of InnerQ Table 2's 8 LongBench tasks for Llama-3.1-8B (column 0 = Baseline, then KIVI, KIVI_Sink,
    Base, Hybrid, Small): the paper prints no average, so this one is computed here from its cells."""
    cells = [row[column] for row in INNERQ_LONGBENCH_8B.values()]
    return round(sum(cells) / len(cells), 4)


def _innerq_longbench() -> list[QualityFigure]:
    methods = [m for m in INNERQ_METHODS if m[0] != "TurboQuant"]
    note = ("Mean of the 8 LongBench tasks of Table 2 (qasper, gov-report, multinews, trec, triviaqa, samsum, lcc, "
            "repobench-p), computed here from the printed cells; the paper prints no average.")
    return _table("InnerQ", "Table 2", "LongBench (8 tasks)", "mean score", True,
                  [("Llama 3.1-8B-Instruct", "Llama-3.1-8B", innerq_longbench_mean(0))],
                  [(m, mem, s, [innerq_longbench_mean(i + 1)]) for i, (m, mem, s) in enumerate(methods)], note)


def _skvq() -> list[QualityFigure]:
    cols = [("Llama-2-7B-chat", "Llama-2-7B", 38.50), ("Llama-2-13B-chat", "Llama-2-13B", 38.83),
            ("Mistral-7B", "Mistral-7B-v0.1", 45.51), ("Mistral-7B-Instruct", None, 48.66)]
    rows = [("RTN", "K2V2 g128", None, [6.76, 10.15, 15.58, 18.02]),
            ("SmoothQuant", "K2V2 g128", None, [21.92, 23.22, 23.85, 29.27]),
            ("RPTQ", "K2V2 g128", None, [19.50, 35.01, 35.05, 38.91]),
            ("KIVI", "K2V2 g128, residual 128", _kivi_star(2), [35.91, 37.21, 42.43, 45.48]),
            ("SKVQ", "K2V2 g128, window 128", "skvq-k2v2", [37.50, 37.53, 43.47, 46.23])]
    note = ("Table 1: LongBench 'Average' (over more tasks than the 7 columns shown, §8 of the notes); group 128, "
            "window 128. Mistral-7B-Instruct (v0.2) has no catalogue entry; RTN, SmoothQuant, RPTQ have no SPEC.")
    return _table("SKVQ", "Table 1", "LongBench", "average score", True, cols, rows, note)


def _zack() -> list[QualityFigure]:
    # Tables 8-11: overall KV compression rate at 99% of baseline accuracy; catalogued models only
    data = {  # per model: ZACK, Keyformer, Keyformer-Z, KVQuant, KVQuant-Z
        ("Table 8", "IMDb"): {"Llama-3.1 8B": (0.53, 0.43, 0.72, 0.75, 0.89),
                              "Llama-3.1 70B": (0.63, 0.46, 0.74, 0.75, 0.91),
                              "Mistral-v0.3 7B": (0.61, 0.40, 0.71, 0.75, 0.90)},
        ("Table 9", "arXiv"): {"Llama-3.1 8B": (0.65, 0.58, 0.84, 0.75, 0.90),
                               "Llama-3.1 70B": (0.67, 0.63, 0.86, 0.75, 0.92),
                               "Mistral-v0.3 7B": (0.64, 0.61, 0.84, 0.75, 0.92)},
        ("Table 10", "Cocktail"): {"Llama-3.1 8B": (0.56, 0.51, 0.75, 0.75, 0.91),
                                   "Llama-3.1 70B": (0.59, 0.65, 0.84, 0.75, 0.92),
                                   "Mistral-v0.3 7B": (0.58, 0.57, 0.79, 0.75, 0.90)},
        ("Table 11", "HumanEval"): {"Llama-3.1 8B": (0.54, 0.46, 0.76, 0.75, 0.87),
                                    "Llama-3.1 70B": (0.56, 0.51, 0.77, 0.75, 0.87),
                                    "Mistral-v0.3 7B": (0.53, 0.50, 0.73, 0.75, 0.89)},
    }
    catalogue = {"Llama-3.1 8B": "Llama-3.1-8B", "Llama-3.1 70B": "Llama-3.1-70B", "Mistral-v0.3 7B": "Mistral-7B-v0.3"}
    note = ("Tables 8-11: the overall KV compression rate (fraction of fp16 KV bytes removed) that keeps 99% of "
            "the baseline accuracy. ZACK maps to a uniform rate (kept dims round up to multiples of 16); "
            "Keyformer to the kept fraction 1 - rate; the Z combinations' ZACK share is not published.")
    out = []
    for (table, dataset), models in data.items():
        for model, (zack, keyformer, keyformer_z, kvquant, kvquant_z) in models.items():
            rows = [("ZACK", f"rate {zack}", f"zack:qk_rate={zack},v_rate={zack}", [zack]),
                    ("Keyformer", f"rate {keyformer}", f"keyformer-50:budget_ratio={round(1 - keyformer, 2)}",
                     [keyformer]),
                    ("Keyformer-Z", f"rate {keyformer_z}", None, [keyformer_z]),
                    ("KVQuant", f"rate {kvquant}", "kvquant-4", [kvquant]),
                    ("KVQuant-Z", f"rate {kvquant_z}", None, [kvquant_z])]
            out += _table("ZACK", table, dataset, "compression rate at 99% accuracy", True,
                          [(model, catalogue[model], None)], rows, note)
    return out


@cache
def figures() -> tuple[QualityFigure, ...]:
    """Every quality figure, in paper order."""
    return tuple(_xquant() + _aquakv() + _innerq() + _innerq_longbench() + _skvq() + _zack())


def benchmarks() -> list[str]:
    """The distinct (paper, table, model, dataset, metric) groups, in paper order."""
    return list(dict.fromkeys(f.benchmark for f in figures()))


def default_benchmark() -> str:
    """The group the dashboard's Pareto page opens on: the first LongBench table, else the first group."""
    names = benchmarks()
    return next((b for b in names if "LongBench" in b), names[0])


def benchmark_specs(benchmark: str) -> tuple[str, ...]:
    """The method SPECs one `benchmark` group has figures for (what a Pareto front of it plans), in paper order."""
    return tuple(dict.fromkeys(f.spec for f in for_benchmark(benchmark) if f.spec))


def for_benchmark(benchmark: str) -> list[QualityFigure]:
    """The figures of one `benchmark` group, in paper order; raises ValueError if none has that name."""
    found = [f for f in figures() if f.benchmark == benchmark]
    if not found:
        raise ValueError(f"benchmark: unknown {benchmark!r}")
    return found
