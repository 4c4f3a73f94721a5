"""Problem 79: calls PKB's reference/79_dinov2_distributed_knn.py solution() on pkb's inputs."""
UPSTREAM = "reference/79_dinov2_distributed_knn.py"


# PKB: solution(test_features_rank [Q, F], train_features_rank_T [F, NT], train_labels_rank int64 [1, NT],
# max_k, group None = WORLD). pkb's features are ternary / 16 (not normalised randn) and its labels random
# (not (rank NT + c) mod 1000): spec.toml says why.
def make_args(inputs, ctx):
    return (inputs["test_features_rank"], inputs["train_features_rank_T"], inputs["train_labels_rank"],
            int(ctx.vars["K"]), None)


# Every rank is the owner of its own round and returns (topk_sims, topk_labels) for its queries.
def to_outputs(result, inputs, ctx):
    sims, labels = result
    return {"topk_sims": sims, "topk_labels": labels}
