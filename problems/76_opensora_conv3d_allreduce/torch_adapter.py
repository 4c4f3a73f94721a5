"""Problem 76: calls PKB's reference/76_opensora_conv3d_allreduce.py solution() on pkb's inputs."""
UPSTREAM = "reference/76_opensora_conv3d_allreduce.py"


def make_args(inputs, ctx):
    """PKB's argument order: input [1, C/W, T, Y, X], weight [C, C/W, 3, 3, 3], bias [C] (PKB's linspace
    is pkb's shared bias draw), stride 1, padding 0, dilation 1, groups 1, group None (WORLD)."""
    return (inputs["input"], inputs["weight"], inputs["bias"], 1, 0, 1, 1, None)


def to_outputs(result, inputs, ctx):
    return {"out": result}
