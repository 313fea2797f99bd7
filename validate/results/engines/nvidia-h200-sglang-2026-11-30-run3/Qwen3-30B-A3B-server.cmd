launch_server --model-path /root/models/Qwen3-30B-A3B --load-format dummy --dtype bfloat16 --port 30002 --random-seed 0 --enable-metrics --log-level info
