"""Problem 70: calls PKB's reference/70_torchrec_kjt_all2all.py solution() on pkb's inputs."""
UPSTREAM = "reference/70_torchrec_kjt_all2all.py"


def make_args(inputs, ctx):
    # PKB: solution(lengths, values, key_splits, batch_size, pg=None (WORLD)); key_splits[j] = 1 + j % 3.
    key_splits = [1 + j % 3 for j in range(ctx.world)]
    return (inputs["lengths"], inputs["values"], key_splits, int(ctx.vars["B"]), None)


def to_outputs(result, inputs, ctx):
    # PKB returns a dict; its 0-d stride becomes pkb's [1].
    return {
        "lengths": result["lengths"],
        "values": result["values"],
        "stride": result["stride"].reshape(1),
        "stride_per_rank": result["stride_per_rank"],
    }
