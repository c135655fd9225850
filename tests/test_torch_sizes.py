"""How a factory's fixed sizes are named (shapecheck/pytorch/front/sizes.py, pure Python):
a head width where the sizes name heads and a width but no head width, and a literal
multiple of a width before a square."""
from __future__ import annotations

from shapecheck.pytorch.front import sizes as sizing


def test_a_width_and_heads_without_a_head_width_get_one() -> None:
    dims = sizing.from_given({"dim": 48, "num_heads": 4})
    assert dims.atomic == {"head_dim": 12, "num_heads": 4}
    assert dims.derived["dim_"] == (1, ("head_dim", "num_heads"))
    assert dims.fixed  # read off the numbers: traced apart, or declared at their sizes
    assert dims.inferred == {"head_dim"}  # an input axis of 12 is not the head width
    assert dims.size(12) == "head_dim"
    assert dims.size(48) == "dim_"
    assert dims.size(144) == "3 * dim_"  # the qkv projection, not head_dim * head_dim


def test_a_named_head_width_is_kept() -> None:
    dims = sizing.from_given({"n_embd": 64, "n_head": 4, "head_size": 16})
    assert "head_dim" not in dims.atomic and dims.atomic["head_size"] == 16


def test_a_feed_forward_width_is_not_the_model_width() -> None:
    # a wrapper's parts: `Attention(dim, num_heads)` beside `FeedForward(dim, hidden_dim)`
    dims = sizing.from_given({"hidden_dim": 256, "dim": 64, "num_heads": 4})
    assert dims.atomic.get("head_dim") == 16


def test_two_model_widths_that_differ_give_no_head_width() -> None:
    assert "head_dim" not in sizing.from_given({"dim": 64, "embed_dim": 48, "num_heads": 4}).atomic


def test_a_width_the_heads_do_not_divide_gets_no_head_width() -> None:
    assert "head_dim" not in sizing.from_given({"dim": 50, "num_heads": 4}).atomic


def test_a_square_is_the_last_reading() -> None:
    dims = sizing.Dims(atomic={"head_dim": 12, "num_heads": 4})
    assert dims.size(144) == "3 * head_dim * num_heads"
    # with no other reading, the square is written
    assert sizing.Dims(atomic={"head_dim": 12, "num_heads": 5}).size(144) == "head_dim * head_dim"
