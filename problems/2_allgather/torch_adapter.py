"""Problem 2: calls PKB's reference/2_allgather.py solution() on pkb's inputs."""
UPSTREAM = "reference/2_allgather.py"


def make_args(inputs, ctx):
    return (inputs["tensor"],)


def to_outputs(result, inputs, ctx):
    return {"out": result}
