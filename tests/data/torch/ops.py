"""Operators and forms real attention code uses (issue 29 item 3), each in a module written
as their authors write them: F.normalize (cosine attention, Swin v2), any/all over a padding
mask, unbind along a middle axis, flip, argmax, topk and sort of the scores, a masked write
`s[..., mask] = v`, einops (lucidrains' form), F.pad up to a window, a size from data, a KV
cache kept in plain tensor attributes (Meta's Llama), and a helper function whose own line
is reported. Each correct module verifies clean and conforms to the spec `extract` writes."""
import math

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from einops.layers.torch import Rearrange
from torch import nn


def attend(q, k, v):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    return scores.softmax(dim=-1) @ v


class Heads(nn.Module):
    def __init__(self, dim, n_head):
        super().__init__()
        self.n_head, self.head_dim, self.dim = n_head, dim // n_head, dim
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def heads(self, x):
        B, T, C = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        return qkv.unbind(0)

    def merge(self, y):
        B, H, T, D = y.shape
        return self.proj(y.transpose(1, 2).reshape(B, T, H * D))


class Halves(Heads):
    """The sequence's two halves swapped before attending (chunk of a traced length: each
    part's start is the sum of the parts before it, a size torch keeps symbolic). At T = 1
    chunk gives one part and the unpacking fails: a true error."""

    def forward(self, x):
        first, second = x.chunk(2, dim=1)
        q, k, v = self.heads(torch.cat([second, first], dim=1))
        return self.merge(attend(q, k, v))


class Cosine(Heads):
    """Cosine attention (Swin v2): unit-length queries and keys."""

    def forward(self, x):
        q, k, v = self.heads(x)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        return self.merge(attend(q, k, v))


class MiddleUnbind(Heads):
    def forward(self, x):
        B, T, C = x.shape
        qkv = self.qkv(x).reshape(B, T, self.n_head, 3, C // self.n_head)
        q, k, v = qkv.unbind(-2)
        return self.merge(attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)))


class Reversed(Heads):
    """Attention over the sequence read backwards (flip), its result flipped back."""

    def forward(self, x):
        q, k, v = self.heads(x)
        return self.merge(attend(q.flip(-2), k.flip(-2), v.flip(-2)).flip(2))


class TopK(Heads):
    """Sparse attention: each query keeps its k best keys (topk's threshold), sorted scores
    and the best key's index read too."""

    def forward(self, x):
        q, k, v = self.heads(x)
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        vals, idx = s.topk(3, dim=-1)
        s = s.masked_fill(s < vals[..., -1:], float("-inf"))
        ranked, order = torch.sort(s, dim=-1, descending=True)
        best = s.argmax(dim=-1, keepdim=True)
        return self.merge(s.softmax(-1) @ v), ranked[..., :1] + best + order[..., :1]


class MaskedWrite(Heads):
    """`s[..., mask] = -inf` with a causal mask made in forward."""

    def forward(self, x):
        q, k, v = self.heads(x)
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        T = s.shape[-1]
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        s[..., future] = float("-inf")
        return self.merge(s.softmax(-1) @ v)


class Padded(Heads):
    """A padding mask: rows with no key left are zeroed (any)."""

    def forward(self, x, mask):
        q, k, v = self.heads(x)
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        keep = mask[:, None, None, :] > 0
        s = s.masked_fill(~keep, float("-inf"))
        empty = ~keep.any(dim=-1, keepdim=True)
        p = s.softmax(-1).masked_fill(empty, 0.0)
        return self.merge(p @ v)


def padded():
    module = Padded(35, 5)
    mask = torch.ones(2, 6)
    mask[1, 4:] = 0
    return module, {"x": torch.randn(2, 6, 35), "mask": mask}


class Einops(nn.Module):
    """lucidrains' Attention (vit-pytorch): einops rearrange, einsum, a Rearrange layer."""

    def __init__(self, dim, heads, dim_head):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Sequential(Rearrange("b h n d -> b n (h d)"), nn.Linear(inner_dim, dim))
        self.mem_k = nn.Parameter(torch.randn(heads, 2, dim_head))

    def forward(self, x):
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)
        mk = repeat(self.mem_k, "h n d -> b h n d", b=x.shape[0])
        k, v = torch.cat((mk, k), dim=-2), torch.cat((mk, v), dim=-2)
        dots = torch.einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        return self.to_out(torch.einsum("b h i j, b h j d -> b h i d", dots.softmax(-1), v))


class Windowed(nn.Module):
    """Local attention: the sequence padded up to a multiple of the window (F.pad)."""

    def __init__(self, dim, window=4):
        super().__init__()
        self.window = window
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, T, C = x.shape
        pad = (self.window - T % self.window) % self.window
        x = F.pad(x, (0, 0, 0, pad))
        n = x.shape[1] // self.window
        q, k, v = self.qkv(x).reshape(B, n, self.window, 3 * C).chunk(3, dim=-1)
        out = attend(q, k, v).reshape(B, n * self.window, C)
        return out[:, :T]


class FromData(nn.Module):
    """A size only the data decides (the positive rows): one SC602 for the read, no error."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        y = self.proj(x)
        kept = y[y.sum(-1) > 0]
        return y.softmax(-1), kept.mean(0)


class Cached(nn.Module):
    """Meta's Llama: the KV cache a plain tensor attribute, written in forward."""

    def __init__(self, dim, n_head, max_batch=4, max_len=16):
        super().__init__()
        self.n_head, self.head_dim = n_head, dim // n_head
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.cache_k = torch.zeros(max_batch, max_len, n_head, self.head_dim)
        self.cache_v = torch.zeros(max_batch, max_len, n_head, self.head_dim)

    def forward(self, x, start_pos: int = 0):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_head, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_head, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_head, self.head_dim)
        self.cache_k = self.cache_k.to(xq)
        self.cache_v = self.cache_v.to(xq)
        self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos:start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, :start_pos + seqlen].transpose(1, 2)
        values = self.cache_v[:bsz, :start_pos + seqlen].transpose(1, 2)
        out = attend(xq.transpose(1, 2), keys, values)
        return out.transpose(1, 2).reshape(bsz, seqlen, -1)


def cached():
    return Cached(35, 5), {"x": torch.randn(4, 16, 35), "start_pos": 0}


def attend_unscaled(q, k, v):
    scores = q @ k.transpose(-2, -1)  # BUG: no 1/sqrt(d)
    return scores.softmax(dim=-1) @ v


class HelperBug(Heads):
    """The bug is in a helper function: reported at the helper's line."""

    def forward(self, x):
        q, k, v = self.heads(x)
        return self.merge(attend_unscaled(q, k, v))


try:  # jaxtyping's annotations, checked against the traced shapes
    from jaxtyping import Float
    from torch import Tensor

    class Typed(Heads):
        def forward(self, x: Float[Tensor, "b t d"]) -> Float[Tensor, "b t d"]:
            q, k, v = self.heads(x)
            return self.merge(attend(q, k, v))

    class TypedWrongly(Heads):
        def forward(self, x: Float[Tensor, "b t d"]) -> Float[Tensor, "b d t"]:  # BUG: [b t d]
            q, k, v = self.heads(x)
            return self.merge(attend(q, k, v))
except ImportError:
    pass
