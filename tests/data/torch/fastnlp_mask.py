"""fastNLP's MultiHeadAttention (issue 254 in spirit): the key-padding mask is applied to
the attention weights after the softmax, so each row no longer sums to 1."""
import torch
from torch import nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):

    def __init__(self, d_model, n_head, key_size):
        super().__init__()
        self.n_head = n_head
        self.key_size = key_size
        self.q_proj = nn.Linear(d_model, n_head * key_size)
        self.k_proj = nn.Linear(d_model, n_head * key_size)
        self.v_proj = nn.Linear(d_model, n_head * key_size)
        self.out = nn.Linear(n_head * key_size, d_model)
        self.scaling = key_size ** -0.5

    def forward(self, query, mask):
        batch, length, _ = query.size()
        q = self.q_proj(query).view(batch, length, self.n_head, self.key_size).transpose(1, 2)
        k = self.k_proj(query).view(batch, length, self.n_head, self.key_size).transpose(1, 2)
        v = self.v_proj(query).view(batch, length, self.n_head, self.key_size).transpose(1, 2)
        attn = torch.matmul(q, k.transpose(-1, -2)) * self.scaling
        attn = F.softmax(attn, dim=-1)
        attn = attn.masked_fill(mask[:, None, None, :].eq(0), 0)
        output = torch.matmul(attn, v)
        output = output.transpose(1, 2).contiguous().view(batch, length, -1)
        return self.out(output)


def make():
    module = MultiHeadAttention(35, 5, 7)
    query = torch.randn(3, 11, 35)
    mask = torch.ones(3, 11, dtype=torch.bool)
    return module, {"query": query, "mask": mask}
