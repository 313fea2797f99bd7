"""The catalogues and the committed GPU measurements ship inside the wheel: a non-editable install runs from
another directory, and roofline.validation compares the measurements without the checkout's validate/."""

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

# compare one shipped results file with the installed package; the report must be the one committed beside it
COMPARE = """
import sys
from roofline.catalogue import load_hardware
from roofline.validation import compare, results_file, targets
(path,) = [p for p in results_file.committed() if p.name == "nvidia-h200.json"]
results = results_file.load(path)
hardware = load_hardware(compare.hardware_for_device(results["env"]["device"]))
report = compare.compare(results, hardware)
print(path)
print(compare.render(report) + "\\n\\n" + targets.render(targets.targets(results, report, hardware)))
assert not [m for m in sys.modules if m.partition(".")[0] in ("validate", "torch", "triton")]
"""


def test_wheel_install_lists_models_from_elsewhere(root: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(root)],
        capture_output=True, text=True, check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("roofline-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    committed = sorted(p.name for p in (root / "validate" / "results").glob("*.json"))
    assert committed and {f"roofline/_results/{name}" for name in committed} <= shipped

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

    report = subprocess.run([str(python), "-c", COMPARE], cwd=elsewhere, capture_output=True, text=True, check=False,
                            env=env, timeout=600)
    assert report.returncode == 0, report.stderr[-2000:]
    path, text = report.stdout.split("\n", 1)
    assert path.startswith(site) and "_results" in path
    # the CLI's report minus its first line (the results path it was given)
    want = (root / "validate" / "results" / "nvidia-h200-compare.txt").read_text().split("\n", 1)[1]
    assert text == want
