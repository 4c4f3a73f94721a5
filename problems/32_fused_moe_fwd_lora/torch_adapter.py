"""Problem 32: calls PKB's reference/32_fused_moe_fwd_lora.py solution() on pkb's inputs."""
import torch

UPSTREAM = "reference/32_fused_moe_fwd_lora.py"


def _linear(weight, bias):
    """An nn.Linear holding pkb's weight [out, in] and bias [out], as PKB's _linear builds one."""
    out_features, in_features = weight.shape
    layer = torch.nn.Linear(in_features, out_features).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    return layer


# PKB: (hidden_states, gate_weight, gate_bias, gate_proj, up_proj, down_proj, lora_gate_A,
# lora_gate_B, lora_up_A, lora_up_B, lora_down_A, lora_down_B, num_experts 8, top_k 2,
# group None = WORLD).
def make_args(inputs, ctx):
    return (inputs["hidden_states"], inputs["gate_weight"], inputs["gate_bias"],
            _linear(inputs["gate_proj_weight"], inputs["gate_proj_bias"]),
            _linear(inputs["up_proj_weight"], inputs["up_proj_bias"]),
            _linear(inputs["down_proj_weight"], inputs["down_proj_bias"]),
            inputs["lora_gate_A"], inputs["lora_gate_B"], inputs["lora_up_A"], inputs["lora_up_B"],
            inputs["lora_down_A"], inputs["lora_down_B"],
            int(ctx.vars.get("E", 8)), int(ctx.vars.get("TOPK", 2)), None)


def to_outputs(result, inputs, ctx):
    return {"out": result.detach()}
