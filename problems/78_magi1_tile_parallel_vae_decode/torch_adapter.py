"""Problem 78: calls PKB's reference/78_magi1_tile_parallel_vae_decode.py solution() on pkb's inputs."""
UPSTREAM = "reference/78_magi1_tile_parallel_vae_decode.py"


# PKB's create_input_tensor returns (z, tile_latent_min_length 3, _height 32, _width 32, spatial
# overlap 0.25, temporal overlap 0.0, spatial_upsample 8, temporal_upsample 4, sr_ratio 1,
# first_frame_as_image False, group None); pkb's size classes set the tile and up-sampling sizes
# (PKB's values at the default size) and keep the overlaps.
def make_args(inputs, ctx):
    v = ctx.vars
    return (inputs["z"], v["LT"], v["LH"], v["LW"], 0.25, 0.0, v["US"], v["UT"], 1, False, None)


def to_outputs(result, inputs, ctx):
    return {"video": result}
