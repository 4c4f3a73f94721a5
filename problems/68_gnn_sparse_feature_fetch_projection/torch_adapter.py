"""Problem 68: calls PKB's reference/68_gnn_sparse_feature_fetch_projection.py solution() on pkb's inputs."""
UPSTREAM = "reference/68_gnn_sparse_feature_fetch_projection.py"


# PKB: solution(local_embedding_shard [S, E], input_node_ids int64 [Q], proj_matrix [E, O],
# num_total_nodes, group None = WORLD). pkb's ids are uniform random (not PKB's closed form) and its
# default table is 8 M nodes (not 111 M): spec.toml says why.
def make_args(inputs, ctx):
    return (inputs["local_embedding_shard"], inputs["input_node_ids"], inputs["proj_matrix"],
            int(ctx.vars["num_total_nodes"]), None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
