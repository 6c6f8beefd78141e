"""Stands in for vLLM's OpenAI server in GPU-placement tests (there is no GPU here): it prints the
GPUs Ray handed the replica, then serves the simulator with the very flags vLLM was given."""

import os
import sys

from loadtest.commands.cli import main

print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}", flush=True)
sys.exit(main(["sim", *sys.argv[1:]]))
