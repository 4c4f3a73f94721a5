"""Problem 39: calls PKB's reference/39_ulysses_attention_e2e.py solution() on pkb's inputs."""
UPSTREAM = "reference/39_ulysses_attention_e2e.py"


# PKB: solution(hidden_states, w_qkv, w_o, group None (WORLD), num_heads 8, causal False). pkb draws
# hidden_states and w_qkv on a grid instead of randn (see spec.toml); all three differ per rank, as
# PKB's per-rank seeds make them.
def make_args(inputs, ctx):
    return (inputs["hidden_states"], inputs["w_qkv"], inputs["w_o"], None, 8, False)


def to_outputs(result, inputs, ctx):
    return {"out": result}
