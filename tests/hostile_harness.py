"""The hostile-input harness's runner and corpus: run `roofline.cli.main(argv)` in-process with stdout and
stderr captured and a per-case time limit, and classify what came back.

Outcomes: ok (exit 0, stdout strict JSON when --json was asked, stderr only warning lines), error (exit 2 and
one stderr line `roofline: error: WHERE: RULE`, after any warning lines), and the failures: traceback (an
exception escaped main), hang (past the time limit), bad-error (any other exit status, a message that is
not one line naming a field), bad-json (Infinity, NaN or unparsable JSON on stdout).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE_LIMIT_S = float(os.environ.get("HOSTILE_CASE_LIMIT_S", "20"))
FAILURES = ("traceback", "hang", "bad-error", "bad-json")
ERROR_LINE = re.compile(r"roofline: error: \S.*?: \S")
# pydantic's multi-line report and Python's own messages are not rules a user can act on
RAW_ERRORS = ("validation error for", "errors.pydantic.dev", "object has no attribute", "unsupported operand",
              "division by zero", "invalid literal for int")


class Hang(BaseException):
    """Raised by the alarm when a case runs past its limit (BaseException: no `except Exception` eats it)."""


@dataclass
class Outcome:
    kind: str
    code: object
    stdout: str
    stderr: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind} (exit {self.code}): {self.detail or self.stderr.strip()[-600:]}"


def _strict_json(text: str) -> None:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} in JSON output")

    json.loads(text, parse_constant=refuse)


def _alarm(signum, frame) -> None:
    raise Hang


def invoke(argv: list[str], limit_s: float = CASE_LIMIT_S) -> Outcome:
    """Run the CLI once in-process; never raises (but KeyboardInterrupt)."""
    from roofline.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    code: object = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if exc.code is not None else 0
    except Hang:
        return Outcome("hang", None, out.getvalue(), err.getvalue(), f"past {limit_s:g} s")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the harness counts whatever escapes main
        tail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return Outcome("traceback", None, out.getvalue(), err.getvalue(), tail[-400:])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return classify(argv, code, out.getvalue(), err.getvalue())


def classify(argv: list[str], code: object, stdout: str, stderr: str) -> Outcome:
    lines = stderr.splitlines()
    warnings = [ln for ln in lines if ln.startswith("roofline: warning: ")]
    others = [ln for ln in lines if not ln.startswith("roofline: warning: ")]
    if "Traceback (most recent call last)" in stderr:
        return Outcome("traceback", code, stdout, stderr, "a traceback on stderr")
    if code == 2:
        if len(others) != 1 or lines[-1] != others[0] or not ERROR_LINE.match(others[0]):
            return Outcome("bad-error", code, stdout, stderr, "not one line 'roofline: error: WHERE: RULE'")
        if any(raw in others[0] for raw in RAW_ERRORS):
            return Outcome("bad-error", code, stdout, stderr, "a raw exception text, not a rule")
        return Outcome("error", code, stdout, stderr)
    if code != 0:
        return Outcome("bad-error", code, stdout, stderr, f"exit status {code!r}, not 0 or 2")
    if others and "--help" not in argv and "-h" not in argv:
        return Outcome("bad-error", code, stdout, stderr, f"stderr beyond warnings: {others[0][:200]}")
    if "--json" in argv:
        try:
            _strict_json(stdout)
        except ValueError as exc:
            return Outcome("bad-json", code, stdout, stderr, str(exc)[:200])
    del warnings
    return Outcome("ok", code, stdout, stderr)


# ---- corpus ---------------------------------------------------------------------------------------------

HOSTILE_NUMBERS = ["0", "-1", "1e300", "-1e300", "nan", "inf", "-inf", "1e-300", "3.35", "true", "1:20", "yes",
                   "1.5", "''", "null", "[]", "{}", "017", ".inf", ".nan", "1e9", "0x10", "1_000",
                   "123456789012345678901234567890", "2026-01-01", "!!binary aGVsbG8=", "[1, 2]", "'5'"]
HARDWARE_FIELDS = ["memory_bytes", "memory_bytes_per_s", "l2_cache_bytes", "sm_count", "fp32_dense_flops_per_s",
                   "bf16_dense_flops_per_s", "fp16_dense_flops_per_s", "fp8_dense_flops_per_s", "tdp_watts",
                   "int32_vector_ops_per_s"]
MODEL_FIELDS = ["num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "intermediate_size",
                "vocab_size", "max_position_embeddings", "norms_per_layer", "tie_word_embeddings", "qkv_bias"]
FLAG_VALUES = ["0", "-1", "1e300", "nan", "inf", "1e-300", "10000000000000", "99999999999999999999999999",
               "", " ", "ten", "1_0", "0x10", "+5", "٣", "1" * 400, "a" * 300, "\x00", "-", "--", "5\n6", "²", "+-5"]


def replace_field(text: str, field: str, value: str) -> str:
    """A spec's YAML with the top-level `field: ...` line's value replaced (comment dropped)."""
    pattern = re.compile(rf"^{re.escape(field)}:.*$", re.MULTILINE)
    if not pattern.search(text):
        return text + f"\n{field}: {value}\n"
    return pattern.sub(lambda _: f"{field}: {value}", text, count=1)


def spec_field_cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """Every listed hardware and model field of a catalogue spec set to every hostile value, shown."""
    cases = []
    for kind, name, fields in (("hardware", "H100-SXM", HARDWARE_FIELDS), ("model", "Llama-3.2-1B", MODEL_FIELDS)):
        folder = "hardware" if kind == "hardware" else "models"
        text = (ROOT / folder / f"{name}.yaml").read_text()
        for i, field in enumerate(fields):
            for j, value in enumerate(HOSTILE_NUMBERS):
                path = tmp / f"{kind}-{i}-{j}.yaml"
                path.write_text(replace_field(text, field, value))
                cases.append((f"{kind}.{field}={value}", ["show", kind, str(path)]))
    return cases


def flag_cases() -> list[tuple[str, list[str]]]:
    """Every numeric or named flag of the cheap commands with every hostile value."""
    flags = [(["kv"], "--context", ["--method", "bf16"]), (["kv", "--context", "64"], "--batch", []),
             (["kv", "--context", "64"], "--method", []), (["kv", "--context", "64"], "--model", []),
             (["kv", "--context", "64"], "--hardware", []), (["show", "model"], None, []),
             (["show", "hardware"], None, []), (["limits", "remat"], "--bits", []),
             (["limits", "remat"], "--batch", []), (["plan", "--method", "bf16"], "--context", []),
             (["plan", "--method", "bf16"], "--batch", []), (["plan", "--method", "bf16"], "--tp", []),
             (["plan", "--method", "bf16"], "--pp", []), (["plan", "--method", "bf16"], "--utilization", []),
             (["plan", "--method", "bf16"], "--reserve-gib", []), (["plan", "--method", "bf16"], "--generated", []),
             (["plan", "--method", "bf16"], "--prompt", []), (["plan", "--method", "bf16"], "--weight-dtype", []),
             (["plan", "--method", "bf16"], "--tpot-target-ms", []), (["plan", "--method", "bf16"], "--prefill-chunk",
                                                                       []),
             (["plan", "--method", "bf16"], "--micro-batches", []), (["plan"], "--method", []),
             (["plan", "--method", "bf16"], "--ep", []), (["plan", "--method", "bf16"], "--expert-weight-dtype", [])]
    cases = []
    for head, flag, tail in flags:
        for value in FLAG_VALUES:
            argv = head + ([flag, value] if flag else [value]) + tail
            cases.append((" ".join(head + [flag or ""]) + f" {value[:20]!r}", argv))
    return cases


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def file_contents() -> dict[str, bytes]:
    """Spec files that are not specs: empty, binary, deep, huge, aliased, duplicated, mistyped."""
    llama = (ROOT / "models" / "Llama-3.2-1B.yaml").read_text()
    h100 = (ROOT / "hardware" / "H100-SXM.yaml").read_text()
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))
    return {
        "empty.yaml": b"", "space.yaml": b"   \n", "null.yaml": b"~\n", "list.yaml": b"- 1\n- 2\n",
        "scalar.yaml": b"42\n", "binary.yaml": bytes(range(256)) * 4, "latin1.yaml": "name: caf\xe9".encode("latin-1"),
        "nul.yaml": b"name: a\x00b\n", "bom.yaml": "\ufeffname: x\n".encode(),
        "deep-json.json": _nested(100_000).encode(), "deep-yaml.yaml": ("a:\n" + "".join(
            "  " * i + "b:\n" for i in range(1, 400))).encode(),
        "deep-flow.yaml": ("a: " + "{b: " * 5000 + "1" + "}" * 5000).encode(),
        "huge.yaml": b"#" * ((1 << 20) + 1), "laughs.yaml": laughs.encode(),
        "dup.yaml": (llama + "\nnum_layers: 16\n").encode(), "dup-nested.yaml": b"mla:\n  a: 1\n  a: 2\n",
        "sexagesimal.yaml": replace_field(llama, "num_layers", "1:20").encode(),
        "true-int.yaml": replace_field(llama, "num_layers", "true").encode(),
        "octal.yaml": replace_field(llama, "num_layers", "0o20").encode(),
        "merge.yaml": (llama + "\n<<: {qkv_bias: true}\n").encode(),
        "python-tag.yaml": b"name: !!python/object/apply:os.system ['true']\n",
        "set-tag.yaml": b"name: !!set {a, b}\n", "timestamp.yaml": replace_field(llama, "name", "2026-01-01").encode(),
        "attention-empty.yaml": replace_field(llama, "attention", "[]").encode(),
        "attention-many.yaml": replace_field(llama, "attention", "[" + ", ".join(["{kind: full}"] * 17) + "]").encode(),
        "window-zero.yaml": replace_field(llama, "attention", "[{kind: sliding, window: 0}]").encode(),
        "window-huge.yaml": replace_field(llama, "attention", "[{kind: sliding, window: 1e300}]").encode(),
        "layers-1e9.yaml": replace_field(llama, "num_layers", "1000000000").encode(),
        "bigint.yaml": replace_field(llama, "num_layers", "1" * 5000).encode(),
        "slow-bw.yaml": replace_field(h100, "memory_bytes_per_s", "1e-300").encode(),
        "slow-flops.yaml": replace_field(h100, "bf16_dense_flops_per_s", "1e-300").encode(),
        "typo-bw.yaml": replace_field(h100, "memory_bytes_per_s", "3.35").encode(),
        "warn-bw.yaml": replace_field(h100, "memory_bytes_per_s", "5.0e10").encode(),
        "no-sources.yaml": re.sub(r"(?s)sources:.*", "", h100).encode(),
        "link-zero.yaml": h100.replace("latency_s: 1.0e-06", "latency_s: 0").encode(),
        "link-slow.yaml": h100.replace("bytes_per_s: 450.0e9", "bytes_per_s: 1e-300").encode(),
        "hf-empty.json": b"{}", "hf-list.json": b"[]", "hf-nan.json": b'{"architectures": ["LlamaForCausalLM"], '
        b'"hidden_size": NaN}', "hf-inf.json": b'{"hidden_size": Infinity}',
        "hf-arch.json": b'{"architectures": ["Nope"]}', "hf-arch-type.json": b'{"architectures": "Llama"}',
        "hf-llama.json": json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 0,
                                     "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100,
                                     "max_position_embeddings": 128}).encode(),
        "hf-huge.json": json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 10**30,
                                    "num_attention_heads": 8, "num_hidden_layers": 10**12, "intermediate_size": 128,
                                    "vocab_size": 100, "max_position_embeddings": 128}).encode(),
        "hf-float.json": json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64.0}).encode(),
        "hf-dup.json": b'{"architectures": ["LlamaForCausalLM"], "architectures": ["Nope"]}',
        "hf-bigint.json": b'{"architectures": ["LlamaForCausalLM"], "hidden_size": ' + b"9" * 5000 + b"}",
    }


def special_paths(tmp: Path) -> dict[str, str]:
    """Paths that are not regular files, or not usable names."""
    fifo = tmp / "fifo.yaml"
    if not fifo.exists():
        os.mkfifo(fifo)
    loop = tmp / "loop.yaml"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    folder = tmp / "folder.yaml"
    folder.mkdir(exist_ok=True)
    return {"fifo": str(fifo), "dev-zero": "/dev/zero", "dev-urandom": "/dev/urandom", "dev-null": "/dev/null",
            "folder": str(folder), "missing": str(tmp / "missing.yaml"), "symlink-loop": str(loop),
            "proc": "/proc/self/status", "long-name": "m" * 300, "long-path": str(tmp / ("d" * 300 + ".yaml")),
            "deep-path": "/".join(["x"] * 3000) + ".yaml", "nul": "a\x00b.yaml", "newline": "a\nb.yaml",
            "root": "/", "dot": ".", "empty": ""}


def file_cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """Each hostile file and path as a hardware and a model spec, through show and kv (kv --model only)."""
    paths = dict(special_paths(tmp))
    for name, data in file_contents().items():
        path = tmp / name
        path.write_bytes(data)
        paths[name] = str(path)
    cases = []
    for name, path in paths.items():
        cases += [(f"show hardware {name}", ["show", "hardware", path]),
                  (f"show model {name}", ["show", "model", path]),
                  (f"kv --model {name}", ["kv", "--context", "64", "--model", path]),
                  (f"kv --hardware {name}", ["kv", "--context", "64", "--hardware", path])]
    # the planner's searches on hardware figures that are typos or absurd (1e-300 B/s hung at 46e2f77)
    for name in ("slow-bw.yaml", "slow-flops.yaml", "typo-bw.yaml", "warn-bw.yaml", "link-slow.yaml"):
        cases.append((f"plan --hardware {name}", ["plan", "--hardware", paths[name], "--method", "bf16", "--model",
                                                  "Llama-3.2-1B", "--context", "512", "--tpot-target-ms", "50"]))
    return cases


def plot_cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """--plot into places that are not writable directories (all refused before any planning)."""
    afile = tmp / "afile"
    afile.write_text("x")
    link = tmp / "link-to-file"
    if not link.is_symlink():
        link.symlink_to(afile)
    targets = {"existing file": str(afile), "/dev/null": "/dev/null", "link to file": str(link),
               "under a file": str(afile / "sub"), "read-only /proc": "/proc/roofline-hostile/x",
               "read-only /sys": "/sys/roofline-hostile", "nul": "a\x00b", "long": str(tmp / ("p" * 300)),
               "the root": "/", "the root via ..": "/..", "empty": ""}
    return [(f"--plot {k}", ["plan", "--method", "bf16", "--model", "Llama-3.2-1B", "--context", "512", "--plot", v])
            for k, v in targets.items()]


def silent_wrong_cases(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(label, argv, needle): inputs that once gave an exit-0 answer that was wrong (issue 32), each of which must
    now be an error (exit 2, one line) containing `needle`."""
    trace = tmp / "trace-30.csv"
    trace.write_text("".join(f"{i * 0.1:.1f},128,16\n" for i in range(30)))
    fifo = tmp / "trace-fifo.csv"
    if not fifo.exists():
        os.mkfifo(fifo)
    huge = tmp / "trace-huge.csv"
    with open(huge, "wb") as fh:
        fh.truncate(1 << 30)  # sparse
    config = json.loads((ROOT / "tests/data/hf/Llama-3.1-8B/config.json").read_text())
    big = tmp / "bigint" / "config.json"
    big.parent.mkdir(exist_ok=True)
    big.write_text(json.dumps({**config, "max_position_embeddings": 2**1024}))
    sim = ["simulate", "--model", "Llama-3.2-1B", "--hardware", "H100-SXM", "--method", "bf16", "--no-search",
           "--trace"]
    plan = ["plan", "--method", "bf16", "--context", "512"]
    return [("pp past layers", [*plan, "--model", "Llama-3.2-1B", "--pp", "1000"], "--pp"),
            ("pp one past layers", [*plan, "--model", "Llama-3.2-1B", "--pp", "17"], "--pp"),
            ("tp not dividing heads", [*plan, "--tp", "3"], "tp"),
            ("tp past heads", [*plan, "--tp", "64"], "tp"),
            ("ep not dividing experts", [*plan, "--model", "Mixtral-8x7B", "--ep", "3"], "ep"),
            ("ep on a dense model", [*plan, "--ep", "2"], "ep"),
            ("trace a FIFO", [*sim, str(fifo)], "--trace"),
            ("trace /dev/zero", [*sim, "/dev/zero"], "--trace"),
            ("trace a folder", [*sim, str(tmp)], "--trace"),
            ("trace 1 GiB", [*sim, str(huge)], "--trace"),
            ("plot into /", [*plan, "--plot", "/"], "--plot"),
            ("config integer 2**1024", [*plan, "--model", str(big)], "max_position_embeddings")]


def catalogue_plan_cases() -> list[tuple[str, list[str]]]:
    """Every catalogue model planned with one method at a short context (table and strict JSON), and the
    invocations that crashed at 46e2f77 (sliding-window remat note, MLA presets, inf in JSON, TPOT inversions)."""
    names = sorted(p.stem for p in (ROOT / "models").glob("*.yaml"))
    cases = [(f"plan {n} bf16", ["plan", "--model", n, "--method", "bf16", "--context", "2048",
                                 "--hardware", "H200", "--tp", "8", "--json"]) for n in names]
    for n in ("Mistral-7B-v0.1", "Phi-3-mini"):
        cases.append((f"plan {n} xquant-2", ["plan", "--model", n, "--method", "xquant-2", "--context", "4096"]))
        cases.append((f"plan {n} xquant-2 json", ["plan", "--model", n, "--method", "xquant-2", "--context", "4096",
                                                  "--json"]))
    cases += [("plan h2o json", ["plan", "--method", "h2o-2048", "--context", "4096", "--json"]),
              ("plan tpot", ["plan", "--method", "bf16", "--tpot-target-ms", "100"]),
              ("plan tpot json", ["plan", "--method", "bf16", "--tpot-target-ms", "1e-300", "--json"]),
              ("plan aquakv on MLA", ["plan", "--model", "DeepSeek-V3", "--method", "aquakv-2"]),
              ("kv past positions", ["kv", "--model", "Mistral-7B-v0.1", "--context", "200000", "--json"]),
              ("kv aquakv max context", ["kv", "--context", str(1 << 30), "--method", "aquakv-2", "--json"]),
              ("limits remat sliding", ["limits", "remat", "--model", "Mistral-7B-v0.1", "--json"]),
              ("list models", ["list", "models", "--json"]), ("list hardware", ["list", "hardware", "--json"]),
              ("list methods", ["list", "methods"]), ("help", ["plan", "--help"])]
    return cases

