"""Problem 75: calls PKB's reference/75_fla_gated_deltanet_cp.py solution() on pkb's inputs."""
UPSTREAM = "reference/75_fla_gated_deltanet_cp.py"


# PKB's order: q, k, v, gate, beta, a_log, dt_bias (this rank's HL heads, bf16), group None (WORLD).
# pkb's a_log and dt_bias are random per rank (PKB: slices of linspace over all heads).
def make_args(inputs, ctx):
    return (inputs["q"], inputs["k"], inputs["v"], inputs["gate"], inputs["beta"], inputs["a_log"],
            inputs["dt_bias"], None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
