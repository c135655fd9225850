"""Library implementing attention modules.

Authors
 * Ju-Chieh Chou 2020
 * Jianyuan Zhong 2020
 * Loren Lugosch 2020
 * Samuele Cornell 2020
 * Shucong Zhang 2024

"""
"""speechbrain/speechbrain (Apache-2.0, the repository's LICENSE; the file's header names its
authors), commit 01f3d851876f202fddbe2192c136abc517271213, `speechbrain/nnet/attention.py`
as written there: `RelPosEncXL` (the table built in `forward` under `torch.no_grad()`,
`pe_past[:, 0::2] = sinusoids` into an empty tensor, flipped and concatenated to `[1,
2*T-1, E]`), `RelPosMHAXL` (Transformer-XL attention: one packed projection when `query is
key`, `pos_bias_u` stored `[head_dim, heads]` and viewed `[1, 1, heads, head_dim]`, the
shift by `F.pad(x, (1, 0))`, the key padding mask and the mask re-applied after the
softmax), and `RoPEMHA` with its helpers (`PrecomputedRoPESinusoids`, `MemoiseAtLeastSize`,
`_rope_rotate`: the sines cached at the next power of two of the length, cut to it,
`torch.index_select` swapping each pair; `masks_union` for SDPA). Its imports of
`length_to_mask` and the logger are left out (neither is reached). The factories call them
as `speechbrain/lobes/models/transformer/Conformer.py`'s `ConformerEncoderLayer` does:
`self.mha_layer(x, x, x, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
pos_embs=pos_embs)`, the encoder's `pos_embs = self.positional_encoding(src)`."""

import math
from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class RelPosEncXL(nn.Module):
    """Relative positional encoding for the :class:`~RelPosMHAXL`.

    Arguments
    ---------
    emb_dim : int
        Size of the embedding, which controls the size of the last dimension
        of the positional embedding as well
    dtype : torch.dtype, optional
        If unspecified, defaults to `torch.float32`. Controls the data type of
        the output embedding (but does not affect the precision of the
        computations, which remain `torch.float32`).
    use_legacy_symmetric : bool, optional
        If True (the default), the embedding of a negative relative position
        is made equal to that of the matching positive one, which leaves the
        encoding unable to tell apart a key that is `d` steps ahead from one
        that is `d` steps behind. If False, the sine terms are negated for the
        negative positions, as in Transformer-XL.
        Every SpeechBrain checkpoint released so far was trained with True, so
        the default is kept for compatibility. See
        https://github.com/speechbrain/speechbrain/issues/3070
    """

    def __init__(
        self,
        emb_dim: int,
        dtype: torch.dtype = torch.float32,
        use_legacy_symmetric: bool = True,
    ):
        super().__init__()
        self.emb_dim = emb_dim

        inv_freq = torch.exp(
            torch.arange(0, self.emb_dim, 2, dtype=torch.float32)
            * -(math.log(10000.0) / self.emb_dim)
        )
        self.register_buffer("inv_freq", inv_freq)

        self.emb_dtype = dtype
        self.use_legacy_symmetric = use_legacy_symmetric

    @torch.no_grad()
    def make_pe(self, seq_len: int):
        """
        Builds the positional embedding tensor for a given sequence length.

        Arguments
        ---------
        seq_len : int
            The length of the sequence to create the position embedding for.

        Returns
        -------
        torch.Tensor
            Positional embedding tensor of shape `[1, 2*seq_len-1, embed_dim]`.
            Row `i` corresponds to the signed relative position
            `seq_len - 1 - i`, which is the order expected by
            :meth:`~RelPosMHAXL.rel_shift`.
        """

        emb_dtype = self.emb_dtype
        device = self.inv_freq.device

        with torch.no_grad():
            # perform initialization with the same type as `inv_freq`, to enable
            # migrating the embeddings to fp16 by calling
            # `posenc.to(torch.float16)`

            tot_pe = torch.empty(
                (2, seq_len, self.emb_dim),
                dtype=torch.float32,
                device=device,
            )
            pe_past = tot_pe[0]
            pe_future = tot_pe[1]
            positions = torch.arange(
                0,
                seq_len,
                dtype=torch.float32,
                device=device,
            ).unsqueeze(-1)

            sinusoids = torch.sin(positions * self.inv_freq)
            cosinusoids = torch.cos(positions * self.inv_freq)
            pe_past[:, 0::2] = sinusoids
            pe_past[:, 1::2] = cosinusoids
            # `cos` is even, so only the sine terms differ between the positive
            # and the negative relative positions.
            if self.use_legacy_symmetric:
                pe_future[:, 0::2] = sinusoids
            else:
                pe_future[:, 0::2] = -sinusoids
            pe_future[:, 1::2] = cosinusoids

            pe_past = torch.flip(pe_past, (0,)).unsqueeze(0)
            pe_future = pe_future[1:].unsqueeze(0)
            pe = torch.cat([pe_past, pe_future], dim=1)
            pe = pe.to(emb_dtype)  # convert to type of module

        return pe

    def forward(self, x: torch.Tensor):
        """
        Builds the positional embedding tensor. Similar to
        :meth:`~RelPosEncXL.make_pe` but uses the shape information from the
        provided tensor.

        Arguments
        ---------
        x : torch.Tensor
            input tensor with shape batch_size, seq_len, embed_dim

        Returns
        -------
        pos_emb : torch.Tensor
            Positional embedding tensor of shape `[1, 2*seq_len-1, embed_dim]`
        """

        return self.make_pe(seq_len=x.size(1))


class RelPosMHAXL(nn.Module):
    """This class implements the relative multihead implementation similar to that in Transformer XL
    https://arxiv.org/pdf/1901.02860.pdf

    Arguments
    ---------
    embed_dim : int
        Size of the encoder feature vectors from which keys and values are computed.
    num_heads: int
        Number of attention heads.
    dropout : float, optional
        Dropout rate.
    vbias: bool, optional
        Whether to use bias for computing value.
    vdim: int, optional
        Size for value. Default is embed_dim (Note each head is embed_dim // num_heads).
    mask_pos_future: bool, optional
        Whether to mask future positional encodings values.
        Must be true for causal applications e.g. decoder.
    """

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        vbias=False,
        vdim=None,
        mask_pos_future=False,
    ):
        super().__init__()
        self.embed_dim = embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.vdim == embed_dim
        self.mask_pos_future = mask_pos_future
        self.vbias = vbias

        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        self.vhead_dim = self.vdim // num_heads

        assert self.head_dim * num_heads == self.embed_dim, (
            "embed_dim must be divisible by num_heads"
        )
        assert self.vhead_dim * num_heads == self.vdim, (
            "vdim must be divisible by num_heads"
        )

        if self._qkv_same_embed_dim is False:
            self.qk_proj_weight = nn.Parameter(
                torch.empty(2 * embed_dim, embed_dim)
            )
            self.v_proj_weight = nn.Parameter(torch.empty(self.vdim, embed_dim))
        else:
            self.in_proj_weight = nn.Parameter(
                torch.empty(3 * embed_dim, embed_dim)
            )

        if vbias:
            self.value_bias_weight = nn.Parameter(torch.empty(self.vdim))
        else:
            self.vbias = None

        self.dropout_att = nn.Dropout(dropout)
        self.out_proj = nn.Linear(self.vdim, embed_dim)

        self.linear_pos = nn.Linear(embed_dim, embed_dim, bias=False)

        self.pos_bias_u = nn.Parameter(
            torch.empty(self.head_dim, self.num_heads)
        )
        self.pos_bias_v = nn.Parameter(
            torch.empty(self.head_dim, self.num_heads)
        )

        if next(self.parameters()).dtype == torch.float16:
            self.attn_fill_value = -65000
        else:
            self.attn_fill_value = -float("inf")

        self._reset_parameters()
        self.scale = 1 / math.sqrt(self.embed_dim)

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            torch.nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            torch.nn.init.xavier_uniform_(self.qk_proj_weight)
            torch.nn.init.xavier_uniform_(self.v_proj_weight)

        if self.vbias is not None:
            torch.nn.init.constant_(self.value_bias_weight, 0.0)

        # positional biases
        torch.nn.init.xavier_uniform_(self.pos_bias_u)
        torch.nn.init.xavier_uniform_(self.pos_bias_v)

    def rel_shift(self, x):
        """Relative shift implementation."""
        # batch, head, time1, 2*time1-1.

        b, h, qlen, pos_len = x.size()  # (b, h, t1, t2)
        # need to add a column of zeros on the left side of last dimension to perform the relative shifting
        x = torch.nn.functional.pad(x, pad=(1, 0))  # (b, h, t1, t2+1)
        x = x.view(b, h, -1, qlen)  # (b, h, t2+1, t1)
        # need to drop the first row
        x = x[:, :, 1:].view(b, h, qlen, pos_len)  # (b, h, t1, t2)

        # cspell:ignore tril
        if self.mask_pos_future:
            ones = torch.ones((x.size(2), x.size(3)), device=x.device)
            x = x * torch.tril(ones, x.size(3) - x.size(2))[None, None, :, :]

        return x[..., : pos_len // 2 + 1]

    def forward(
        self,
        query,
        key,
        value,
        pos_embs,
        key_padding_mask=None,
        attn_mask=None,
        return_attn_weights=True,
    ):
        """Compute attention.

        Arguments
        ---------
        query : torch.Tensor
            (B, L, E) where L is the target sequence length,
            B is the batch size, E is the embedding dimension.
        key : torch.Tensor
            (B, S, E) where S is the source sequence length,
            B is the batch size, E is the embedding dimension.
        value : torch.Tensor
            (B, S, E) where S is the source sequence length,
            B is the batch size, E is the embedding dimension.
        pos_embs : torch.Tensor
            bidirectional sinusoidal positional embedding tensor (1, 2*S-1, E) where S is the max length between source and target sequence lengths,
            and E is the embedding dimension.
        key_padding_mask : torch.Tensor
            (B, S) where B is the batch size, S is the source sequence
            length. If a ByteTensor is provided, the non-zero positions will
            be ignored while the position with the zero positions will be
            unchanged. If a BoolTensor is provided, the positions with the
            value of True will be ignored while the position with the value
            of False will be unchanged.
        attn_mask : torch.Tensor
            2D mask (L, S) where L is the target sequence length, S is
            the source sequence length.
            3D mask (N*num_heads, L, S) where N is the batch
            size, L is the target sequence length, S is the source sequence
            length. attn_mask ensure that position i is allowed to attend the
            unmasked positions. If a ByteTensor is provided, the non-zero
            positions are not allowed to attend while the zero positions will
            be unchanged. If a BoolTensor is provided, positions with True is
            not allowed to attend while False values will be unchanged. If a
            FloatTensor is provided, it will be added to the attention weight.
        return_attn_weights : bool
            Whether to additionally return the attention weights.

        Returns
        -------
        out : torch.Tensor
            (B, L, E) where L is the target sequence length, B is the
            batch size, E is the embedding dimension.
        attn_score : torch.Tensor
            (B, L, S) where B is the batch size, L is the target
            sequence length, S is the source sequence length.
        """

        # query, key and value are of shape batch, time, embed_dim
        bsz = query.shape[0]
        klen = key.shape[1]
        qlen = query.shape[1]

        if self._qkv_same_embed_dim:
            # self-attention
            if (query is key or torch.equal(query, key)) and (
                key is value or torch.equal(key, value)
            ):
                query, key, value = (
                    nn.functional.linear(query, self.in_proj_weight)
                    .view(bsz, -1, self.num_heads, self.head_dim * 3)
                    .chunk(3, dim=-1)
                )
            else:
                qweight, kweight, vweight = self.in_proj_weight.chunk(3, dim=0)
                query = nn.functional.linear(query, qweight).view(
                    bsz, -1, self.num_heads, self.head_dim
                )
                key = nn.functional.linear(key, kweight).view(
                    bsz, -1, self.num_heads, self.head_dim
                )
                value = nn.functional.linear(value, vweight).view(
                    bsz, -1, self.num_heads, self.head_dim
                )
        else:
            raise NotImplementedError
            query, key = (
                nn.functional.linear(query, self.qk_proj_weight)
                .view(bsz, -1, self.num_heads, self.head_dim * 2)
                .chunk(2, dim=-1)
            )
            value = nn.functional.linear(value, self.v_proj_weight).view(
                bsz, -1, self.num_heads, self.vhead_dim
            )

        if self.vbias is not None:
            value = value + self.value_bias_weight.view(
                1, 1, self.num_heads, self.vhead_dim
            )

        p_k = self.linear_pos(pos_embs).view(
            1, -1, self.num_heads, self.head_dim
        )
        # (batch, head, klen, d_k)

        q_with_bias_u = (
            query + self.pos_bias_u.view(1, 1, self.num_heads, self.head_dim)
        ).transpose(1, 2)
        # (batch, head, qlen, d_k)
        q_with_bias_v = (
            query + self.pos_bias_v.view(1, 1, self.num_heads, self.head_dim)
        ).transpose(1, 2)

        # Moved the `* self.scale` mul from after the `attn_score` sum to prior
        # to the matmul in order to lower overflow risks on fp16.
        # This change is inspired by the following paper, but no other changes
        # were ported from there so far.
        # ref: E.T.: Re-Thinking Self-Attention for Transformer Models on GPUs
        # https://asherliu.github.io/docs/sc21a.pdf

        # (batch, head, qlen, klen)
        matrix_ac = torch.matmul(
            q_with_bias_u * self.scale, key.permute(0, 2, 3, 1)
        )
        # (batch, num_heads, klen, 2*klen-1)
        matrix_bd = torch.matmul(
            q_with_bias_v * self.scale, p_k.permute(0, 2, 3, 1)
        )
        matrix_bd = self.rel_shift(matrix_bd)  # shifting trick

        # if klen != qlen:
        #   import ipdb
        #  ipdb.set_trace(

        attn_score = matrix_ac + matrix_bd  # already scaled above

        # compute attention probability
        if attn_mask is not None:
            if attn_mask.ndim == 2:
                attn_mask = attn_mask.view(1, 1, qlen, klen)
            else:
                attn_mask = attn_mask.view(-1, self.num_heads, qlen, klen)

            if attn_mask.dtype == torch.bool:
                attn_score = attn_score.masked_fill(
                    attn_mask, self.attn_fill_value
                )
            else:
                attn_score += attn_mask

        if key_padding_mask is not None:
            attn_score = attn_score.masked_fill(
                key_padding_mask.view(bsz, 1, 1, klen),
                self.attn_fill_value,
            )

        attn_score = F.softmax(attn_score, dim=-1, dtype=torch.float32)
        attn_score = self.dropout_att(attn_score)

        # it is possible for us to hit full NaN when using chunked training
        # so reapply masks, except with 0.0 instead as we are after the softmax
        # because -inf would output 0.0 regardless anyway
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                attn_score = attn_score.masked_fill(attn_mask, 0.0)
            else:
                # NOTE: the above fix is not implemented for this case as
                # summing the mask with NaN would still result in NaN
                pass

        if key_padding_mask is not None:
            attn_score = attn_score.masked_fill(
                key_padding_mask.view(bsz, 1, 1, klen),
                0.0,
            )

        x = torch.matmul(
            attn_score, value.transpose(1, 2)
        )  # (batch, head, time1, d_k)
        x = (
            x.transpose(1, 2)
            .contiguous()
            .view(bsz, -1, self.vhead_dim * self.num_heads)
        )  # (batch, time1, d_model)

        out = self.out_proj(x)
        if return_attn_weights:
            return out, attn_score
        return out


# (the RoPE helpers and `RoPEMHA`, their docstrings shortened to their first lines)


class PrecomputedRoPESinusoids(nn.Module):
    """
    A cache for the sines and cosines needed to rotate the vectors for rotary
    position embeddings (RoPE).
    """

    def __init__(
        self,
        max_length: int,
        input_size: int,
        dtype: torch.dtype,
        device: torch.device,
    ):
        super().__init__()

        # To precompute the values, use at least float32, because
        # otherwise final accuracy is unnecessarily dreadful.
        internal_dtype = (
            torch.float64 if dtype == torch.float64 else torch.float32
        )

        assert (input_size % 2) == 0

        self.max_length = max_length

        # 10000**(-2(i-1)/d) for i in [1,2,...,d/2]
        angles = torch.exp(
            torch.arange(0, input_size, 2, dtype=internal_dtype, device=device)
            * -(math.log(10000.0) / input_size)
        )

        dimensions = torch.arange(input_size, device=device)

        times = torch.arange(0, max_length, dtype=internal_dtype, device=device)

        # equation (15) without zeros in the matrix
        times_angles = torch.outer(times, angles)

        # Construct
        #     [cos(theta_0), cos(theta_0), cos(theta_1), cos(theta_1), ... ]
        # for equation (34)
        cosines = torch.cos(times_angles)
        cosines = torch.stack([cosines, cosines], dim=-1).reshape(
            max_length, input_size
        )

        # Construct
        #     [sin(theta_0), -sin(theta_0), sin(theta_1), -sin(theta_1), ... ]
        # for equation (34)
        unsigned_sines = torch.sin(times_angles)
        unsigned_repeated_sines = torch.stack(
            [unsigned_sines, unsigned_sines], dim=-1
        ).reshape(max_length, input_size)

        sines = (
            (-1)
            ** torch.arange(input_size, dtype=internal_dtype, device=device)
        ) * -unsigned_repeated_sines

        # To perform a 2-d rotation of every pair of dimensions, a vector will
        # need to be created with every pair swapped with each other.
        # To make this easy, swap every pair of indices:
        # [1, 0, 3, 2, 5, 4, 7, 6, ...]
        index_swap = torch.stack(
            [dimensions[1::2], dimensions[::2]], dim=-1
        ).reshape(-1)

        self.register_buffer("cosines", cosines.to(dtype))
        self.register_buffer("sines", sines.to(dtype))
        self.register_buffer("index_swap", index_swap)


class MemoiseAtLeastSize:
    """
    Memoises a function which has as its first argument a value that indicates a
    minimum value to call the underlying function with.
    """

    def __init__(self, function: Callable, round_up: Callable[[Any], Any]):
        self.function = function
        self.round_up = round_up
        # A memo from (parameters 2, 3, ...) to (parameter_1_rounded, result)
        # that stores the result of the call to
        # function(parameter_1_rounded, parameters 2, 3, ...).
        self.memo: Dict[tuple, Tuple[Any, Any]] = {}

    def __call__(self, size: Any, *args):
        if args not in self.memo or self.memo[args][0] < size:
            rounded_size = self.round_up(size)
            assert not (rounded_size < size)
            self.memo[args] = rounded_size, self.function(rounded_size, *args)
        return self.memo[args][1]


def memoise_at_least(
    round_up: Callable[[Any], Any],
) -> Callable[[Callable], MemoiseAtLeastSize]:
    """
    Decorator that memoises a function which has as its first argument a value
    that indicates a minimum value to call the underlying function with.
    """

    def with_function(function: Callable) -> MemoiseAtLeastSize:
        """
        Set the function to be memoised.
        """
        return MemoiseAtLeastSize(function, round_up)

    return with_function


@memoise_at_least(lambda length: 2 ** int(math.ceil(math.log2(length))))
def _get_precomputed_values(
    length: int, input_size: int, dtype: torch.dtype, device: torch.device
) -> PrecomputedRoPESinusoids:
    """
    Return an object of type PrecomputedRoPESinusoids that is valid for the
    length, input_size, dtype and device.
    """
    # length should have been rounded up to the nearest power of two by the
    # decorator.
    length_power = int(round(math.log2(length)))
    assert length == 2**length_power
    return PrecomputedRoPESinusoids(length, input_size, dtype, device)


def _rope_rotate(x):
    """
    Perform the rotation for RoPE on each of the vectors in x.
    Details about RoPE: https://arxiv.org/pdf/2104.09864.
    """
    _batch_size, length, _num_heads, head_dim = x.shape

    assert (head_dim % 2) == 0

    precomputed = _get_precomputed_values(length, head_dim, x.dtype, x.device)

    # Cut the sinusoids down to the correct length.
    cosines = precomputed.cosines[:length]
    sines = precomputed.sines[:length]

    # The fast implementation for pair-wise rotation requires a version of x
    # with the elements of each pair swapped.
    # (34) in https://arxiv.org/pdf/2104.09864.
    swapped_pairs = torch.index_select(x, dim=-1, index=precomputed.index_swap)

    # (batch_size, L, num_heads, head_dim) * (L, 1, hdead_dim)
    return x * cosines.unsqueeze(1) + swapped_pairs * sines.unsqueeze(1)


class RoPEMHA(nn.Module):
    """This is an implementation of multihead self-attention with RoPE positional embeddings.
    """

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        vbias=False,
        vdim=None,
    ):
        super().__init__()
        self.embed_dim = embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.vdim == embed_dim
        self.vbias = vbias

        self.num_heads = num_heads
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        self.vhead_dim = self.vdim // num_heads

        assert self.head_dim * num_heads == self.embed_dim, (
            "embed_dim must be divisible by num_heads"
        )
        assert self.vhead_dim * num_heads == self.vdim, (
            "vdim must be divisible by num_heads"
        )

        if self._qkv_same_embed_dim is False:
            self.qk_proj_weight = nn.Parameter(
                torch.empty(2 * embed_dim, embed_dim)
            )
            self.v_proj_weight = nn.Parameter(torch.empty(self.vdim, embed_dim))
        else:
            self.in_proj_weight = nn.Parameter(
                torch.empty(3 * embed_dim, embed_dim)
            )

        if vbias:
            self.value_bias_weight = nn.Parameter(torch.empty(self.vdim))
        else:
            self.vbias = None

        self.out_proj = nn.Linear(self.vdim, embed_dim)

        if next(self.parameters()).dtype == torch.float16:
            self.attn_fill_value = -65000
        else:
            self.attn_fill_value = -float("inf")

        self._reset_parameters()

        self.scale = 1 / math.sqrt(self.embed_dim)

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            torch.nn.init.xavier_uniform_(self.in_proj_weight)
        else:
            torch.nn.init.xavier_uniform_(self.qk_proj_weight)
            torch.nn.init.xavier_uniform_(self.v_proj_weight)

        if self.vbias is not None:
            torch.nn.init.constant_(self.value_bias_weight, 0.0)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        attn_mask=None,
        pos_embs=None,
        return_attn_weights=True,
    ):
        """Compute attention through Pytorch attention.
        """

        assert pos_embs is None, "pos_embs is not supported"

        # query, key and value are of shape batch, time, embed_dim
        bsz = query.shape[0]
        klen = key.shape[1]

        if self._qkv_same_embed_dim:
            # self-attention
            if (query is key or torch.equal(query, key)) and (
                key is value or torch.equal(key, value)
            ):
                query, key, value = (
                    nn.functional.linear(query, self.in_proj_weight)
                    .view(bsz, -1, self.num_heads, self.head_dim * 3)
                    .chunk(3, dim=-1)
                )
            else:
                qweight, kweight, vweight = self.in_proj_weight.chunk(3, dim=0)
                query = nn.functional.linear(query, qweight).view(
                    bsz, -1, self.num_heads, self.head_dim
                )
                key = nn.functional.linear(key, kweight).view(
                    bsz, -1, self.num_heads, self.head_dim
                )
                value = nn.functional.linear(value, vweight).view(
                    bsz, -1, self.num_heads, self.head_dim
                )
        else:
            raise NotImplementedError

        if self.vbias is not None:
            value = value + self.value_bias_weight.view(
                1, 1, self.num_heads, self.vhead_dim
            )

        q_rotated = _rope_rotate(query)
        k_rotated = _rope_rotate(key)

        final_masks = masks_union(
            bsz, klen, self.num_heads, attn_mask, key_padding_mask
        )

        x = F.scaled_dot_product_attention(
            query=q_rotated.permute(0, 2, 1, 3),
            key=k_rotated.permute(0, 2, 1, 3),
            value=value.permute(0, 2, 1, 3),
            attn_mask=final_masks,
            dropout_p=self.dropout if self.training else 0.0,
            scale=self.scale,
        )

        x = (
            x.transpose(1, 2)
            .contiguous()
            .view(bsz, -1, self.vhead_dim * self.num_heads)
        )  # (batch, time1, d_model)

        out = self.out_proj(x)
        if return_attn_weights:
            return out, None  # out, attn_score
        return out


def masks_union(bsz, klen, num_heads, attn_mask, key_padding_mask):
    """This is an utility function combining standard key_padding_mask and
    attn_mask from SpeechBrain into a single one for scaled_dot_product_attention.
    """
    final_mask = None

    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask.view(bsz, 1, 1, klen).expand(
            bsz, num_heads, klen, klen
        )
        final_mask = key_padding_mask

    if attn_mask is not None:
        attn_mask = attn_mask.view(1, 1, klen, klen).expand(
            bsz, num_heads, klen, klen
        )
        final_mask = attn_mask

    if attn_mask is not None and key_padding_mask is not None:
        final_mask = torch.logical_or(attn_mask, key_padding_mask)

    if final_mask is not None:
        final_mask = torch.logical_not(final_mask)

    return final_mask


# ---- factories: as the conformer encoder layer calls them (d_model 144..512, 4..8 heads;
# here 48, 4 heads)


class _Conformer(nn.Module):
    def __init__(self, causal: bool = False):
        super().__init__()
        self.positional_encoding = RelPosEncXL(48)
        self.mha_layer = RelPosMHAXL(48, 4, dropout=0.1, mask_pos_future=causal)

    def forward(self, src, src_key_padding_mask):
        pos_embs = self.positional_encoding(src)
        x, self_attn = self.mha_layer(src, src, src, attn_mask=None,
                                      key_padding_mask=src_key_padding_mask, pos_embs=pos_embs)
        return src + x


class _RoPE(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha_layer = RoPEMHA(48, 4, dropout=0.1)

    def forward(self, src, src_key_padding_mask):
        x, _ = self.mha_layer(src, src, src, attn_mask=None,
                              key_padding_mask=src_key_padding_mask, pos_embs=None)
        return src + x


def _key_padding(b: int, t: int) -> torch.Tensor:
    # `~length_to_mask(abs_len).bool()`: True at a pad
    mask = torch.zeros(b, t, dtype=torch.bool)
    mask[-1, t - 3:] = True
    return mask


def make():
    return _Conformer().eval(), {"src": torch.randn(2, 11, 48),
                                 "src_key_padding_mask": _key_padding(2, 11)}


def make_causal():
    return _Conformer(causal=True).eval(), {"src": torch.randn(2, 11, 48),
                                            "src_key_padding_mask": _key_padding(2, 11)}


def make_rope():
    return _RoPE().eval(), {"src": torch.randn(2, 11, 48),
                            "src_key_padding_mask": _key_padding(2, 11)}
