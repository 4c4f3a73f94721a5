"""Problem 5: calls PKB's reference/5_scatter.py solution() on pkb's inputs."""
UPSTREAM = "reference/5_scatter.py"


# The root's input is W x M x N, the others' M x N (PKB gives them zeros; pkb random data, which
# NCCL overwrites with the root's chunk). src = pkb's root parameter, PKB's default 0.
def make_args(inputs, ctx):
    return (inputs["tensor"], ctx.vars.get("root", 0))


def to_outputs(result, inputs, ctx):
    return {"out": result}
