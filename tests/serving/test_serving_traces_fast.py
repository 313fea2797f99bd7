"""A trace file in its plain form read by columns (serving.traces_fast) gives what the line-by-line reader gives:
dates worked out by hand across leap days and the epoch, every format's plain file read by columns, every other
form (quotes, comments, blank-ish rows, a lone CR, ragged widths, spaced or out-of-range fields) left to the line
reader, and a randomized set of files read both ways, row for row and note for note."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from roofline.errors import SpecError
from roofline.serving import traces, traces_fast
from roofline.serving.traces import read_trace


def _write(tmp_path, text: str, name: str = "t.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def _line_by_line(path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(traces_fast, "read_columns", lambda p, rows: None)
        return read_trace(path)


def _same(a, b) -> bool:
    return (all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a[:3], b[:3], strict=True))
            and np.array_equal(np.signbit(a.arrival_s), np.signbit(b.arrival_s))
            and a.notes == b.notes and (a.blocks is None) == (b.blocks is None)
            and list(a.blocks or []) == list(b.blocks or []))


def test_dates_across_a_leap_day_a_year_and_the_epoch(tmp_path):
    """2024 is a leap year: 2024-02-28 23:59:59.999999 to 2024-03-01 00:00:00 is a day and 1 us (86,400.000001 s);
    1969-12-31 23:59:59 is 1 s before the epoch, 1970-03-01 is 31 + 28 = 59 days after it: 59 x 86,400 + 1 =
    5,097,601 s after the first row. Read by columns (the line reader is never called)."""
    text = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
            "2024-02-28 23:59:59.9999999,1,1\n2024-03-01 00:00:00.0000000,2,2\n")
    got = traces_fast.read_columns(_write(tmp_path, text), traces.MAX_ROWS)
    assert got is not None and got[0].tolist() == [0.0, 86400.000001]
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n1969-12-31 23:59:59,1,1\n1970-03-01T00:00:00,2,2\n"
    assert traces_fast.read_columns(_write(tmp_path, text), traces.MAX_ROWS)[0].tolist() == [0.0, 5_097_601.0]


@pytest.mark.parametrize("day", ["1900-02-29", "2023-02-29", "2023-04-31", "2023-13-01", "0000-01-01"])
def test_a_date_that_does_not_exist_is_refused_by_the_line_reader(tmp_path, day):
    """1900 is not a leap year (divisible by 100, not by 400), April has 30 days, there is no month 13 nor year 0:
    the column reader declines and the line reader names the line."""
    path = _write(tmp_path, f"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,1,1\n{day} 00:00:00,1,1\n")
    assert traces_fast.read_columns(path, traces.MAX_ROWS) is None
    with pytest.raises(SpecError, match="line 3: arrival .* neither seconds nor a date"):
        read_trace(path)


@pytest.mark.parametrize("text,name", [
    ("arrival_s,prompt_tokens,output_tokens\n0.5,100,10\n0,200,20\n", "t.csv"),
    ("0.5,100,10\r\n0,200,20\r\n\r\n", "t.csv"),
    ("0.5,100,10\n\n\n0,200,20", "t.csv"),
    ("\ufeffTimestamp,Model,Request tokens,Response tokens\n5,ChatGPT,472,18\n2,GPT-4,1087,230\n", "t.csv"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
     "2023-11-16 18:15:50.9951690,396,109\n", "t.csv"),
    ('{"timestamp": 3052, "input_length": 2287, "output_length": 316, "hash_ids": [0, 42, 43, 44, 45]}\n'
     '{"timestamp":0,"input_length":600,"output_length":5,"hash_ids":[7,-8]}', "t.jsonl"),
    ('{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}\n'
     '{"timestamp": 500, "input_length": 200, "output_length": 20, "hash_ids": []}\n', "t.jsonl"),
])
def test_plain_files_are_read_by_columns_as_the_line_reader_reads_them(tmp_path, monkeypatch, text, name):
    path = _write(tmp_path, text, name)
    assert traces_fast.read_columns(path, traces.MAX_ROWS) is not None
    assert _same(read_trace(path), _line_by_line(path, monkeypatch))


@pytest.mark.parametrize("text", [
    'arrival_s,prompt_tokens,output_tokens\n0,"100",10\n',          # csv's quoting
    "0,100,10\n# a comment\n1,100,10\n",                            # a comment line
    "0,100,10\n,,\n1,100,10\n",                                     # a blank row of commas: skipped
    "0,100,10\r1,100,10\n",                                         # a lone CR ends a row in csv
    "Timestamp,Model,Request tokens,Response tokens\n0,a,1,1\n1,b,2,2,extra\n",  # ragged widths
    "0, 100,10\n",                                                  # a spaced count
    " 0,100,10\n",                                                  # a spaced arrival
    "inf,100,10\n", "1e9,100,10\n", "0,0,10\n", f"0,{traces.MAX_TOKENS + 1},10\n", "0,99999999999999999999,1\n",
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68059,1,1\n2023-11-16 18:15:46.6805,1,1\n",
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46+00:00,1,1\n",  # a zone
    "\n0,100,10\n",                                                 # a blank first line
    '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0], "x": 1}\n',  # another key
    '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}\n\n',        # a blank line
    '{"timestamp": 0.5, "input_length": 1, "output_length": 1, "hash_ids": [0]}\n',         # ms not whole
    '{"timestamp": 0, "input_length": 01, "output_length": 1, "hash_ids": [0]}\n',          # not JSON
])
def test_other_forms_are_left_to_the_line_reader(tmp_path, text):
    assert traces_fast.read_columns(_write(tmp_path, text), traces.MAX_ROWS) is None


def _random_csv(rng: random.Random) -> str:
    n = rng.randint(1, 40)
    kind = rng.choice(["plain", "header", "burst", "azure"])
    times = sorted(rng.uniform(0, 1e5) for _ in range(n))
    rows = []
    for t in times:
        p, o = rng.randint(1, 9000), rng.randint(1, 3000)
        if kind == "azure":
            frac = rng.choice([0, 1, 3, 6, 7])
            stamp = f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:" \
                    f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
            stamp += ("." + "".join(rng.choice("0123456789") for _ in range(frac))) if frac else ""
            rows.append(f"{stamp},{p},{o}")
        elif kind == "burst":
            rows.append(f"{t:.{rng.randint(0, 9)}f},GPT-4,{p},{o},{p + o},API log")
        else:
            rows.append(f"{rng.choice([repr(t), f'{t:.3e}', f'{t:.0f}'])},{p},{o}")
    head = {"plain": "", "header": "arrival_s,prompt_tokens,output_tokens\n",
            "burst": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n",
            "azure": "TIMESTAMP,ContextTokens,GeneratedTokens\n"}[kind]
    if kind == "azure" and len({len(r.split(",")[0]) for r in rows}) > 1:  # one width: else line by line
        rows = [r.split(",")[0][:19] + "," + ",".join(r.split(",")[1:]) for r in rows]
    end = rng.choice(["\n", "\r\n"])
    return head.replace("\n", end) + end.join(rows) + rng.choice(["", end, end + end])


def _random_jsonl(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 40)):
        p = rng.randint(1, 5000)
        ids = [rng.randint(-5, 10 ** 6) for _ in range(-(-p // 512) + (rng.random() < 0.05))]
        lines.append(json.dumps({"timestamp": rng.randint(0, 10 ** 8), "input_length": p,
                                 "output_length": rng.randint(1, 2000), "hash_ids": ids},
                                separators=rng.choice([(", ", ": "), (",", ":")])))
    return "\n".join(lines) + rng.choice(["", "\n"])


def test_random_plain_files_read_both_ways_agree(tmp_path, monkeypatch):
    """200 CSV and 100 JSON-lines files of assorted forms (headers, BurstGPT's and Azure's columns, 0-7 fractional
    digits, CRLF, trailing blank lines, ids that do or do not count 512-token blocks): every one is read by
    columns and agrees with the line reader."""
    rng = random.Random(21)
    for k in range(300):
        text, name = (_random_csv(rng), "t.csv") if k < 200 else (_random_jsonl(rng), "t.jsonl")
        path = _write(tmp_path, text, name)
        assert traces_fast.read_columns(path, traces.MAX_ROWS) is not None, text
        assert _same(read_trace(path), _line_by_line(path, monkeypatch)), text


def test_hash_id_tries_built_by_levels_number_nodes_as_row_by_row(tmp_path):
    """Rows [5, 6], [5, 7], [9], [5, 6, 8], [] (hand-worked): _trie creates (5) 0, (5,6) 1, (5,7) 2, (9) 3,
    (5,6,8) 4; the level-at-a-time build gives the same parents, starts (depth - 1) x 512 and leaves, and so do 300
    random id sets (chains drawn from a few shared ids, so prefixes repeat)."""
    from roofline.serving.prefix import hash_blocks
    from roofline.serving.requests import Requests
    from roofline.serving.trace_rules import BlockIds

    def both(rows):
        lengths = [len(r) for r in rows]
        flat = BlockIds(np.array([h for r in rows for h in r], dtype=np.int64),
                        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        reqs = Requests(np.zeros(len(rows)), np.full(len(rows), 3000), np.ones(len(rows), dtype=np.int64))
        return hash_blocks(reqs, rows)[1], hash_blocks(reqs, flat)[1]

    a, b = both([[5, 6], [5, 7], [9], [5, 6, 8], []])
    assert a.parent.tolist() == b.parent.tolist() == [-1, 0, 0, -1, 1]
    assert b.start.tolist() == [0, 512, 512, 0, 1024] and b.leaf.tolist() == [1, 2, 3, 4, 0]
    assert b.shared.tolist() == [1024, 1024, 512, 1536, 0]
    rng = random.Random(5)
    for _ in range(300):
        rows = [[rng.randint(0, 3) for _ in range(rng.randint(0, 6))] for _ in range(rng.randint(1, 30))]
        a, b = both(rows)
        if a is None:
            assert b is None and not any(rows)
            continue
        for field in ("parent", "start", "length", "leaf", "shared"):
            assert getattr(a, field).tolist() == getattr(b, field).tolist(), rows


def test_block_ids_index_like_the_lists(tmp_path):
    """A Mooncake file read by columns keeps its ids flat (trace_rules.BlockIds): row, slice and reorder give the line
    reader's lists."""
    text = ('{"timestamp": 9, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}\n'
            '{"timestamp": 0, "input_length": 100, "output_length": 1, "hash_ids": [3]}\n'
            '{"timestamp": 5, "input_length": 1100, "output_length": 1, "hash_ids": [4, 5, 6]}\n')
    blocks = read_trace(_write(tmp_path, text, "t.jsonl")).blocks
    assert [blocks[i] for i in range(3)] == [[3], [4, 5, 6], [1, 2]]  # sorted by arrival
    assert list(blocks[:2]) == [[3], [4, 5, 6]] and list(blocks[1:]) == [[4, 5, 6], [1, 2]]


def test_a_pipe_or_a_file_past_the_whole_read_limit_goes_line_by_line(tmp_path, monkeypatch):
    """A FIFO is never read whole (the line reader streams it), nor a file over MAX_BYTES (the line reader stops at
    MAX_ROWS rows instead of holding the file)."""
    import os
    import threading

    path = _write(tmp_path, "0,100,10\n1,200,20\n")
    monkeypatch.setattr(traces_fast, "MAX_BYTES", 10)
    assert traces_fast.read_columns(path, traces.MAX_ROWS) is None
    assert read_trace(path).prompt_tokens.tolist() == [100, 200]
    fifo = tmp_path / "p.csv"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: open(fifo, "w").close())  # opens the pipe's other end, writes nothing
    writer.start()
    assert traces_fast.read_columns(fifo, traces.MAX_ROWS) is None
    writer.join(timeout=10)
