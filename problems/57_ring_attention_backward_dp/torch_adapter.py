"""Problem 57: calls PKB's reference/57_ring_attention_backward_dp.py solution() on pkb's inputs."""
UPSTREAM = "reference/57_ring_attention_backward_dp.py"


def _cp_dp_groups(ctx, dp_size):
    """PKB's _build_cp_dp_groups (Megatron order 'cp-dp'): DP groups are the ranks with the same CP
    position (strided), CP groups contiguous blocks of W / dp_size ranks; made in the same order on
    every rank. PKB's all-rank dp_cp group is not passed to solution() and is not made here."""
    cp_size = ctx.world // dp_size
    dp_group = ctx.new_groups([[c + g * cp_size for g in range(dp_size)] for c in range(cp_size)])
    cp_group = ctx.new_groups([list(range(g * cp_size, (g + 1) * cp_size)) for g in range(dp_size)])
    return cp_group, dp_group


# PKB's create_input_tensor returns (dout, q, k, v, out, softmax_lse, softmax_scale None, causal False,
# cp_group, dp_group). pkb draws out and softmax_lse (PKB derives them from the local q, k, v); the
# backward takes them as given tensors either way.
def make_args(inputs, ctx):
    cp_group, dp_group = _cp_dp_groups(ctx, ctx.vars["DP"])
    return (inputs["dout"], inputs["q"], inputs["k"], inputs["v"], inputs["out"], inputs["softmax_lse"], None, False,
            cp_group, dp_group)


def to_outputs(result, inputs, ctx):
    dq, dk, dv = result
    return {"dq": dq, "dk": dk, "dv": dv}
