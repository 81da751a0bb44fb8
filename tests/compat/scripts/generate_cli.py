"""A vLLM-style offline script (written for pagedlab's tests, in the shape of vLLM's
examples/offline_inference/basic/generate.py): engine arguments from the command line, the
model's default sampling parameters, one batch of prompts. Prints one JSON line per prompt."""

import json

from vllm import LLM, EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser

PROMPTS = ["The capital of France is", "Water boils at", "My favourite colour is"]


def main(args: dict) -> None:
    max_tokens, temperature = args.pop("max_tokens"), args.pop("temperature")
    llm = LLM(**args)
    params = llm.get_default_sampling_params()
    if max_tokens is not None:
        params.max_tokens = max_tokens
    if temperature is not None:
        params.temperature = temperature
    for out in llm.generate(PROMPTS, params):
        print(
            json.dumps({"prompt": out.prompt, "text": out.outputs[0].text, "token_ids": list(out.outputs[0].token_ids)})
        )


if __name__ == "__main__":
    parser = FlexibleArgumentParser()
    group = parser.add_argument_group("Engine arguments")
    EngineArgs.add_cli_args(group)
    group.set_defaults(model="meta-llama/Llama-3.2-1B-Instruct")
    sampling = parser.add_argument_group("Sampling parameters")
    sampling.add_argument("--max-tokens", type=int)
    sampling.add_argument("--temperature", type=float)
    main(vars(parser.parse_args()))
