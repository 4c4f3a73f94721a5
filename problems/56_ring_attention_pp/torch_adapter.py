"""Problem 56: calls PKB's reference/56_ring_attention_pp.py solution() on pkb's inputs."""
UPSTREAM = "reference/56_ring_attention_pp.py"


def _cp_pp_groups(ctx, pp_size):
    """PKB's _build_cp_pp_groups (Megatron order, TP = DP = 1): CP groups are contiguous blocks of
    cp_size ranks (one stage), PP groups the ranks with the same CP position; same order on every rank."""
    cp_size = ctx.world // pp_size
    cp_group = ctx.new_groups([list(range(p * cp_size, (p + 1) * cp_size)) for p in range(pp_size)])
    pp_group = ctx.new_groups([[c + p * cp_size for p in range(pp_size)] for c in range(cp_size)])
    return cp_group, pp_group


# PKB's create_input_tensor returns (hidden_states, w_qkv, w_o, num_heads 8, softmax_scale None,
# causal True, cp_group, pp_group); pkb's inputs follow its sharing (hidden_states per CP index,
# weights per stage). Stage 1 ignores its hidden_states, as in PKB.
def make_args(inputs, ctx):
    cp_group, pp_group = _cp_pp_groups(ctx, ctx.vars["PP"])
    return (inputs["hidden_states"], inputs["w_qkv"], inputs["w_o"], ctx.vars["H"], None, True, cp_group, pp_group)


def to_outputs(result, inputs, ctx):
    return {"out": result}
