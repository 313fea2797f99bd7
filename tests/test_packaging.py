"""The catalogues ship inside the wheel: a non-editable install runs from another directory."""

import os
import subprocess
import sys
import venv
from pathlib import Path


def test_wheel_install_lists_models_from_elsewhere(root: Path, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(root)],
        capture_output=True, text=True, check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("roofline-*.whl")

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
