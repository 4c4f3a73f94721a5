"""Problem 1: calls PKB's reference/1_allreduce.py solution() on pkb's inputs."""
UPSTREAM = "reference/1_allreduce.py"


def make_args(inputs, ctx):
    return (inputs["tensor"],)


def to_outputs(result, inputs, ctx):
    return {"out": result}
