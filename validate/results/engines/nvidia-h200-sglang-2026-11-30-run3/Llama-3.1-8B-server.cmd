launch_server --model-path /root/models/Llama-3.1-8B --load-format dummy --dtype bfloat16 --port 30000 --random-seed 0 --enable-metrics --log-level info
