"""Hypothesis strategies for the output-processing twin: valid calls (sampling parameters, text / token prompts,
chats) and bad ones, drawn reproducibly (``draw_many``: derandomized, the same calls on every run).

Every valid draw is greedy (``temperature=0``, or ``temperature=0.8`` with ``top_k=1``, which leaves one token to
sample) so that both engines must give the same tokens on SmolLM2-135M in float32; what varies is everything
else ``SamplingParams`` says about output processing. Ids below are SmolLM2's: 2 ``<|im_end|>`` (EOS), 1
``<|im_start|>``, 0 ``<|endoftext|>``, 30 ``.``, 28 ``,``, 198 ``\\n``, 260 `` the``, 314 `` is``, 253 `` a``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.twin.api_cases import PARTS_TEMPLATE, PLAIN_TEMPLATE, VOCAB_SIZE

T = TypeVar("T")

WORDS = ["The", "capital", "of", "France", "is", "sky", "blue", "?", "Answer", "one", "word", "cat", "sat", "on", "a"]
WORDS += ["mat", "1, 2, 3,", "Hello", "my name is", "Q:", "A:", "\n", "<|im_end|>", "<|im_start|>", "éà", "日本"]
STOP_STRINGS = [".", ",", "\n", " the", " is", "a", "e", " Paris", "is the", "!", "<|im_end|>", "im_"]
STOP_TOKEN_IDS = [2, 30, 28, 198, 260, 314, 253, 0, 1, 30, 28, 198]
#: The long one fills a 32-token block (the engines' block size) with the template's header: later chats hit it.
SYSTEMS = [
    "You are a pirate.",
    "Answer briefly.",
    "You are a careful assistant for a course on serving language models. Answer every question in one short "
    "sentence, then stop. Do not add greetings, lists or explanations unless asked.",
]
#: Questions SmolLM2-Instruct answers in a few tokens, then EOS.
QUESTIONS = [
    "Is the sky blue? Answer with one word.",
    "What is the capital of France? One word.",
    "Say yes or no: is water wet?",
    "What is 2 + 2? Answer with a number.",
    "Name one color.",
]
#: 40 tokens (more than a block) that some text prompts start with, so that later ones hit the prefix cache.
PREAMBLE = (
    "Here is a short exercise about paged attention and the KV cache of a language model server. Read the "
    "question and complete the sentence, in a few words and without lists: "
)
#: Token ids of sentences (SmolLM2's tokenizer): "The capital of France is", "Once upon a time, there was",
#: "Q: What is 2 + 2?\nA:", "Hello, my name is".
TOKEN_SENTENCES = [
    [504, 3575, 282, 4649, 314],
    [6403, 1980, 253, 655, 28, 665, 436],
    [65, 42, 1812, 314, 216, 34, 1232, 216, 34, 47, 198, 49, 42],
    [19556, 28, 957, 1462, 314],
]


def draw_many(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """``count`` examples of ``strategy``, the same on every run (derandomized: Hypothesis seeds itself from this
    function's code), without the cost of one test per example: they are played in a few engine calls."""
    got: list[T] = []

    @settings(
        max_examples=count,
        phases=[Phase.generate],
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def grab(example: T) -> None:
        got.append(example)

    grab()
    return got


words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
text_prompts = st.one_of(
    words,
    st.sampled_from(QUESTIONS),
    words.map(lambda w: PREAMBLE + w),
    st.sampled_from(QUESTIONS).map(PREAMBLE.__add__),
)
token_prompts = st.one_of(
    st.lists(st.one_of(st.integers(3, 49151), st.sampled_from(STOP_TOKEN_IDS)), min_size=1, max_size=10),
    st.tuples(st.sampled_from(TOKEN_SENTENCES), st.lists(st.sampled_from(STOP_TOKEN_IDS), max_size=2)).map(
        lambda t: t[1] + t[0]
    ),
).map(lambda ids: {"prompt_token_ids": ids})


@st.composite
def sampling(draw: st.DrawFn) -> dict[str, Any]:
    """Valid greedy ``SamplingParams`` keyword arguments; only the fields drawn away from their defaults."""
    p: dict[str, Any] = {"temperature": 0.0, "max_tokens": draw(st.integers(1, 16))}
    if draw(st.booleans()) and draw(st.booleans()):  # one in four: sampled from the single top token
        p.update(temperature=0.8, top_k=1)
    if draw(st.booleans()):
        p["stop"] = draw(st.lists(st.sampled_from(STOP_STRINGS), min_size=1, max_size=3, unique=True))
    if draw(st.booleans()):
        p["stop_token_ids"] = draw(st.lists(st.sampled_from(STOP_TOKEN_IDS), min_size=1, max_size=3, unique=True))
    optional: dict[str, st.SearchStrategy[Any]] = {
        "ignore_eos": st.booleans(),
        "include_stop_str_in_output": st.booleans(),
        "min_tokens": st.integers(0, p["max_tokens"]),
        "skip_special_tokens": st.booleans(),
        "spaces_between_special_tokens": st.booleans(),
        "logprobs": st.sampled_from([0, 1, 2, 5]),
        "repetition_penalty": st.sampled_from([0.7, 1.2, 2.0]),
        "presence_penalty": st.sampled_from([-1.0, 0.5, 2.0]),
        "frequency_penalty": st.sampled_from([-0.5, 0.5, 1.5]),
    }
    for name, values in optional.items():
        if draw(st.integers(0, 2)) == 0:  # each field in a third of the draws
            p[name] = draw(values)
    if "stop" not in p and draw(st.integers(0, 3)) == 0:
        p["detokenize"] = False  # stop strings need it (vLLM refuses them without)
    return p


@st.composite
def generate_calls(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 8))
    prompts = [draw(token_prompts if draw(st.booleans()) else text_prompts) for _ in range(n)]
    return {"api": "generate", "prompts": prompts, "params": draw(st.lists(sampling(), min_size=n, max_size=n))}


@st.composite
def conversations(draw: st.DrawFn, parts: bool, continued: bool) -> list[dict[str, Any]]:
    conv = []
    if draw(st.booleans()):
        conv.append({"role": "system", "content": draw(st.sampled_from(SYSTEMS))})
    for turn in range(draw(st.integers(1, 2))):
        if turn:
            conv.append({"role": "assistant", "content": draw(words)})
        texts = draw(st.lists(st.one_of(st.sampled_from(QUESTIONS), words), min_size=1, max_size=3 if parts else 1))
        content: Any = [{"type": "text", "text": t} for t in texts] if parts else texts[0]
        conv.append({"role": "user", "content": content})
    if continued:
        conv.append({"role": "assistant", "content": draw(words)})
    return conv


@st.composite
def chat_calls(draw: st.DrawFn) -> dict[str, Any]:
    """One ``LLM.chat`` call: the model's template (or a plain one with ``chat_template_kwargs``, or one that takes
    OpenAI content parts), str or text-part content, a final assistant message continued or not."""
    template = draw(st.sampled_from(["model", "plain", "parts"]))
    continued = template == "model" and draw(st.booleans())
    kwargs: dict[str, Any] = {}
    if template == "plain":
        kwargs.update(
            chat_template=PLAIN_TEMPLATE, chat_template_kwargs={"speaker": draw(st.sampled_from(["bot:", ""]))}
        )
    elif template == "parts":
        kwargs["chat_template"] = PARTS_TEMPLATE
    if continued:
        kwargs.update(add_generation_prompt=False, continue_final_message=True)
    elif draw(st.integers(0, 4)) == 0:
        kwargs["add_generation_prompt"] = False
    parts = template == "parts" or draw(st.booleans())
    n = draw(st.integers(1, 6))
    prompts = draw(st.lists(conversations(parts, continued), min_size=n, max_size=n))
    params = draw(st.lists(sampling(), min_size=n, max_size=n))
    for p in params:  # the special tokens after an ignored EOS show in the text
        if draw(st.integers(0, 3)) == 0:
            p.update(ignore_eos=True, skip_special_tokens=False, max_tokens=max(p["max_tokens"], 12))
            p["min_tokens"] = min(p.get("min_tokens", 0), 12)
    return {"api": "chat", "prompts": prompts, "params": params, "chat": kwargs}


calls = st.one_of(generate_calls(), chat_calls())

# --- bad inputs ---------------------------------------------------------------------------------------------

#: Sampling fields with values vLLM 0.32 refuses (or, where marked in the docs, handles its own way).
BAD_PARAMS: dict[str, list[Any]] = {
    "temperature": [-1.0, float("nan"), "hot"],
    "top_p": [0.0, 1.5, -0.1],
    "top_k": [-5, 0.5],
    "min_p": [-0.1, 1.5],
    "max_tokens": [0, -3, 1.5],
    "min_tokens": [-1, 50],
    "logprobs": [-3, 21, 1000],
    "presence_penalty": [-2.5, 3.0],
    "frequency_penalty": [-2.5, 3.0],
    "repetition_penalty": [0.0, -1.0],
    "stop_token_ids": [[VOCAB_SIZE + 5], [-1], [VOCAB_SIZE]],
    "stop": [[""], 5],
    "n": [0, -1],
    "seed": ["x"],
    "bad_words": [["Paris"]],
    "detokenize": [False],  # together with stop strings below
    "unknown_field": [1],
}

BAD_PROMPTS: list[Any] = [
    "",
    [],
    {"prompt_token_ids": []},
    {"prompt_token_ids": [VOCAB_SIZE]},
    {"prompt_token_ids": [VOCAB_SIZE + 1000]},
    {"prompt_token_ids": [-1, 5]},
    {"prompt": 5},
    None,
    " ".join(["word"] * 600),  # past max_model_len (480)
    {"prompt_token_ids": [5] * 470},  # fits, but with max_tokens past max_model_len
]

BAD_CONVERSATIONS: list[Any] = [
    [],
    [{"role": "user"}],
    [{"content": "Hi"}],
    [{"role": "user", "content": 5}],
    [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
    [{"role": "user", "content": [{"type": "nonsense", "text": "x"}]}],
    [{"role": 7, "content": "Hi"}],
    "Hi",
]


def _bad_items() -> list[tuple[str, Any]]:
    """Every bad thing once: ``("params", (field, value))``, ``("prompt", prompt)``, ``("conversation", conv)``."""
    items: list[tuple[str, Any]] = [("params", (f, v)) for f, vs in BAD_PARAMS.items() for v in vs]
    return items + [("prompt", p) for p in BAD_PROMPTS] + [("conversation", c) for c in BAD_CONVERSATIONS]


BAD_ITEMS = _bad_items()


@st.composite
def bad_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Each of ``BAD_ITEMS`` in one call, the rest of the call valid (drawn); a sampling field's call either only
    builds the ``SamplingParams`` or passes them to ``generate`` / ``chat``. The label names what is wrong (what
    the documented differences are keyed by)."""
    out: list[dict[str, Any]] = []
    for what, item in BAD_ITEMS:
        params: dict[str, Any] = {"temperature": 0.0, "max_tokens": draw(st.integers(1, 3))}
        prompt: Any = draw(text_prompts)
        if what == "params":
            field, value = item
            params[field] = value
            if field == "detokenize":
                params["stop"] = ["x"]
            if field == "min_tokens" and value == 50:
                params["max_tokens"] = 3
            api = draw(st.sampled_from(["generate", "chat"]))
            if api == "chat":
                prompt = [{"role": "user", "content": prompt}]
            label = f"params {field}={value!r}"
            only = draw(st.booleans())
            call = {"label": label, "api": api, "prompts": [prompt], "params": [params], "only_params": only}
        elif what == "prompt":
            if isinstance(item, dict) and len(item.get("prompt_token_ids", [])) == 470:
                params["max_tokens"] = 20
            call = {"label": f"prompt {_short(item)}", "api": "generate", "prompts": [item], "params": [params]}
        else:
            call = {"label": f"chat {_short(item)}", "api": "chat", "prompts": [item], "params": [params]}
        out.append(call)
    return out


def _short(x: Any) -> str:
    s = repr(x)
    return s if len(s) < 60 else f"{s[:40]}...({len(s)} chars)"
