"""validate/engines/check_reqs.py, which says what the carried vLLM payload (vllm_pack.sh) asks of the GPU image's own
packages: `make` keeps, from a wheel's Requires-Dist, only requirements on image packages whose markers hold on the
image (CPython 3.12, Linux x86-64, no extras) and that name a version; the check fails a requirement the environment
does not meet, naming the package, the requirement and what is there. Wheels and the environment are built here by
hand; the expected lines are read off them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

ENGINES = Path(__file__).resolve().parents[2] / "validate" / "engines"
sys.path.insert(0, str(ENGINES))
import check_reqs  # noqa: E402


def wheel(tmp_path: Path, name: str, requires: list[str]) -> str:
    path = tmp_path / f"{name}-1.0-py3-none-any.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-1.0.dist-info/METADATA", meta)
    return str(path)


def test_make_keeps_versioned_requirements_on_image_packages_whose_markers_hold_on_the_image(tmp_path):
    image = tmp_path / "image.txt"
    image.write_text("numpy\ntransformers\nTyping_Extensions\nrequests\n")
    w = wheel(tmp_path, "carried", [
        "numpy>=1.26",                                   # image package, versioned: kept
        "transformers>=5.5.3",                           # kept
        "typing-extensions>=4.10; python_version >= '3.9'",  # marker holds on 3.12: kept (name as written)
        "requests",                                      # no version: any image version meets it, left out
        "msgspec>=0.18",                                 # not an image package (carried): left out
        "numpy<2; python_version < '3.10'",              # marker false on 3.12: left out
        "transformers<5; extra == 'old'",                # an extra: left out
        "tokenizers>=0.21; sys_platform == 'darwin'",    # not Linux: left out
    ])
    lines = check_reqs.make(str(image), [w])
    name = Path(w).name
    assert lines == [f"numpy>=1.26  # wanted by {name}", f"transformers>=5.5.3  # wanted by {name}",
                     f"typing-extensions>=4.10  # wanted by {name}"]


def test_check_names_each_unmet_requirement_and_counts_them(tmp_path):
    have = metadata.version("packaging")  # an environment's package, by its own metadata
    major = int(have.split(".")[0])
    reqs = tmp_path / "image_reqs.txt"
    reqs.write_text(f"packaging>={major}  # wanted by a.whl\n"         # met
                    f"packaging>={major + 1}  # wanted by b.whl\n"     # one major ahead: unmet
                    "surely-not-installed-pkg>=1  # wanted by c.whl\n"  # absent: unmet
                    "\n# a comment line\n")
    r = subprocess.run([sys.executable, str(ENGINES / "check_reqs.py"), str(reqs)], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stdout.splitlines() == [f"FAIL packaging: packaging>={major + 1} (image has {have})",
                                     "FAIL surely-not-installed-pkg: surely-not-installed-pkg>=1 (image has nothing)",
                                     "2 failures"]
    reqs.write_text(f"packaging>={major}\n")
    r = subprocess.run([sys.executable, str(ENGINES / "check_reqs.py"), str(reqs)], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "0 failures\n")


def test_bad_usage_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, str(ENGINES / "check_reqs.py")], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
