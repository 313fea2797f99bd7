"""validate/engines/sglang_summary.py: what roofline's SGLang rules read, out of a /server_info answer and a start-up
log. The inputs are written by hand in SGLang 0.5.17's shapes (http_server.py server_info: server arguments and the
scheduler's init info at the top, the scheduler's resolved arguments in internal_states[0];
cuda_graph_config.py: one config per phase)."""

from validate.engines import sglang_summary as mod

INFO = {
    "mem_fraction_static": 0.5,  # the server argument as given: the resolved one below wins
    "max_total_num_tokens": 812345,
    "max_req_input_len": 131066,
    "version": "0.5.17",
    "internal_states": [{
        "mem_fraction_static": 0.903,
        "chunked_prefill_size": 8192,
        "attention_backend": "fa3",
        "effective_max_running_requests_per_dp": 3173,
        "cuda_graph_config": {"decode": {"backend": "full", "max_bs": 256, "bs": [1, 2, 4, 8, 12, 16]},
                              "prefill": {"backend": "breakable", "max_bs": 8192}},
    }],
}


def test_resolved_arguments_win_over_the_top_level_ones():
    out = mod.summary(INFO)
    assert out["mem_fraction_static"] == 0.903
    assert out["chunked_prefill_size"] == 8192
    assert out["attention_backend"] == "fa3"
    assert out["max_running_requests_effective"] == 3173


def test_scheduler_init_info_and_decode_graph_sizes_are_read():
    out = mod.summary(INFO)
    assert out["max_total_num_tokens"] == 812345 and out["max_req_input_len"] == 131066
    assert out["cuda_graph_max_bs"] == 256 and out["cuda_graph_bs"] == [1, 2, 4, 8, 12, 16]
    assert out["version"] == "0.5.17"


def test_absent_keys_are_none_not_errors():
    out = mod.summary({"max_total_num_tokens": 5})
    assert out["max_total_num_tokens"] == 5
    assert out["mem_fraction_static"] is None and out["cuda_graph_max_bs"] is None


def test_log_keeps_memory_lines_and_skips_batch_lines():
    log = ("\x1b[32m[2026-11-30 10:00:01] Load weight end. type=LlamaForCausalLM, avail mem=126.40 GB, "
           "mem usage=15.06 GB.\x1b[0m\n"
           "[2026-11-30 10:00:02] KV Cache is allocated. #tokens: 812345, K size: 49.58 GB, V size: 49.58 GB\n"
           "[2026-11-30 10:00:09] Prefill batch. #new-seq: 1, #new-token: 7, token usage: 0.00\n"
           "[2026-11-30 10:00:09] Decode batch. #running-req: 1, cuda graph: True, avail mem=9.80 GB\n"
           "[2026-11-30 10:00:10] The server is fired up and ready to roll!\n")
    lines = mod.log_lines(log)
    assert len(lines) == 3
    assert lines[0].startswith("[2026-11-30 10:00:01] Load weight end")
    assert "#tokens: 812345" in lines[1]
    assert lines[2].endswith("ready to roll!")
