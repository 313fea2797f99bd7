"""`roofline plan` end to end on every new layer kind's hand-written config (tests/catalogue/test_hf_hybrid*.py):
the default preset methods run, each result holds a positive cache per sequence, and the state in it is the one
derived by hand in those tests (kv --json, engine convention, at a context below every window)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from roofline.cli import main

sys.path.insert(0, str(Path(__file__).parent))

from test_hf_hybrid import GRANITE, GRIFFIN, LFM2, LFM3, NEMOTRON  # noqa: E402
from test_hf_hybrid_linear import KIMI, MINIMAX  # noqa: E402

# (config, tp, recurrent state bytes per sequence derived by hand in the tests above)
CONFIGS = {
    "lfm2": (LFM2, 2, 11 * 2 * 2048 * 2),
    "lfm3": (LFM3, 2, 4 * 6 * 2048 * 2),
    "granite": (GRANITE, 1, 6 * (48 * 128 * 64 + 3 * (3072 + 2 * 128)) * 2),
    "nemotron": (NEMOTRON, 2, 4 * (64 * 128 * 64 * 4 + 3 * (4096 + 2 * 4 * 128) * 2)),
    "kimi": (KIMI, 2, 6 * (32 * 128 * 128 + 3 * 3 * 32 * 128) * 2),
    "minimax": (MINIMAX, 2, 7 * 64 * 128 * 128 * 2),
    "griffin": (GRIFFIN, 1, 18 * (2560 + 3 * 2560) * 2),  # only sliding layers attend: remat's balance layer
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_plan_and_kv_run_on_the_config(name, tmp_path, capsys):
    config, tp, state = CONFIGS[name]
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    code = main(["plan", "--model", str(path), "--context", "1024", "--tp", str(tp), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["results"] and all(row["kv_bytes_per_sequence"] > 0 for row in report["results"])
    assert main(["kv", "--model", str(path), "--context", "100", "--json"]) == 0
    kv = json.loads(capsys.readouterr().out)
    assert kv["parts_bytes"]["state"] == state
