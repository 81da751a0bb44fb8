"""A vLLM-style chat script (written for pagedlab's tests, in the shape of vLLM's
examples/offline_inference/basic/chat.py): one conversation, then a batch of them."""

import json

from vllm import LLM, SamplingParams

llm = LLM(model="meta-llama/Llama-3.2-1B-Instruct", num_gpu_blocks_override=96, max_model_len=512)
params = SamplingParams(temperature=0, max_tokens=12)
conversation = [
    {"role": "system", "content": "You are a helpful assistant"},
    {"role": "user", "content": "Name a planet."},
]
for out in llm.chat(conversation, params, use_tqdm=False):
    print(json.dumps({"single": out.outputs[0].text}))
for out in llm.chat([conversation, conversation], params, use_tqdm=False):
    print(json.dumps({"batch": out.outputs[0].text, "finished": out.finished}))
