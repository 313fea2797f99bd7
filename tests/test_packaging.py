"""The catalogues and the lab's kernel summaries ship inside the wheel, the lab does not: a non-editable install
runs from another directory and shows the kernel validation (the dashboard's Validation page) from the summaries,
with no kernel model module and no raw results in the wheel."""

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from roofline.trust.engines import SPAN_REPORTS

# read one shipped summary with the installed package, as the dashboard's Validation page does; nothing of the lab
SUMMARY = """
import json, sys
from roofline.dashboard import appdata as dashboard
(path,) = [p for p in dashboard.results_files() if p.name == "nvidia-h200.json"]
entry = dashboard.validation_report(path)
print(path)
print(json.dumps(entry, sort_keys=True))
assert not [m for m in sys.modules if m.partition(".")[0] in ("validate", "torch", "triton")]
"""
# the lab's kernel model: none of these module names may ship
LAB_MODULES = ("kernel_structure", "contention", "fixed_costs", "case_clock", "families", "predict", "compare",
               "targets")


def test_wheel_install_lists_models_from_elsewhere(root: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(root)],
        capture_output=True, text=True, check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("roofline-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    summaries = sorted(p.name for p in (root / "roofline" / "validation" / "kernel_summaries").glob("*.json"))
    assert summaries and {f"roofline/validation/kernel_summaries/{name}" for name in summaries} <= shipped
    # the only results the wheel carries are the compare reports the trust bands read (summaries, pyproject
    # force-include), never a raw results file
    assert not [n for n in shipped if n.startswith("validate/")
                or (n.startswith("roofline/_results/")
                    and not n.endswith(("-compare.txt", "-now-summary.txt", "-now-report.txt", "-quant-report.txt",
                                        "-repeat-report.txt"))
                    and Path(n).name not in SPAN_REPORTS)]
    # the kernels' and the real decoders' reports per measured device, every real vLLM run's and each SGLang run's
    # report of the model as it stands (the same reports a checkout's trust line reads: trust.engines.engine_reports)
    # and llama.cpp's now-report and quantized-weights report (trust.engines.llamacpp_bands, llamacpp_quant_bands)
    # and the published runs', and the measurement's own spread where runs were repeated (trust.engines.repeat_spreads)
    engines = root / "validate" / "results" / "engines"
    patterns = ("nvidia-h200-vllm-*-compare.txt", "nvidia-h200-sglang-*-now-summary.txt", "*-llamacpp-*-now-report.txt",
                "*-llamacpp-*-quant-report.txt", "*-repeat-report.txt")
    engine_runs = sorted([p.name for pattern in patterns for p in engines.glob(pattern)] + list(SPAN_REPORTS))
    assert {f"roofline/_results/engines/{name}" for name in engine_runs} <= shipped
    assert len([n for n in shipped if n.startswith("roofline/_results/")]) == 5 + len(engine_runs)
    assert not [n for n in shipped if n.startswith("roofline/validation/")
                and (Path(n).stem in LAB_MODULES or "/families/" in n or "/structure/" in n)]

    # a fresh venv that borrows this interpreter's third-party packages but not its roofline
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True, text=True, check=False,
    )
    assert install.returncode == 0, install.stderr[-2000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run(
        [str(python), "-c", "import roofline.catalogue as c; print(c.__file__); print(c.catalogue_dir('models'))"],
        cwd=elsewhere, capture_output=True, text=True, check=True, env=env,
    )
    module_file, models_dir = probe.stdout.split()
    assert module_file.startswith(site), "the installed wheel, not the checkout, must be imported"
    assert models_dir.startswith(site) and "_catalogue" in models_dir

    cli = subprocess.run([str(env_dir / "bin" / "roofline"), "list", "models"],
                         cwd=elsewhere, capture_output=True, text=True, check=False, env=env)
    assert cli.returncode == 0, cli.stderr
    assert "Llama-3.1-8B" in cli.stdout and "DeepSeek-V3" in cli.stdout

    report = subprocess.run([str(python), "-c", SUMMARY], cwd=elsewhere, capture_output=True, text=True,
                            check=False, env=env, timeout=600)
    assert report.returncode == 0, report.stderr[-2000:]
    path, text = report.stdout.split("\n", 1)
    assert path.startswith(site) and "kernel_summaries" in path
    # the installed page's entry is the committed summary (nothing recomputed: the planner has no kernel model)
    committed = json.loads((root / "roofline" / "validation" / "kernel_summaries" / "nvidia-h200.json").read_text())
    assert json.loads(text) == committed
    assert committed["report"]["summary"]["cases"] > 0 and committed["targets"]["suite"]["verdict"]
