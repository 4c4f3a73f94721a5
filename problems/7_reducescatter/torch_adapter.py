"""Problem 7: calls PKB's reference/7_reducescatter.py solution() on pkb's inputs."""
UPSTREAM = "reference/7_reducescatter.py"


def make_args(inputs, ctx):
    return (inputs["tensor"],)


def to_outputs(result, inputs, ctx):
    return {"out": result}
