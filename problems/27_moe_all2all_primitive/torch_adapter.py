"""Problem 27: calls PKB's reference/27_moe_all2all_primitive.py solution() on pkb's inputs."""
UPSTREAM = "reference/27_moe_all2all_primitive.py"


def make_args(inputs, ctx):
    # PKB passes the split sizes as Python lists (and group None = WORLD).
    return (
        inputs["local_tensor"],
        inputs["input_splits"].tolist(),
        inputs["output_splits"].tolist(),
        None,
    )


def to_outputs(result, inputs, ctx):
    return {"out": result}
