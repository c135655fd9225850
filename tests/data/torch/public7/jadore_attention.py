# MIT License, Copyright (c) 2017 Victor Huang
"""jadore801120/attention-is-all-you-need-pytorch (MIT), commit
132907dd272e2cc92e3c10e6c4e783a87ff8893d: `transformer/Modules.py`
(`ScaledDotProductAttention`: the queries divided by a temperature before the product),
`transformer/SubLayers.py` (`MultiHeadAttention`, `PositionwiseFeedForward`),
`transformer/Layers.py` (`DecoderLayer`) and the two mask helpers of `transformer/Models.py`
(`get_pad_mask`, `get_subsequent_mask`), as written there. The factories call them as
`Transformer.forward` does: the source's pad mask `[b, 1, len_s]`, the target's pad mask
and-ed with the subsequent mask `[b, len_t, len_t]`, each unsqueezed for the heads."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__author__ = "Yu-Hsiang Huang"


# ---- transformer/Models.py
def get_pad_mask(seq, pad_idx):
    return (seq != pad_idx).unsqueeze(-2)


def get_subsequent_mask(seq):
    ''' For masking out the subsequent info. '''
    sz_b, len_s = seq.size()
    subsequent_mask = (1 - torch.triu(
        torch.ones((1, len_s, len_s), device=seq.device), diagonal=1)).bool()
    return subsequent_mask


# ---- transformer/Modules.py
class ScaledDotProductAttention(nn.Module):
    ''' Scaled Dot-Product Attention '''

    def __init__(self, temperature, attn_dropout=0.1):
        super().__init__()
        self.temperature = temperature
        self.dropout = nn.Dropout(attn_dropout)

    def forward(self, q, k, v, mask=None):

        attn = torch.matmul(q / self.temperature, k.transpose(2, 3))

        if mask is not None:
            attn = attn.masked_fill(mask == 0, -1e9)

        attn = self.dropout(F.softmax(attn, dim=-1))
        output = torch.matmul(attn, v)

        return output, attn

# ---- transformer/SubLayers.py
class MultiHeadAttention(nn.Module):
    ''' Multi-Head Attention module '''

    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()

        self.n_head = n_head
        self.d_k = d_k
        self.d_v = d_v

        self.w_qs = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_ks = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_vs = nn.Linear(d_model, n_head * d_v, bias=False)
        self.fc = nn.Linear(n_head * d_v, d_model, bias=False)

        self.attention = ScaledDotProductAttention(temperature=d_k ** 0.5)

        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)


    def forward(self, q, k, v, mask=None):

        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, len_k, len_v = q.size(0), q.size(1), k.size(1), v.size(1)

        residual = q

        # Pass through the pre-attention projection: b x lq x (n*dv)
        # Separate different heads: b x lq x n x dv
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v)

        # Transpose for attention dot product: b x n x lq x dv
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

        if mask is not None:
            mask = mask.unsqueeze(1)   # For head axis broadcasting.

        q, attn = self.attention(q, k, v, mask=mask)

        # Transpose to move the head dimension back: b x lq x n x dv
        # Combine the last two dimensions to concatenate all the heads together: b x lq x (n*dv)
        q = q.transpose(1, 2).contiguous().view(sz_b, len_q, -1)
        q = self.dropout(self.fc(q))
        q += residual

        q = self.layer_norm(q)

        return q, attn


class PositionwiseFeedForward(nn.Module):
    ''' A two-feed-forward-layer module '''

    def __init__(self, d_in, d_hid, dropout=0.1):
        super().__init__()
        self.w_1 = nn.Linear(d_in, d_hid) # position-wise
        self.w_2 = nn.Linear(d_hid, d_in) # position-wise
        self.layer_norm = nn.LayerNorm(d_in, eps=1e-6)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):

        residual = x

        x = self.w_2(F.relu(self.w_1(x)))
        x = self.dropout(x)
        x += residual

        x = self.layer_norm(x)

        return x

# ---- transformer/Layers.py
class DecoderLayer(nn.Module):
    ''' Compose with three layers '''

    def __init__(self, d_model, d_inner, n_head, d_k, d_v, dropout=0.1):
        super(DecoderLayer, self).__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=dropout)
        self.enc_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=dropout)
        self.pos_ffn = PositionwiseFeedForward(d_model, d_inner, dropout=dropout)

    def forward(
            self, dec_input, enc_output,
            slf_attn_mask=None, dec_enc_attn_mask=None):
        dec_output, dec_slf_attn = self.slf_attn(
            dec_input, dec_input, dec_input, mask=slf_attn_mask)
        dec_output, dec_enc_attn = self.enc_attn(
            dec_output, enc_output, enc_output, mask=dec_enc_attn_mask)
        dec_output = self.pos_ffn(dec_output)
        return dec_output, dec_slf_attn, dec_enc_attn


# ---- factories: as Transformer.forward calls the layers (d_model 512, 8 heads of 64 in
# the paper's base model; here d_model 48, 4 heads of d_k 12, d_v 10)
PAD = 0


class _Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = DecoderLayer(48, 96, 4, 12, 10, dropout=0.1)

    def forward(self, trg_seq, dec_input, src_seq, enc_output):
        src_mask = get_pad_mask(src_seq, PAD)
        trg_mask = get_pad_mask(trg_seq, PAD) & get_subsequent_mask(trg_seq)
        dec_output, *_ = self.layer(dec_input, enc_output, slf_attn_mask=trg_mask,
                                    dec_enc_attn_mask=src_mask)
        return dec_output


class _Self(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = MultiHeadAttention(4, 48, 12, 10, dropout=0.1)

    def forward(self, src_seq, x):
        # EncoderLayer: slf_attn(enc_input, enc_input, enc_input, mask=src_mask)
        out, _ = self.attn(x, x, x, mask=get_pad_mask(src_seq, PAD))
        return out


def make():
    return _Self().eval(), {"src_seq": torch.randint(1, 30, (2, 9)), "x": torch.randn(2, 9, 48)}


def make_decoder():
    return _Decoder().eval(), {
        "trg_seq": torch.randint(1, 30, (2, 7)), "dec_input": torch.randn(2, 7, 48),
        "src_seq": torch.randint(1, 30, (2, 9)), "enc_output": torch.randn(2, 9, 48)}
