"""validate.stored: a results file reads the same by its name whether it is committed as itself or as NAME.gz, and
every compressed file under validate/results is the only copy of its name, in gzip -n's reproducible form."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from validate import stored

RESULTS = Path(__file__).resolve().parents[2] / "validate" / "results"
# CRLF, a progress bar's lone carriage return, non-ASCII and a byte that is not UTF-8 (errors="replace")
BYTES = "step 1\r\nbar 10%\rbar 100%\nµs ≤ 1\n".encode() + b"\xff end\n"


def test_a_compressed_file_reads_as_the_file_itself(tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "M-server.log"
    packed = tmp_path / "packed" / "M-server.log"
    plain.parent.mkdir()
    packed.parent.mkdir()
    plain.write_bytes(BYTES)
    packed.with_name("M-server.log.gz").write_bytes(gzip.compress(BYTES, mtime=0))
    for newline in (None, ""):
        with open(plain, errors="replace", newline=newline) as f:
            expected = f.read()
        assert stored.read_text(plain, errors="replace", newline=newline) == expected
        assert stored.read_text(packed, errors="replace", newline=newline) == expected
    assert "bar 10%\rbar 100%" in stored.read_text(packed, errors="replace", newline="")  # a lone \r stays in its line
    assert stored.exists(plain) and stored.exists(packed) and not packed.exists()


def test_the_file_itself_wins_and_a_missing_name_fails_by_that_name(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.with_name("r.json.gz").write_bytes(gzip.compress(b'{"from": "gz"}'))
    path.write_text('{"from": "plain"}')
    assert stored.read_text(path) == '{"from": "plain"}'
    missing = tmp_path / "none.jsonl"
    assert not stored.exists(missing)
    with pytest.raises(FileNotFoundError, match="none.jsonl"):
        stored.read_text(missing)


def test_each_committed_gz_is_its_names_only_copy_without_name_or_time() -> None:
    packed = sorted(RESULTS.rglob("*.gz"))
    assert packed, "the large results files are committed as NAME.gz"
    for path in packed:
        assert not path.with_suffix("").exists(), f"{path}: both NAME and NAME.gz committed"
        head = path.read_bytes()[:10]
        # RFC 1952: magic 1f 8b, method 8; FLG (byte 3) without FNAME (0x08); MTIME (bytes 4-7) zero: gzip -n
        assert head[:3] == b"\x1f\x8b\x08" and not head[3] & 0x08 and head[4:8] == b"\0\0\0\0", path


def test_a_packed_file_asked_for_by_its_own_name_is_decompressed(tmp_path):
    import gzip

    from validate import stored

    with gzip.open(tmp_path / "server.log.gz", "wt") as f:
        f.write("Iteration(0): one line\n")
    assert stored.read_text(tmp_path / "server.log") == "Iteration(0): one line\n"
    assert stored.read_text(tmp_path / "server.log.gz") == "Iteration(0): one line\n"
