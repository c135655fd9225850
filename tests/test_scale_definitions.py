"""Where a number a traced statement reads was set (shapecheck/pytorch/front/definitions.py):
torch.export inlines `self.scale`, and SC404's note names the line that set it."""
from __future__ import annotations

from shapecheck.pytorch.front.definitions import root_definitions

MODULE = '''\
import math


class Attention:
    def __init__(self, dim, heads, dim_head):
        self.heads = heads
        self.scale = dim ** -0.5
        self.width = dim_head * heads

    def forward(self, q, k):
        dots = q @ k.transpose(-1, -2) * self.scale
        return dots * self.width

    def manual(self, q, k, n_state):
        scale = (n_state // self.heads) ** -0.25
        scale = scale * 1.0
        qk = (q * scale) @ (k * scale).transpose(-1, -2)
        other = q / math.sqrt(k.size(-1))
        return qk, other
'''


def test_an_attribute_set_in_init_is_named_where_it_is_set() -> None:
    assert root_definitions(MODULE, 11) == [7]  # `self.scale = dim ** -0.5`


def test_a_local_root_is_its_last_assignment_as_a_root_before_the_statement() -> None:
    assert root_definitions(MODULE, 17) == [15]


def test_a_number_that_is_no_root_and_a_root_written_in_place_name_nothing() -> None:
    assert root_definitions(MODULE, 12) == []  # `self.width` is a product
    assert root_definitions(MODULE, 18) == []  # math.sqrt on the statement's own line


def test_a_file_that_does_not_parse_names_nothing() -> None:
    assert root_definitions("def f(:\n", 1) == []
