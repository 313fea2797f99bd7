"""handshake_probe.py's pure parts (the descriptor list vLLM 0.24 builds for a remote pool, the plan), the
prediction's law (handshake_predict.py) and derive_handshake.py --probe, by hand.

vLLM 0.24's _build_fa_remote (nixl/base_worker.py@v0.24.0:1308-1364) for a blocks-first FlashAttention pool at tp 1
/ tp 1: per region i (one per layer, base b_i, page P = its block_lens[i]) first the K descriptor of every block,
(b_i + k P, P / 2), then the V descriptor of every block, (b_i + k P + P / 2, P / 2); 2 x regions x blocks of them.
"""

from __future__ import annotations

import ast
import inspect
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from validate import stored
from validate.engines import handshake_layout as hp
from validate.engines.handshake_predict import RUN17_DESCRIPTORS, fit_law, predict

ROOT = Path(__file__).resolve().parents[2]
RUN17 = ROOT / "validate/results/engines/nvidia-h200x2-vllm-2026-11-30-run17"
# vLLM 0.24.0's _build_fa_remote, verbatim (base_worker.py:1308-1364), committed as test data
VLLM_WORKER = Path(__file__).resolve().parents[1] / "data" / "vllm" / "build_fa_remote_v0.24.0.py"


def meta(case: hp.Case, bases: list[int]) -> hp.NixlAgentMetadata:
    return hp.pool_metadata(case, bases, 0, b"agent")


def test_the_descriptor_list_of_a_two_layer_three_block_pool_by_hand():
    got = hp.build_fa_remote(meta(hp.Case(blocks=3, page=64, layers=2), [1000, 5000]))
    assert got == [(1000, 32, 0), (1064, 32, 0), (1128, 32, 0),  # region 0, K of blocks 0, 1, 2
                   (1032, 32, 0), (1096, 32, 0), (1160, 32, 0),  # region 0, V: half a page on
                   (5000, 32, 0), (5064, 32, 0), (5128, 32, 0),
                   (5032, 32, 0), (5096, 32, 0), (5160, 32, 0)]
    assert hp.Case(3, 64, 2).descriptors == len(got) == 12


def test_llama_8b_pool_is_run17s():
    # run 17's decode log: "remote_block_len=65536" (2 x 16 tokens x 8 heads x 128 x 2 bytes); its prefill log: 839,648
    # tokens = 52,478 blocks of 16, so 52,478 x 32 layers x (K, V) = 3,358,592 descriptors
    log = stored.read_text(RUN17 / "Llama-3.1-8B-pd-decode.log")
    assert "remote_block_len=65536" in log and hp.page_bytes(8, 128) == 65536
    assert "GPU KV cache size: 839,648 tokens" in stored.read_text(RUN17 / "Llama-3.1-8B-pd-prefill.log")
    assert hp.Case(839_648 // 16, 65536).descriptors == 3_358_592 == RUN17_DESCRIPTORS
    # the default cases: 1/8, 1/4, 1/2 of that pool, and the whole pool's blocks at half the page, all <= 51.25 GiB
    cases = hp.parse_cases(hp.DEFAULT_CASES, 32)
    assert [c.descriptors for c in cases] == [419_840, 839_680, 1_679_296, 3_358_592]
    assert max(c.registered_bytes for c in cases) <= 51.25 * 2 ** 30


def test_the_mirror_is_vllms_function_verbatim():
    tree = ast.parse(VLLM_WORKER.read_text())
    theirs = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_build_fa_remote")
    ours = ast.parse(textwrap.dedent(inspect.getsource(hp.VllmWorkerMirror._build_fa_remote))).body[0]
    for fn in (theirs, ours):  # the annotations name vLLM's own types (TPMapping, NixlAgentMetadata)
        fn.args.args = [ast.arg(a.arg) for a in fn.args.args]
    assert [ast.dump(n) for n in ours.body[1:]] == [ast.dump(n) for n in theirs.body[1:]]  # all but the docstring


def test_cases_and_settings_are_checked_and_the_order_rotates(monkeypatch):
    with pytest.raises(ValueError, match="HS_CASES"):
        hp.parse_cases("100:65535", 32)
    with pytest.raises(ValueError, match="HS_CASES"):
        hp.parse_cases("100", 32)
    monkeypatch.setenv("HS_MEM", "GPU")
    with pytest.raises(ValueError, match="HS_MEM"):
        hp.read_env()
    # every case in every position once over n reps
    orders = [hp.order(4, r) for r in range(4)]
    assert all(sorted(col) == [0, 1, 2, 3] for col in zip(*orders, strict=True))


def test_dry_prints_the_plan_without_nixl_or_torch():
    r = subprocess.run([sys.executable, "-m", "validate.engines.handshake_probe", "--dry"], cwd=ROOT,
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert [c["blocks"] for c in plan["cases"]] == [6560, 13120, 26239, 52478] and plan["mem"] == "VRAM"


def probe(fixed: float, per: float, mem: str = "VRAM") -> dict:
    sizes = [419_840, 839_680, 1_679_296, 3_358_592]
    reps = [{"descriptors": d, "page_bytes": 65536, "read_ok": True, "meta_s": 0.0, "add_s": fixed, "build_s": 0.0,
             "descs_s": 0.0, "prep_s": per * d, "handshake_s": fixed + per * d, "calib_s": 0.01}
            for d in sizes for _ in range(3)]
    return {"mem": mem, "reps": reps}


def test_the_law_and_the_prediction_by_hand():
    fixed, per = fit_law([(d, 0.1 + 5e-7 * d) for d in (419_840, 839_680, 1_679_296)])
    assert fixed == pytest.approx(0.1) and per == pytest.approx(5e-7)
    p = predict(probe(0.1, 5e-7), host_speed=2.0)
    profile = json.loads((ROOT / "roofline/engines/profiles/vllm.json").read_text())
    # the current model at a host twice as fast: the profile's law where it carries one (run 23h's probe), else its
    # one figure, halved
    law = profile.get("kv_handshake_descriptor_s", 0.0)
    want = [(profile["kv_handshake_fixed_s"] + d * law) / 2 if law else profile["kv_handshake_s"] / 2
            for d in (419_840, 839_680, 1_679_296, 3_358_592)]
    assert [r["current_s"] for r in p["cases"]] == pytest.approx(want)
    assert p["probe_law"]["at_run17_s"] == pytest.approx(0.1 + 5e-7 * 3_358_592)
    assert p["held_out"]["error"] == pytest.approx(0.0, abs=1e-9)


def test_derive_puts_the_law_at_the_profiles_host(tmp_path):
    profile = tmp_path / "vllm.json"
    shutil.copy(ROOT / "roofline/engines/profiles/vllm.json", profile)
    kv_handshake_s = json.loads(profile.read_text())["kv_handshake_s"]
    (tmp_path / "run").mkdir()
    path = tmp_path / "run" / "handshake-probe.json"
    path.write_text(json.dumps(probe(0.1, 5e-7)))
    cmd = [sys.executable, "-m", "validate.engines.derive_handshake", "--probe", str(path), "--into", str(profile)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode != 0 and "--host-speed" in r.stderr  # no tiny server beside the probe
    r = subprocess.run([*cmd, "--host-speed", "2"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(profile.read_text())
    # measured on a host twice as fast: the profile's host takes twice as long
    assert d["kv_handshake_fixed_s"] == pytest.approx(0.2) and d["kv_handshake_descriptor_s"] == pytest.approx(1e-6)
    assert d["kv_handshake_s"] == kv_handshake_s and "handshake_probe.py" not in d["sources"]["kv_handshake_s"]
    # anchored: 1e-6 s a descriptor at the profile's host already exceeds run 17's whole wait there: fixed 0
    r = subprocess.run([*cmd, "--host-speed", "2", "--anchor"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(profile.read_text())["kv_handshake_fixed_s"] == 0.0
    path.write_text(json.dumps(probe(0.1, 2e-7)))
    r = subprocess.run([*cmd, "--host-speed", "2", "--anchor"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(profile.read_text())
    assert d["kv_handshake_descriptor_s"] == pytest.approx(4e-7)
    assert d["kv_handshake_fixed_s"] == pytest.approx(kv_handshake_s - 3_358_592 * 4e-7)
    path.write_text(json.dumps(probe(0.1, 5e-7, mem="DRAM")))
    r = subprocess.run([*cmd, "--host-speed", "2"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode != 0 and "HS_MEM=VRAM" in r.stderr
