"""Problem 58: calls PKB's reference/58_openclip_contrastive_loss.py solution() on pkb's inputs."""
UPSTREAM = "reference/58_openclip_contrastive_loss.py"


# PKB: solution(image_features, text_features, logit_scale 10.0, logit_bias -10.0, group None). pkb's
# features are not row-normalized and its logit_bias is a random fp32 0-d input (see spec.toml): it is
# passed as the Python float it holds (make_args runs before timing, so the .item() is not timed).
def make_args(inputs, ctx):
    return (inputs["image_features"], inputs["text_features"], 10.0, float(inputs["logit_bias"].item()), None)


def to_outputs(result, inputs, ctx):
    return {"loss": result.reshape(())}
