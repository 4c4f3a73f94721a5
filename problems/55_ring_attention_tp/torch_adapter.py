"""Problem 55: calls PKB's reference/55_ring_attention_tp.py solution() on pkb's inputs."""
UPSTREAM = "reference/55_ring_attention_tp.py"


def _tp_cp_groups(ctx, tp_size):
    """PKB's _build_tp_cp_groups (Megatron order 'tp-cp'): TP groups are contiguous blocks of tp_size
    ranks, CP groups the ranks with the same TP position; made in the same order on every rank."""
    cp_size = ctx.world // tp_size
    tp_group = ctx.new_groups([list(range(c * tp_size, (c + 1) * tp_size)) for c in range(cp_size)])
    cp_group = ctx.new_groups([[t + c * tp_size for c in range(cp_size)] for t in range(tp_size)])
    return tp_group, cp_group


# PKB's create_input_tensor returns (hidden_states, w_qkv, w_o, num_heads 8, softmax_scale None,
# causal True, tp_group, cp_group); pkb's inputs follow its sharing (hidden_states per CP index,
# weights per TP index).
def make_args(inputs, ctx):
    tp_group, cp_group = _tp_cp_groups(ctx, ctx.vars["TP"])
    return (inputs["hidden_states"], inputs["w_qkv"], inputs["w_o"], ctx.vars["H"], None, True, tp_group, cp_group)


def to_outputs(result, inputs, ctx):
    return {"out": result}
