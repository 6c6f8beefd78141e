"""Write a tiny Llama (and a matching draft, EAGLE head and Medusa heads) that vLLM's CPU build can
serve with `--load-format dummy`: no weights are downloaded or stored, only configs and a tokenizer.

    python -m cluster.vllm_cpu.tiny_model OUT_DIR

Needs the `tokenizers` library (vLLM brings it), so it runs in the vLLM environment
(`make vllm-cpu`), never in the project's default one. The byte-level BPE tokenizer is trained
here on the project's own prompt content (scenarios/content/), so every trace prompt tokenizes.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

# Shapes measured to start in ~20 s and ~2.3 GB per replica on this project's 2-core machines.
HIDDEN = 256
LAYERS = 2
HEADS = 4
VOCAB = 2048
MAX_POSITIONS = 32768  # long enough for every built-in scenario's prompts
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def llama_config(layers: int = LAYERS) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN, "num_hidden_layers": layers, "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS, "vocab_size": VOCAB, "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "torch_dtype": "bfloat16",
        "bos_token_id": 0, "eos_token_id": 1, "tie_word_embeddings": False,
    }


def eagle_config() -> dict:
    """An EAGLE-1 head for the target: one Llama decoder layer at the target's width and vocab.
    vLLM renames the architecture to EagleLlamaForCausalLM itself and uses the target's tokenizer."""
    return llama_config(layers=1)


def medusa_config(heads: int = 5) -> dict:
    return {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": HIDDEN,
            "vocab_size": VOCAB, "num_heads": heads, "num_hidden_layers": 1, "torch_dtype": "bfloat16"}


def train_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    content = resources.files("scenarios") / "content"
    texts = [p.read_text() for p in content.iterdir() if p.is_file()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts * 4, trainer)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": SPECIAL[0], "eos_token": SPECIAL[1],
        "model_max_length": MAX_POSITIONS, "chat_template": CHAT_TEMPLATE}, indent=2))


def write(out_dir: Path) -> dict[str, Path]:
    """Create target/, draft/ (same shapes: its dummy weights match, so drafts are accepted),
    eagle/ and medusa/ under out_dir; return their paths. Heads get a config only."""
    configs = {"target": llama_config, "draft": llama_config, "eagle": eagle_config, "medusa": medusa_config}
    paths = {name: out_dir / name for name in configs}
    for name, path in paths.items():
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps(configs[name](), indent=2))
        if name in ("target", "draft"):
            train_tokenizer(path)
            (path / "generation_config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 1}))
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m cluster.vllm_cpu.tiny_model OUT_DIR")
    for name, path in write(Path(sys.argv[1])).items():
        print(f"{name}: {path}")
