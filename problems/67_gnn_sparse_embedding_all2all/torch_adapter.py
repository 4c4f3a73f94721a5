"""Problem 67: calls PKB's reference/67_gnn_sparse_embedding_all2all.py solution() on pkb's inputs."""
UPSTREAM = "reference/67_gnn_sparse_embedding_all2all.py"


def make_args(inputs, ctx):
    # PKB: solution(idx, value, num_nodes, group=None (WORLD)).
    return (inputs["idx"], inputs["value"], int(ctx.vars["num_nodes"]), None)


def to_outputs(result, inputs, ctx):
    recv_idx, recv_value = result
    return {"recv_idx": recv_idx, "recv_value": recv_value}
