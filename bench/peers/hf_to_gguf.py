"""Converts a Llama-family model in Hugging Face layout, and PEFT LoRA adapters of it, to GGUF for llama.cpp.

    python3 hf_to_gguf.py MODEL_DIR OUT_DIR [ADAPTER_DIR ...]

writes OUT_DIR/model.gguf (matrices f16, norms and biases f32) and OUT_DIR/<adapter folder name>.gguf (f32).
llama.cpp's own convert_hf_to_gguf.py needs torch and transformers; this needs only numpy and gguf-py (put it on
PYTHONPATH), because it reads the one kind of folder populora writes: config.json, model.safetensors, and PEFT's
adapter_config.json with adapter_model.safetensors. Tensor names come from gguf-py's own HF-to-GGUF name map.
"""

import json
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("hf_to_gguf.py: numpy is missing (Debian: apt-get install -y python3-numpy)")
from safetensors_file import read_safetensors as read_file

try:
    import gguf
except ImportError as error:
    sys.exit(f"hf_to_gguf.py: cannot import gguf-py ({error}); put llama.cpp's gguf-py folder on PYTHONPATH"
             " (Debian: gguf-py also needs python3-yaml)")

# llama.cpp runs Mistral as "llama"; Qwen2 differs only by its q/k/v biases and its rotary layout.
ARCHITECTURES = {"llama": gguf.MODEL_ARCH.LLAMA, "mistral": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2}


def read_safetensors(path):
    return read_file(path, "hf_to_gguf.py")


def gpt2_byte_symbol(byte):
    """GPT-2's printable stand-in for a byte: itself when printable, else 256 + its rank among the others."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return chr(byte) if byte in printable else chr(256 + sum(1 for b in range(byte) if b not in printable))


def rotary_to_interleaved(w, n_head):
    """HF Llama rotates the two halves of each head (rotate_half); llama.cpp's "llama" rope rotates adjacent pairs.
    Reordering the rows of q/k (and of their biases and LoRA B) makes the two agree, as convert_hf_to_gguf.py does."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class Model:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = json.load(f)
        model_type = self.config["model_type"]
        if model_type not in ARCHITECTURES:
            sys.exit(f"hf_to_gguf.py: model_type {model_type!r} is not one of {', '.join(ARCHITECTURES)}")
        if self.config.get("rope_scaling"):
            sys.exit("hf_to_gguf.py: rope_scaling is not converted (the bench models have none)")
        self.arch = ARCHITECTURES[model_type]
        self.n_layers = self.config["num_hidden_layers"]
        self.n_head = self.config["num_attention_heads"]
        self.n_head_kv = self.config.get("num_key_value_heads") or self.n_head
        self.head_dim = self.config.get("head_dim") or self.config["hidden_size"] // self.n_head
        self.names = gguf.get_tensor_name_map(self.arch, self.n_layers)

    def gguf_name(self, hf_name):
        name = self.names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            sys.exit(f"hf_to_gguf.py: no GGUF name for tensor {hf_name!r}")
        return name

    def to_llama_cpp_rows(self, hf_name, w):
        """Row order llama.cpp expects for this tensor (only q/k of the "llama" architecture change)."""
        if self.arch != gguf.MODEL_ARCH.LLAMA:
            return w
        if ".q_proj." in hf_name:
            return rotary_to_interleaved(w, self.n_head)
        if ".k_proj." in hf_name:
            return rotary_to_interleaved(w, self.n_head_kv)
        return w

    def new_writer(self, path):
        return gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[self.arch])

    def write_hyperparameters(self, w):
        c = self.config
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        w.add_context_length(c["max_position_embeddings"])
        w.add_embedding_length(c["hidden_size"])
        w.add_block_count(self.n_layers)
        w.add_feed_forward_length(c["intermediate_size"])
        w.add_head_count(self.n_head)
        w.add_head_count_kv(self.n_head_kv)
        w.add_key_length(self.head_dim)
        w.add_value_length(self.head_dim)
        w.add_rope_dimension_count(self.head_dim)
        w.add_rope_freq_base(c.get("rope_theta", 10000.0))
        w.add_layer_norm_rms_eps(c.get("rms_norm_eps", 1e-6))

    def write_vocabulary(self, w):
        """llama.cpp refuses a model without a vocabulary, but the bench feeds token ids, so any vocabulary of the
        right size will do: GPT-2's 256 byte symbols first (so any text still tokenizes), then placeholders."""
        c = self.config
        tokens = [gpt2_byte_symbol(i) if i < 256 else f"<|t{i}|>" for i in range(c["vocab_size"])]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
        # llama.cpp requires the merges and gguf-py drops an empty list: one merge of two multi-character pieces,
        # which never applies (with no other merge, every symbol stays a single character).
        w.add_token_merges(["<| |>"])
        eos = c.get("eos_token_id")
        eos = eos[0] if isinstance(eos, list) else eos
        if c.get("bos_token_id") is not None:
            w.add_bos_token_id(c["bos_token_id"])
        if eos is not None:
            w.add_eos_token_id(eos)
        w.add_add_bos_token(False)

    def convert(self, model_dir, out_path):
        weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        w = self.new_writer(out_path)
        self.write_hyperparameters(w)
        self.write_vocabulary(w)
        for hf_name, array in weights.items():
            array = self.to_llama_cpp_rows(hf_name, array.astype(np.float32))
            # ggml keeps 1-D tensors (norms, biases) in f32; the matrices are what f16 storage is about.
            w.add_tensor(self.gguf_name(hf_name), array.astype(np.float16) if array.ndim == 2 else array)
        write(w)

    def convert_adapter(self, adapter_dir, out_path):
        with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
            peft = json.load(f)
        rank = peft["r"]
        # llama.cpp scales by alpha / rank; rsLoRA's alpha / sqrt(rank) is the same with alpha * sqrt(rank).
        alpha = peft["lora_alpha"] * (rank ** 0.5 if peft.get("use_rslora") else 1.0)
        w = self.new_writer(out_path)
        w.add_type(gguf.GGUFType.ADAPTER)
        w.add_string(gguf.Keys.Adapter.TYPE, "lora")
        w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
        for peft_name, array in read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors")).items():
            # base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight -> model.layers.N.self_attn.q_proj.weight
            factor = "a" if ".lora_A." in peft_name else "b"
            hf_name = peft_name.removeprefix("base_model.model.").replace(f".lora_{factor.upper()}", "")
            array = array.astype(np.float32)
            if factor == "b":  # B's rows are the projection's output rows, reordered like the projection's
                array = self.to_llama_cpp_rows(hf_name, array)
            # Both shapes match PEFT's: A [rank, in] and B [out, rank] (ggml's ne reversed).
            w.add_tensor(f"{self.gguf_name(hf_name)}.lora_{factor}", array)
        write(w)


def write(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    model_dir, out_dir, adapter_dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out_dir, exist_ok=True)
    model = Model(model_dir)
    model.convert(model_dir, os.path.join(out_dir, "model.gguf"))
    for adapter_dir in adapter_dirs:
        model.convert_adapter(adapter_dir, os.path.join(out_dir, os.path.basename(os.path.normpath(adapter_dir)) + ".gguf"))


if __name__ == "__main__":
    main()
