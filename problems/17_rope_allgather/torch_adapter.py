"""Problem 17: calls PKB's reference/17_rope_allgather.py solution() on pkb's inputs."""
UPSTREAM = "reference/17_rope_allgather.py"


# PKB: solution(q_local, k_local, cos_local, sin_local), all rank-specific randn.
def make_args(inputs, ctx):
    return (inputs["q_local"], inputs["k_local"], inputs["cos_local"], inputs["sin_local"])


def to_outputs(result, inputs, ctx):
    q_global, k_global = result
    return {"q_global": q_global, "k_global": k_global}
