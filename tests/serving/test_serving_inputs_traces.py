"""Trace files as public tools write them (serving.traces.read_trace): every row replayed, arrivals in seconds from
the trace's start, and each malformed file refused in one line naming the line and the rule. Expected values are
worked out by hand from the rows written in each test."""

from __future__ import annotations

import pytest

from roofline.errors import SpecError
from roofline.serving import traces
from roofline.serving.traces import MAX_TOKENS, read_trace

# Three rows in the Azure LLM inference trace 2023's columns and timestamp style
# (Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md: TIMESTAMP,ContextTokens,GeneratedTokens).
AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,374,44\n"
         "2023-11-16 18:15:50.9951690,396,109\n"
         "2023-11-16 18:15:51.5437120,879,45\n")


def _write(tmp_path, text: str, name: str = "t.csv", encoding: str = "utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_azure_dates_become_seconds_after_the_earliest_row(tmp_path):
    """18:15:50.995169 - 18:15:46.680590 = 4.314579 s; 18:15:51.543712 - 18:15:46.680590 = 4.863122 s (the 7th
    fractional digit, 100 ns, is below datetime's microsecond)."""
    arrival, prompt, output, notes, _ = read_trace(_write(tmp_path, AZURE))
    assert arrival.tolist() == [0.0, 4.314579, 4.863122]  # exact: whole microseconds apart
    assert prompt.tolist() == [374, 396, 879] and output.tolist() == [44, 109, 45]
    assert any("dates" in n for n in notes)


def test_header_names_in_any_order_and_extra_columns_noted(tmp_path):
    """BurstGPT's columns (HPMLL/BurstGPT README): Timestamp in seconds, the counts under 'Request tokens' and
    'Response tokens'; Model, Total tokens and Log Type are not used."""
    text = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "5,ChatGPT,472,18,490,Conversation log\n"
            "2,GPT-4,1087,230,1317,API log\n")
    arrival, prompt, output, notes, _ = read_trace(_write(tmp_path, text))
    assert arrival.tolist() == [0.0, 3.0]  # sorted by arrival, replayed from the first row (2 s)
    assert prompt.tolist() == [1087, 472] and output.tolist() == [230, 18]
    assert any("Model" in n and "Log Type" in n for n in notes)
    assert any("starts at 2 s; replayed from its first row" in n for n in notes)


def test_mooncake_json_lines_timestamp_in_ms(tmp_path):
    """Mooncake's format (kvcache-ai/Mooncake mooncake_trace.jsonl): 3052 ms -> 3.052 s, sorted by arrival; ids of
    ceil(tokens / 512) blocks (6755 -> 14, 2287 -> 5) come back in the rows' sorted order."""
    text = ('{"timestamp": 3052, "input_length": 2287, "output_length": 316, "hash_ids": [0, 42, 43, 44, 45]}\n'
            '{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": ' + str(list(range(14))) + '}\n')
    arrival, prompt, output, notes, blocks = read_trace(_write(tmp_path, text, "t.jsonl"))
    assert arrival.tolist() == [0.0, 3.052] and prompt.tolist() == [6755, 2287] and output.tolist() == [500, 316]
    assert list(blocks) == [list(range(14)), [0, 42, 43, 44, 45]]


def test_mooncake_ids_of_another_block_size_are_noted_not_replayed(tmp_path):
    """2 ids for 1000 tokens fit 512-token blocks (ceil(1000 / 512) = 2); 2 ids for 200 tokens do not (1 block):
    the rows are kept and the note names the line."""
    text = ('{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}\n'
            '{"timestamp": 500, "input_length": 200, "output_length": 20, "hash_ids": [0, 1]}\n')
    trace = read_trace(_write(tmp_path, text, "t.jsonl"))
    assert trace.blocks is None and len(trace.arrival_s) == 2
    assert any("line 2" in n and "not replayed" in n for n in trace.notes)


def test_bom_and_crlf_are_the_same_trace(tmp_path):
    """A spreadsheet's export (UTF-8 with a byte-order mark, CRLF line ends) reads as the plain file."""
    plain = "arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n"
    excel = "\ufeff" + plain.replace("\n", "\r\n")
    a = read_trace(_write(tmp_path, plain, "a.csv"))
    b = read_trace(_write(tmp_path, excel, "b.csv"))
    assert [x.tolist() for x in a[:3]] == [x.tolist() for x in b[:3]] == [[0.0, 0.5], [100, 200], [10, 20]]


@pytest.mark.parametrize("text,needle", [
    ("0,99999999999999999999999,10\n", "prompt_tokens"),   # was an int64 overflow to a negative count, then a hang
    (f"0,100,{MAX_TOKENS + 1}\n", "output_tokens"),
    ("0,\u00b2,10\n", "prompt_tokens"),                     # '²' passes str.isdigit but not int()
    ("1700000000,100,10\n", "Unix time"),                   # an absolute clock as arrival_s
    ("0;100;10\n", "comma-separated"),
    ('{"date": "20250101", "input_lens": [1], "output_lens": [1]}\n', "no arrival times"),
    ('{"timestamp": "x", "input_length": 1, "output_length": 1}\n', "timestamp"),
    ('{"timestamp": 0, "input_length": 1.5, "output_length": 1}\n', "input_length"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", "date and time"),
    ("TIMESTAMP,ContextTokens\n0,1\n", "output_tokens"),
])
def test_malformed_files_are_refused_naming_the_rule(tmp_path, text, needle):
    with pytest.raises(SpecError, match="--trace") as err:
        read_trace(_write(tmp_path, text))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_url_and_binary_are_refused(tmp_path):
    with pytest.raises(SpecError, match="URL"):
        read_trace("https://example.com/trace.csv")
    path = tmp_path / "b.csv"
    path.write_bytes(b"\xff\xfegarbage")
    with pytest.raises(SpecError, match="UTF-8"):
        read_trace(path)
    path.write_bytes(b"0,100,10\n" + b"\x00" * 100)  # a NUL byte: no text format has one
    with pytest.raises(SpecError, match="NUL byte at byte 9: a binary file"):
        read_trace(path)


def test_a_field_past_csvs_limit_is_one_error_line(tmp_path):
    """csv.field_size_limit() is 131,072 characters by default; a 200,000-digit field was a csv.Error traceback."""
    with pytest.raises(SpecError, match="line 1: field larger than field limit") as err:
        read_trace(_write(tmp_path, "1" * 200_000 + ",5,5\n"))
    assert "\n" not in str(err.value)


def test_rows_past_the_limit_are_refused_never_cut(tmp_path, monkeypatch):
    """MAX_ROWS rows are read whole; one more is refused naming the line (the CSV's 4th row after its header is line
    5), never dropped."""
    monkeypatch.setattr(traces, "MAX_ROWS", 3)
    rows = "".join(f"{i},100,10\n" for i in range(3))
    assert read_trace(_write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n" + rows))[0].tolist() == [0, 1, 2]
    with pytest.raises(SpecError, match="line 5: more than 3 rows"):
        read_trace(_write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n" + rows + "3,100,10\n"))
    mooncake = "".join(f'{{"timestamp": {i}, "input_length": 1, "output_length": 1}}\n' for i in range(4))
    with pytest.raises(SpecError, match="line 4: more than 3 rows"):
        read_trace(_write(tmp_path, mooncake, "m.jsonl"))
