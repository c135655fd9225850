"""A corpus of attention modules written as people write them: correct ones, and ones with
the bugs that ship (each bug's line is marked `# BUG`). Every class takes its dims."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class _Projections(nn.Module):

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.wq = nn.Linear(d_model, d_model)
        self.wk = nn.Linear(d_model, d_model)
        self.wv = nn.Linear(d_model, d_model)
        self.wo = nn.Linear(d_model, d_model)

    def heads(self, x, proj):
        b, t, _ = x.shape
        return proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)

    def merge(self, y):
        b, h, t, d = y.shape
        return self.wo(y.transpose(1, 2).reshape(b, t, h * d))


class Plain(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = scores.softmax(dim=-1)
        return self.merge(weights @ v)


class Einsum(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = torch.einsum("bhid,bhjd->bhij", q, k) * self.head_dim ** -0.5
        weights = torch.softmax(scores, dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", weights, v)
        return self.merge(out)


class CausalTril(_Projections):
    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
        return self.merge(F.softmax(scores, dim=-1) @ v)


class Sdpa(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        return self.merge(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class KeyPadding(_Projections):
    def forward(self, x, keep):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))
        return self.merge(scores.softmax(dim=-1) @ v)


def key_padding():
    module = KeyPadding(35, 5)
    return module, {"x": torch.randn(3, 11, 35), "keep": torch.ones(3, 11, dtype=torch.bool)}


class SoftmaxOverQueries(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = scores.softmax(dim=-2)  # BUG
        return self.merge(weights @ v)


class ScaleByModelWidth(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])  # BUG
        return self.merge(scores.softmax(dim=-1) @ v)


class SplitScale(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        width = x.shape[-1]
        q = q * width ** -0.25  # BUG
        k = k * width ** -0.25
        return self.merge((q @ k.transpose(-2, -1)).softmax(dim=-1) @ v)


class MaskTransposed(_Projections):
    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))  # BUG
        return self.merge(F.softmax(scores, dim=-1) @ v)


class MaskInverted(_Projections):
    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        scores = scores.masked_fill(mask, float("-inf"))  # BUG
        return self.merge(F.softmax(scores, dim=-1) @ v)


class MaskAfterSoftmax(_Projections):
    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        weights = weights.masked_fill(~mask, 0.0)  # BUG
        return self.merge(weights @ v)


class WeightsTransposed(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        return self.merge(weights.transpose(-2, -1) @ v)  # BUG


class MergeWithoutTranspose(_Projections):
    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        y = (weights @ v).reshape(b, t, c)  # BUG
        return self.wo(y)


class GroupedQuery(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.wq = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        group = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        y = (weights @ v).transpose(1, 2).reshape(b, t, -1)
        return self.wo(y)


class ForgottenRepeatKv(GroupedQuery):
    def forward(self, x):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)  # BUG
        y = (weights @ v).transpose(1, 2).reshape(b, t, -1)
        return self.wo(y)


class _Annotation:
    """What jaxtyping's `Float[Tensor, "batch seq d_model"]` carries: its `dim_str`."""

    def __init__(self, dims):
        self.dim_str = dims


class Annotated(_Projections):
    def forward(self, x: _Annotation("batch seq d_model")):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        return self.merge(scores.softmax(dim=-1) @ v)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)

class PaddingOnQueries(_Projections):
    def forward(self, x, keep):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~keep[:, None, :, None], float("-inf"))  # BUG
        return self.merge(scores.softmax(dim=-1) @ v)

def padding_on_queries():
    return PaddingOnQueries(35, 5), {"x": torch.randn(3, 11, 35), "keep": torch.ones(3, 11, dtype=torch.bool)}

class RotaryOnV(_Projections):
    def forward(self, x, cos, sin):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        v = v * cos + rotate_half(v) * sin  # BUG
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        return self.merge(scores.softmax(dim=-1) @ v)

def rotary_on_v():
    t = torch.arange(11.0)[:, None] * torch.ones(7)[None]
    ang = torch.cat([t, t], -1)
    return RotaryOnV(70, 5), {"x": torch.randn(3, 11, 70), "cos": ang.cos(), "sin": ang.sin()}



def apply_rotary(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class RotaryQueryOnly(_Projections):
    def forward(self, x, cos, sin):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        q, _ = apply_rotary(q, k, cos, sin)  # BUG
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        return self.merge(scores.softmax(dim=-1) @ v)


class RotaryBoth(_Projections):
    def forward(self, x, cos, sin):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        q, k = apply_rotary(q, k, cos, sin)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        return self.merge(scores.softmax(dim=-1) @ v)


def _rotary_inputs():
    t = torch.arange(11.0)[:, None] * torch.ones(7)[None]
    ang = torch.cat([t, t], -1)
    return {"x": torch.randn(3, 11, 70), "cos": ang.cos(), "sin": ang.sin()}


def rotary_query_only():
    return RotaryQueryOnly(70, 5), _rotary_inputs()


def rotary_both():
    return RotaryBoth(70, 5), _rotary_inputs()


class SplitWithoutTranspose(_Projections):
    def forward(self, x):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).reshape(b, t * self.n_heads, -1)
        q = q.reshape(b, self.n_heads, t, self.head_dim)  # BUG
        k, v = self.heads(x, self.wk), self.heads(x, self.wv)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        return self.merge(weights @ v)


class SplitRegrouped(_Projections):
    def forward(self, x):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_dim).reshape(b, t * self.n_heads, -1)
        q = q.reshape(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = self.heads(x, self.wk), self.heads(x, self.wv)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        return self.merge(weights @ v)


class CachedValuesReversed(_Projections):
    def forward(self, x, k_cache, v_cache):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        k = torch.cat([k_cache, k], dim=2)
        v = torch.cat([v, v_cache], dim=2)  # BUG
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        return self.merge(scores.softmax(dim=-1) @ v)


class CachedValues(_Projections):
    def forward(self, x, k_cache, v_cache):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        k = torch.cat([k_cache, k], dim=2)
        v = torch.cat([v_cache, v], dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        return self.merge(scores.softmax(dim=-1) @ v)


def _cache_inputs():
    return {"x": torch.randn(3, 11, 35), "k_cache": torch.randn(3, 5, 4, 7),
            "v_cache": torch.randn(3, 5, 4, 7)}


def cached_values_reversed():
    return CachedValuesReversed(35, 5), _cache_inputs()


def cached_values():
    return CachedValues(35, 5), _cache_inputs()

class Norms(nn.Module):
    """Pre-norm attention block pieces: nn.LayerNorm, a hand-written RMS norm, a manual
    layer norm with `var`, GELU (tanh) and SiLU."""

    def __init__(self, d_model):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.scale = nn.Parameter(torch.ones(d_model))
        self.up = nn.Linear(d_model, 4 * d_model)

    def forward(self, x):
        h = self.norm(x)
        rms = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.scale
        mu = rms.mean(-1, keepdim=True)
        manual = (rms - mu) / torch.sqrt(rms.var(-1, keepdim=True, unbiased=False) + 1e-5)
        return F.gelu(self.up(manual), approximate="tanh") + F.silu(self.up(manual))


def square_heads():
    """Sizes the user gave where heads and head width coincide (8 and 8)."""
    module = Plain(64, 8)
    return module, {"x": torch.randn(2, 5, 64)}


def square_heads_copied():
    """The same, copied (never constructed: it cannot be built again at sizes apart)."""
    import copy

    return copy.deepcopy(Plain(64, 8)), {"x": torch.randn(2, 5, 64)}


def _softmax(x, dim):
    # fairseq's and ESM's `utils_softmax`: the axis is the caller's argument
    return F.softmax(x, dim=dim)


class SoftmaxHelperOverQueries(_Projections):
    def forward(self, x):
        q, k, v = self.heads(x, self.wq), self.heads(x, self.wk), self.heads(x, self.wv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = _softmax(scores, dim=-2)  # BUG
        return self.merge(weights @ v)


def softmax_helper_over_queries():
    return SoftmaxHelperOverQueries(35, 5), {"x": torch.randn(3, 11, 35)}
