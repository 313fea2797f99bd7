launch_server --model-path /root/models/tiny-llama --load-format dummy --dtype bfloat16 --port 30001 --random-seed 0 --enable-metrics --log-level info --context-length 4096
