"""A LoRA training step in PyTorch, the shape of populora's (bench/cpu-peers.ts times both): one frozen Llama-family
base model (Hugging Face folder) and N PEFT adapters on all seven projections, a batch of sequences each through its
own adapter, forward + backward + AdamW on the adapters' factors only.

    /usr/bin/python3 torch_lora_step.py MODEL_DIR ADAPTER_DIR [ADAPTER_DIR ...]

then one JSON request a line on stdin, one JSON reply a line on stdout:
    {"type": "check", "tokens": [...], "adapter": k}             -> {"logits": [...]}   (after the last token)
    {"type": "time", "threads": N, "batch": B, "seq": S, "repeats": R, "promptLength": P}
                                                                  -> {"stepMs": [...], "threads": N}
Needs Debian's PyTorch (apt-get install -y python3-torch: 1.13, CPU) and numpy; reads safetensors itself.

The step: the base forward is one matmul over every token; each sequence's LoRA delta is (x·Aᵀ)·Bᵀ·scale with its
adapter's factors, batched (torch.bmm over the sequences); causal attention with grouped kv heads; the loss is
populora's policy gradient with token reduction: −Σ advantage·log p(target) / completion tokens over the completion
(positions from promptLength on), plus an entropy bonus; gradients clipped per adapter to norm 1, then AdamW.
"""

import json
import math
import os
import sys
import time

try:
    import numpy as np
    import torch
except ImportError as error:
    sys.exit(f"torch_lora_step.py: {error} (Debian: apt-get install -y python3-torch python3-numpy; run it with /usr/bin/python3)")

from safetensors_file import read_safetensors as read_file  # noqa: E402 (beside this script)

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def read_safetensors(path):
    """name -> float32 tensor."""
    return {name: torch.from_numpy(array.astype(np.float32)) for name, array in read_file(path, "torch_lora_step.py").items()}


class Model:
    def __init__(self, model_dir, adapter_dirs):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        self.D, self.L, self.H = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
        self.Hkv = c.get("num_key_value_heads", self.H)
        self.hd = c.get("head_dim", self.D // self.H)
        self.eps, self.theta = c["rms_norm_eps"], c.get("rope_theta", 10000.0)
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.w = w
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head = w.get("lm_head.weight", self.embed)
        self.V = self.embed.shape[0]
        # Each module's factors for every adapter, stacked: A [adapters, r, in], B [adapters, out, r] (trained).
        self.adapters = len(adapter_dirs)
        self.A, self.B, scales = {}, {}, []
        factors = [read_safetensors(os.path.join(d, "adapter_model.safetensors")) for d in adapter_dirs]
        for d in adapter_dirs:
            with open(os.path.join(d, "adapter_config.json")) as f:
                a = json.load(f)
            scales.append(a["lora_alpha"] / a["r"])
        self.scale = torch.tensor(scales)
        for layer in range(self.L):
            for m in MODULES:
                part = "self_attn" if m in MODULES[:4] else "mlp"
                key = f"base_model.model.model.layers.{layer}.{part}.{m}"
                self.A[(layer, m)] = torch.nn.Parameter(torch.stack([f[f"{key}.lora_A.weight"] for f in factors]))
                self.B[(layer, m)] = torch.nn.Parameter(torch.stack([f[f"{key}.lora_B.weight"] for f in factors]))
        self.params = [p for key in self.A for p in (self.A[key], self.B[key])]

    def linear(self, x, layer, part, m, adapter):
        """x [batch, S, in] · Wᵀ + bias, plus each sequence's LoRA delta (adapter [batch]: its slot)."""
        prefix = f"model.layers.{layer}.{part}.{m}"
        y = x @ self.w[f"{prefix}.weight"].T
        if f"{prefix}.bias" in self.w:
            y = y + self.w[f"{prefix}.bias"]
        A, B = self.A[(layer, m)][adapter], self.B[(layer, m)][adapter]  # [batch, r, in], [batch, out, r]
        return y + torch.bmm(torch.bmm(x, A.transpose(1, 2)), B.transpose(1, 2)) * self.scale[adapter].view(-1, 1, 1)

    def norm(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    def rope(self, x, positions):
        """Hugging Face's rotary layout: the first and second halves of each head rotate together."""
        half = self.hd // 2
        inv = self.theta ** (-torch.arange(0, half, dtype=torch.float64) / half)
        angles = (positions.double()[:, None] * inv[None, :]).float()  # [S, half]
        cos, sin = angles.cos()[None, None], angles.sin()[None, None]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, tokens, adapter):
        """Logits [batch, S, V] of tokens [batch, S]."""
        batch, S = tokens.shape
        x = self.embed[tokens]
        positions = torch.arange(S)
        mask = torch.full((S, S), float("-inf")).triu(1)
        for layer in range(self.L):
            p = f"model.layers.{layer}"
            h = self.norm(x, self.w[f"{p}.input_layernorm.weight"])
            q = self.linear(h, layer, "self_attn", "q_proj", adapter).view(batch, S, self.H, self.hd).transpose(1, 2)
            k = self.linear(h, layer, "self_attn", "k_proj", adapter).view(batch, S, self.Hkv, self.hd).transpose(1, 2)
            v = self.linear(h, layer, "self_attn", "v_proj", adapter).view(batch, S, self.Hkv, self.hd).transpose(1, 2)
            q, k = self.rope(q, positions), self.rope(k, positions)
            k, v = k.repeat_interleave(self.H // self.Hkv, dim=1), v.repeat_interleave(self.H // self.Hkv, dim=1)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
            attention = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, S, self.H * self.hd)
            x = x + self.linear(attention, layer, "self_attn", "o_proj", adapter)
            h = self.norm(x, self.w[f"{p}.post_attention_layernorm.weight"])
            gate, up = self.linear(h, layer, "mlp", "gate_proj", adapter), self.linear(h, layer, "mlp", "up_proj", adapter)
            x = x + self.linear(torch.nn.functional.silu(gate) * up, layer, "mlp", "down_proj", adapter)
        return self.norm(x, self.w["model.norm.weight"]) @ self.lm_head.T


def training_step(model, optimizer, tokens, adapter, advantages, prompt_length, entropy_coef=0.001, max_grad_norm=1.0):
    logits = model.forward(tokens, adapter)[:, :-1]
    logp = logits.log_softmax(-1)
    target_logp = logp.gather(-1, tokens[:, 1:, None])[..., 0]
    entropy = -(logp.exp() * logp).sum(-1)
    completion = torch.zeros_like(target_logp)
    completion[:, prompt_length - 1:] = 1
    count = completion.sum()
    loss = (-(advantages[:, None] * target_logp) - entropy_coef * entropy).mul(completion).sum() / count
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    with torch.no_grad():  # each adapter's gradient clipped to norm max_grad_norm, as populora's AdamW does per slot
        squares = sum(p.grad.pow(2).flatten(1).sum(1) for p in model.params)
        factor = (max_grad_norm / (squares.sqrt() + 1e-6)).clamp(max=1)
        for p in model.params:
            p.grad.mul_(factor.view(-1, *[1] * (p.dim() - 1)))
    optimizer.step()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    torch.set_num_interop_threads(1)
    model = Model(sys.argv[1], sys.argv[2:])
    optimizer = torch.optim.AdamW(model.params, lr=1e-4, weight_decay=0.0)
    for line in sys.stdin:
        request = json.loads(line)
        if request["type"] == "check":
            with torch.no_grad():
                tokens = torch.tensor([request["tokens"]])
                logits = model.forward(tokens, torch.tensor([request["adapter"]]))
            reply = {"logits": logits[0, -1].tolist()}
        elif request["type"] == "time":
            torch.set_num_threads(request["threads"])
            batch, seq = request["batch"], request["seq"]
            tokens = torch.tensor([[(s * 131 + i * 17) % model.V for i in range(seq)] for s in range(batch)])
            adapter = torch.tensor([s % model.adapters for s in range(batch)])
            advantages = torch.tensor([1.0 if s % 2 else -1.0 for s in range(batch)])
            training_step(model, optimizer, tokens, adapter, advantages, request["promptLength"])  # warm-up
            times = []
            for _ in range(request["repeats"]):
                start = time.perf_counter()
                training_step(model, optimizer, tokens, adapter, advantages, request["promptLength"])
                times.append((time.perf_counter() - start) * 1000)
            reply = {"stepMs": times, "threads": torch.get_num_threads()}
        else:
            reply = {"error": f"unknown request {request['type']!r}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
