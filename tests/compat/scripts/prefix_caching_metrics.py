"""A vLLM-style prefix-caching script (written for pagedlab's tests, in the shape of vLLM's
examples/offline_inference/automatic_prefix_caching.py plus its metrics example): two questions
over one long shared prefix, then vLLM's metrics read through vllm.v1.metrics.reader."""

import json

from vllm import LLM, SamplingParams
from vllm.v1.metrics.reader import Counter, Gauge, Histogram, Vector

TABLE = "".join(f"| {i} | person {i} | {20 + i} years |\n" for i in range(12))
PREFIX = "Here is a table of people and their ages.\n" + TABLE

llm = LLM(
    model="lmsys/longchat-13b-16k",
    enable_prefix_caching=True,
    disable_log_stats=False,
    num_gpu_blocks_override=96,
    max_model_len=512,
)
params = SamplingParams(temperature=0, max_tokens=8)
for question in ("How old is person 3?", "How old is person 7?"):
    out = llm.generate(PREFIX + question, params)[0]
    print(json.dumps({"question": question, "text": out.outputs[0].text, "num_cached_tokens": out.num_cached_tokens}))
metrics = {}
for m in llm.get_metrics():
    assert isinstance(m, (Counter, Gauge, Histogram, Vector)), m
    if isinstance(m, Histogram):
        metrics[m.name] = {"count": m.count, "sum": m.sum}
    elif isinstance(m, (Counter, Gauge)):
        metrics[m.name] = metrics.get(m.name, 0) + m.value
print(json.dumps({"metrics": metrics}))
