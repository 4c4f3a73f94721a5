"""Problem 66: calls PKB's reference/66_gnn_feature_exchange_all2all_backward.py solution() on pkb's inputs."""
UPSTREAM = "reference/66_gnn_feature_exchange_all2all_backward.py"


def make_args(inputs, ctx):
    # PKB: solution(grad_output, seed_inverse_ids, seed_size, counts_sent, counts_received,
    # group=None (WORLD)); seed_size is pkb's Ns and both count lists are [rows_per_peer] * W
    # (pkb's P), as PKB builds them.
    counts = [int(ctx.vars["P"])] * ctx.world
    return (inputs["grad_output"], inputs["seed_inverse_ids"], int(ctx.vars["Ns"]), list(counts), list(counts), None)


def to_outputs(result, inputs, ctx):
    # torch.sparse.mm of a sparse COO and a dense matrix returns a dense tensor.
    return {"grad_features": result}
