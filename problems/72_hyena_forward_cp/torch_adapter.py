"""Problem 72: calls PKB's reference/72_hyena_forward_cp.py solution() on pkb's inputs."""
UPSTREAM = "reference/72_hyena_forward_cp.py"


# PKB: solution(x1_seq, x2_seq, v_seq [1, C, Ls], h [num_groups, F], conv_bias [C], num_groups,
# group_dim, group None = WORLD, with_zigzag_splitting True), as its create_input_tensor passes them
# (num_groups = C / G, group_dim = G = 1). pkb draws h and conv_bias at random (PKB builds ramps).
def make_args(inputs, ctx):
    C, G = int(ctx.vars["C"]), int(ctx.vars["G"])
    return (inputs["x1_seq"], inputs["x2_seq"], inputs["v_seq"], inputs["h"], inputs["conv_bias"],
            C // G, G, None, True)


# PKB returns D [1, Ls, C] (z_seq.transpose(1, 2).contiguous()).
def to_outputs(result, inputs, ctx):
    return {"out": result}
