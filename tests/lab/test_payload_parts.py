"""NIXL's tarball carried in two parts (validate/engines/split_nixl.sh) and rejoined on the machine
(validate/engines/unpack_payload.sh through payload_parts.sh's join_parts), in temporary folders: the halves are the
file's first ceil(n / 2) bytes and the rest, they rejoin to its sha256, parts are joined in numeric order, and the
unpack leaves ~/site with NIXL's files whether NIXL came in parts, whole, or not at all."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

ENGINES = Path(__file__).resolve().parents[2] / "validate" / "engines"
ZSTD = shutil.which("zstd")


def sha_file(path: Path) -> None:
    path.with_name(path.name.replace(".tar.zst", ".sha256")).write_text(
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n")


def test_split_nixl_halves_the_tarball_into_n1_and_n2_which_rejoin_to_its_sha(tmp_path):
    payload = tmp_path / ".payload"
    (payload / "nx").mkdir(parents=True)
    blob = os.urandom(1_000_001)
    (payload / "nx" / "nixl.tar.zst").write_bytes(blob)
    sha_file(payload / "nx" / "nixl.tar.zst")
    r = subprocess.run(["bash", str(ENGINES / "split_nixl.sh"), str(payload)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # by hand: 1,000,001 bytes in halves of ceil(1,000,001 / 2) = 500,001 bytes
    assert (payload / "n1" / "nixl.part.0").read_bytes() == blob[:500_001]
    assert (payload / "n2" / "nixl.part.1").read_bytes() == blob[500_001:]
    assert sorted(p.name for p in (payload / "n2").iterdir()) == ["nixl.part.1", "nixl.sha256"]
    assert (payload / "nx" / "nixl.tar.zst").read_bytes() == blob  # the source is only read
    stash = tmp_path / "stash"
    stash.mkdir()
    for part in [*(payload / "n1").iterdir(), *(payload / "n2").iterdir()]:
        shutil.copy(part, stash)
    r = subprocess.run(["bash", "-c", f"source {ENGINES / 'payload_parts.sh'} && join_parts nixl nixl.tar.zst && "
                                      "sha256sum -c nixl.sha256"], cwd=stash, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "joined 2 parts" in r.stdout and (stash / "nixl.tar.zst").read_bytes() == blob


def test_split_nixl_refuses_a_tarball_that_fails_its_sha(tmp_path):
    (tmp_path / "nx").mkdir()
    (tmp_path / "nx" / "nixl.tar.zst").write_bytes(b"abc")
    (tmp_path / "nx" / "nixl.sha256").write_text("0" * 64 + "  nixl.tar.zst\n")
    r = subprocess.run(["bash", str(ENGINES / "split_nixl.sh"), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode != 0 and not (tmp_path / "n1").exists()


def test_join_parts_orders_parts_by_number_and_does_nothing_without_parts(tmp_path):
    chunks = [bytes([i]) * (i + 1) for i in range(12)]  # part.10 and part.11 come after part.9, not after part.1
    for i, c in enumerate(chunks):
        (tmp_path / f"nixl.part.{i}").write_bytes(c)
    script = f"source {ENGINES / 'payload_parts.sh'} && join_parts nixl out.bin"
    assert subprocess.run(["bash", "-c", script], cwd=tmp_path).returncode == 0
    assert (tmp_path / "out.bin").read_bytes() == b"".join(chunks)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "out.bin").write_bytes(b"whole")
    assert subprocess.run(["bash", "-c", script], cwd=empty).returncode == 0
    assert (empty / "out.bin").read_bytes() == b"whole"


def _tar_zst(dst: Path, name: str, files: dict[str, bytes], tmp: Path) -> None:
    src = tmp / f"src-{name}"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    with tarfile.open(tmp / f"{name}.tar", "w") as t:
        for rel in files:
            t.add(src / rel, arcname=rel)
    subprocess.run([ZSTD, "-q", "-f", str(tmp / f"{name}.tar"), "-o", str(dst)], check=True)


@pytest.mark.parametrize("nixl", ["parts", "whole", "none"])
def test_unpack_payload_rejoins_nixl_parts_and_keeps_the_other_ways(tmp_path, nixl):
    home = tmp_path / "home"
    stash = home / "stash"
    stash.mkdir(parents=True)
    _tar_zst(tmp_path / "site.tar.zst", "site", {"sitepkg/a.py": b"A = 1\n"}, tmp_path)
    data = (tmp_path / "site.tar.zst").read_bytes()
    (stash / "site.part.0").write_bytes(data[:10])
    (stash / "site.part.1").write_bytes(data[10:])
    sha_file(tmp_path / "site.tar.zst")
    shutil.copy(tmp_path / "site.sha256", stash)
    if nixl != "none":
        _tar_zst(tmp_path / "nixl.tar.zst", "nixl", {"nixl/_api.py": b"X = 2\n"}, tmp_path)
        sha_file(tmp_path / "nixl.tar.zst")
        shutil.copy(tmp_path / "nixl.sha256", stash)
        blob = (tmp_path / "nixl.tar.zst").read_bytes()
        if nixl == "parts":
            (stash / "nixl.part.0").write_bytes(blob[:7])
            (stash / "nixl.part.1").write_bytes(blob[7:])
        else:
            (stash / "nixl.tar.zst").write_bytes(blob)
    shutil.copy(ZSTD, stash / "zstd.bin")
    (stash / "check_reqs.py").write_text("print('ok all')\n")
    (stash / "image_reqs.txt").write_text("")
    (stash / "fallback").mkdir()
    r = subprocess.run(["bash", str(ENGINES / "unpack_payload.sh")], env={**os.environ, "HOME": str(home)},
                       capture_output=True, text=True)
    # the last step, the import check of vLLM, cannot pass here; everything before it ran
    assert "ModuleNotFoundError" in r.stderr or "No module named" in r.stderr, r.stderr
    assert (home / "site" / "sitepkg" / "a.py").read_bytes() == b"A = 1\n"
    assert (home / "site" / "nixl" / "_api.py").exists() == (nixl != "none")
    assert ("joined 2 parts" in r.stdout) == (nixl == "parts")
    assert not list(stash.glob("*.part.*"))
