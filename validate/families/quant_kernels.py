"""Fast quantized decode attention over the tiled layouts of packing.py (`Tiling`); quant_attention.decode
calls `fast_decode` for caches stored tiled and keeps its own kernel for the plain layout.

Middle loop (one program: one KV head of one sequence over `chunk` tokens): the rows of every dot are
ROWS = NSUB * GP, GP = next_pow2(GROUP) query heads of row block kb = 0..NSUB-1, and each row block attends
its own sub-tile of R tokens per step (the K and V of one token stay paired, so attention is unchanged;
the NSUB running softmax states of a head merge at the end). One step covers NSUB * R tokens:
  * codes come as int16 words whose two bytes hold 8/a codes each (packing.code_positions); one inline-asm
    instruction group turns the pair of words a thread holds into fp16 for both bytes at once:
    and (field f kept in place) + prmt with 0x64 -> 1024 + 2^(a f) u exactly (3-bit: plane B's bit or-ed
    in at 2f + 2), no shifts, no int->float conversion, no shared-memory round trip of dequantized data
    (the dot reads the words in its operand layout; 16-bit words keep kWidth = 2, so no register moves);
  * groups along the dot's reduction (KIVI's K over tokens, per-token V groups over channels): per element
    x = a (v 2^(-af) - 1024 2^(-af)) + c in two f16x2 FMAs, (a, c) loaded as vectors along the reduction;
  * groups across it (InnerQ/SKVQ K over channels, InnerQ V over tokens): the dot runs on the raw 1024 +
    2^(af) u values and the scale, zero and 1024 offset apply to its [ROWS, *] output once per group
    (q pre-scaled by 2^(-af) for K; row weights for V).
The tail (sinks, leftover quantized tokens, fp16 windows) is dequantized element by element.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

TK, CK, TV, CVT, CVC = (tl.constexpr(i) for i in range(5))  # packing.Tiling kinds
KINDS = {"TK": 0, "CK": 1, "TV": 2, "CVT": 3, "CVC": 4}
LOG2E = 1.4426950408889634
TAIL_TOKENS = tl.constexpr(64)  # tokens per tail program (and per tail step)


# ---- code words -> fp16 -------------------------------------------------------------------------

@triton.jit
def _consts(shape, A: tl.constexpr, F: tl.constexpr):
    """Constant tiles of field F of a-bit codes: byte mask (x4), f16x2 2^(-aF), f16x2 -1024 * 2^(-aF)."""
    M: tl.constexpr = ((1 << A) - 1) * 0x01010101 << (A * F)
    S: tl.constexpr = ((15 - A * F) << 10) * 0x10001
    N: tl.constexpr = (0x8000 | ((25 - A * F) << 10)) * 0x10001 - (1 << 32)  # as int32
    mask = tl.full(shape, M - (1 << 32) if M >= (1 << 31) else M, tl.int32)
    return mask, tl.full(shape, S, tl.int32), tl.full(shape, N, tl.int32)


@triton.jit
def _raw(w, hb, A: tl.constexpr, B: tl.constexpr, F: tl.constexpr, EMU: tl.constexpr):
    """Words w (int16: bytes 0 and 1) -> (v0, v1), v = 1024 + 2^(aF) u of field F of each byte; with a 1-bit
    plane B (B = 1), its bit 2F + byte of `hb` is u's bit a. Under the interpreter `hb` is plane B's byte."""
    mask, _, _ = _consts(w.shape, A, F)
    if EMU:
        x = w.to(tl.int32) & 0xFFFF
        m = (((1 << A) - 1) << (A * F))
        v0 = x & m
        v1 = (x >> 8) & m
        if B:
            v0 |= ((hb >> (2 * F)) & 1) << (2 * F + 2)
            v1 |= ((hb >> (2 * F + 1)) & 1) << (2 * F + 2)
        return v0.to(tl.float32) + 1024.0, v1.to(tl.float32) + 1024.0
    if B:
        bit = tl.full(w.shape, 0x00040004 << (2 * F), tl.int32)
        return tl.inline_asm_elementwise(
            "{ .reg .b32 t, u, x; and.b32 t, $2, $3; prmt.b32 u, t, 0x64646464, 0x6240; shl.b32 x, $5, 2;"
            " and.b32 x, x, $7; or.b32 $0, u, x; prmt.b32 u, t, 0x64646464, 0x6341; shl.b32 x, $5, 1;"
            " and.b32 x, x, $7; or.b32 $1, u, x; }",
            "=r,=r,r,r,r,r,r,r,r", [w, mask, hb, bit], dtype=(tl.float16, tl.float16), is_pure=True, pack=2)
    return tl.inline_asm_elementwise(
        "{ .reg .b32 t; and.b32 t, $2, $3; prmt.b32 $0, t, 0x64646464, 0x6240; prmt.b32 $1, t, 0x64646464, 0x6341; }",
        "=r,=r,r,r,r", [w, mask], dtype=(tl.float16, tl.float16), is_pure=True, pack=2)


@triton.jit
def _spread(hb16, EMU: tl.constexpr):
    """Plane B words, each given twice (join): int32 with the word's low byte at bits 0-7, high at 16-23."""
    if EMU:
        return hb16
    return tl.inline_asm_elementwise("{ prmt.b32 $0, $2, 0, 0x4140; mov.b32 $1, $0; }", "=r,=r,r", [hb16],
                                     dtype=tl.int32, is_pure=True, pack=2)


@triton.jit
def _deq(w, a0, c0, a1, c1, A: tl.constexpr, F: tl.constexpr, EMU: tl.constexpr):
    """Words w -> (x0, x1) = a * u + c of field F of byte 0 (scale a0, zero c0) and byte 1 (a1, c1), fp16."""
    mask, s, n = _consts(w.shape, A, F)
    if EMU:
        x = w.to(tl.int32) & 0xFFFF
        m = (((1 << A) - 1) << (A * F))
        u0 = ((x & m) >> (A * F)).to(tl.float32)
        u1 = (((x >> 8) & m) >> (A * F)).to(tl.float32)
        return ((u0 * a0.to(tl.float32) + c0.to(tl.float32)).to(tl.float16).to(tl.float32),
                (u1 * a1.to(tl.float32) + c1.to(tl.float32)).to(tl.float16).to(tl.float32))
    return tl.inline_asm_elementwise(
        "{ .reg .b32 t, v; and.b32 t, $2, $3; prmt.b32 v, t, 0x64646464, 0x6240; fma.rn.f16x2 v, v, $5, $7;"
        " fma.rn.f16x2 $0, v, $9, $10; prmt.b32 v, t, 0x64646464, 0x6341; fma.rn.f16x2 v, v, $5, $7;"
        " fma.rn.f16x2 $1, v, $11, $12; }",
        "=r,=r,r,r,r,r,r,r,r,r,r,r,r", [w, mask, s, n, a0, c0, a1, c1], dtype=(tl.float16, tl.float16),
        is_pure=True, pack=2)


@triton.jit
def _affine(scale, zero, off, MODE: tl.constexpr, OFFSET: tl.constexpr):
    """(a, c) fp32 with x = a*u + c: symmetric (s, -s*OFFSET), asymmetric (s, z), hybrid (|s|, z if the
    scale's sign bit is set else -|s|*OFFSET)."""
    raw = tl.load(scale + off)
    a = raw.to(tl.float32)
    if MODE == 0:
        c = -a * OFFSET  # (symmetric and asymmetric scales are positive)
    elif MODE == 1:
        c = tl.load(zero + off).to(tl.float32)
    else:
        a = tl.abs(a)
        c = tl.where(raw.to(tl.int16, bitcast=True) < 0, tl.load(zero + off).to(tl.float32), -a * OFFSET)
    return a, c


@triton.jit
def _rows(scale, zero, off, ok, kb, MODE: tl.constexpr, OFFSET: tl.constexpr, KP: tl.constexpr, EMU: tl.constexpr):
    """(a, c) [ROWS, N] fp32 in the dot-output layout, row r taking row kb[r] of the [KP, N] metadata at `off`
    (rows past NSUB masked by `ok`): a one-hot [ROWS, KP] by [KP, N] dot, exact (one nonzero term)."""
    raw = tl.load(scale + off, mask=ok, other=0.0)
    a = raw.to(tl.float32)
    if MODE == 0:
        c = -a * OFFSET
    elif MODE == 1:
        c = tl.load(zero + off, mask=ok, other=0.0).to(tl.float32)
    else:
        a = tl.abs(a)
        c = tl.where(raw.to(tl.int16, bitcast=True) < 0, tl.load(zero + off, mask=ok, other=0.0).to(tl.float32),
                     -a * OFFSET)
    hot = _op(kb[:, None] == tl.arange(0, KP)[None, :], EMU)
    return tl.dot(hot, _op(a, EMU)), tl.dot(hot, _op(c, EMU))


@triton.jit
def _affine16(scale, zero, off, MODE: tl.constexpr, OFFSET: tl.constexpr, EMU: tl.constexpr):
    a, c = _affine(scale, zero, off, MODE, OFFSET)
    if EMU:
        return a, c
    return a.to(tl.float16), c.to(tl.float16)


@triton.jit
def _op(x, EMU: tl.constexpr):
    """A dot operand: fp32 under the interpreter (no fp16 dot there), fp16 on the GPU."""
    if EMU:
        return x.to(tl.float32)
    return x.to(tl.float16)


@triton.jit
def _plane_b(c8, c16, byte_row, word_row, shape0: tl.constexpr, n: tl.constexpr, EMU: tl.constexpr):
    """Plane B of a [shape0, n] word tile, one byte per word, rows starting at bytes byte_row ([shape0, 1]):
    the bytes (interpreter), else the int16 words at word_row, each given twice and spread (see _spread)."""
    if EMU:
        return tl.load(c8 + byte_row + tl.arange(0, n)[None, :]).to(tl.int32)
    half = tl.load(c16 + word_row + tl.arange(0, n // 2)[None, :])
    return _spread(tl.reshape(tl.broadcast_to(half[:, :, None], [shape0, n // 2, 2]), [shape0, n]), EMU)


@triton.jit
def _put(t, i: tl.constexpr, x):
    """Tuple t with item i replaced by x."""
    out = ()
    for j in tl.static_range(len(t)):
        if j == i:
            out = out + (x,)
        else:
            out = out + (t[j],)
    return out


# ---- element-wise reads (the tail) ---------------------------------------------------------------

@triton.jit
def _code_at(codes, j, ch, nq, ok, KIND: tl.constexpr, A: tl.constexpr, B: tl.constexpr, D: tl.constexpr,
             R: tl.constexpr):
    """Code u of quantized token j, channel ch (packing.code_positions)."""
    FA: tl.constexpr = 8 // A
    if KIND == TK or KIND == TV:
        H2: tl.constexpr = D // 2
        full = nq // (FA * R) * (FA * R)
        cid = j // (FA * R)
        i = j % (FA * R)
        f = i // R
        r = i % R
        second = ch // H2
        col = ch % H2
        if KIND == TK:
            word = cid * (R * H2) + r * H2 + col
        else:
            word = cid * (R * H2) + col * R + r
        tail = j - full
        byte = tl.where(j < full, 2 * word + second, full * D // FA + tail // FA * D + ch)
        shift = tl.where(j < full, f * A, tail % FA * A)
        u = (tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> shift) & ((1 << A) - 1)
        if B:
            base = nq * D * A // 8
            byte = tl.where(j < full, base + word, base + full * H2 // FA + tail // 8 * D + ch)
            shift = tl.where(j < full, 2 * f + second, tail % 8)
            u = u | (((tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> shift) & 1) << A)
        return u
    if KIND == CK:
        W: tl.constexpr = D * A // 16
        f = ch // (2 * W)
        second = ch % (2 * W) // W
        col = ch % W
        row = j.to(tl.int64) * (D * (A + B) // 8)
        u = (tl.load(codes + row + 2 * col + second, mask=ok, other=0).to(tl.int32) >> (f * A)) & ((1 << A) - 1)
        if B:
            bits = tl.load(codes + row + D * A // 8 + col, mask=ok, other=0).to(tl.int32)
            u = u | (((bits >> (2 * f + second)) & 1) << A)
        return u
    if KIND == CVT:
        PER: tl.constexpr = D * A // 8
        full = nq // (2 * R) * (2 * R)
        i = j % (2 * R)
        col = ch % PER
        byte = tl.where(j < full, j // (2 * R) * (2 * R * PER) + col * (2 * R) + 2 * (i % R) + i // R, j * PER + col)
        return (tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> (ch // PER * A)) & ((1 << A) - 1)
    W2: tl.constexpr = D * A // 16  # CVC
    full = nq // R * R
    second = ch % (2 * W2) // W2
    col = ch % W2
    byte = tl.where(j < full, j // R * (R * 2 * W2) + col * (2 * R) + 2 * (j % R) + second,
                    j * (2 * W2) + 2 * col + second)
    return (tl.load(codes + byte, mask=ok, other=0).to(tl.int32) >> (ch // (2 * W2) * A)) & ((1 << A) - 1)


@triton.jit
def _meta_at(j, ch, nq, KIND: tl.constexpr, G: tl.constexpr, D: tl.constexpr, R: tl.constexpr):
    """Offset of the scale (and zero) of quantized token j, channel ch (packing.meta_positions)."""
    NG: tl.constexpr = D // G
    if KIND == TK or KIND == TV:
        return (j // G) * D + ch
    T: tl.constexpr = R * 2 if KIND == CVT else R
    full = nq // T * T
    return tl.where(j < full, j // T * (T * NG) + (ch // G) * T + j % T, j * NG + ch // G)


@triton.jit
def affine_masked(scale, zero, off, mask, MODE: tl.constexpr, OFFSET: tl.constexpr):
    """(a, c) with x = a*u + c, loads masked: symmetric (s, -s*OFFSET), asymmetric (s, z), hybrid (|s|, z if the
    scale's sign bit is set else -|s|*OFFSET)."""
    raw = tl.load(scale + off, mask=mask, other=0.0)
    a = tl.abs(raw.to(tl.float32))
    if MODE == 0:
        c = -a * OFFSET
    else:
        z = tl.load(zero + off, mask=mask, other=0.0).to(tl.float32)
        if MODE == 1:
            c = z
        else:
            c = tl.where(raw.to(tl.int16, bitcast=True) < 0, z, -a * OFFSET)
    return a, c


@triton.jit
def _tail_values(codes, scale, zero, sinks, window, tok, ch, ok, num_sinks, nq, KIND: tl.constexpr,
                 A: tl.constexpr, B: tl.constexpr, G: tl.constexpr, MODE: tl.constexpr, OFFSET: tl.constexpr,
                 D: tl.constexpr, R: tl.constexpr):
    """Values at context positions `tok`: sinks [0, S), quantized [S, S + nq), the fp16 window after."""
    j = tok - num_sinks
    in_q = (j >= 0) & (j < nq) & ok
    jq = tl.where(in_q, j, 0)
    u = _code_at(codes, jq, ch, nq, in_q, KIND, A, B, D, R)
    meta = _meta_at(jq, ch, nq, KIND, G, D, R)
    a, c = affine_masked(scale, zero, meta, in_q, MODE, OFFSET)
    xq = a * u.to(tl.float32) + c
    x = tl.load(sinks + tok * D + ch, mask=ok & (j < 0), other=0.0).to(tl.float32)
    xw = tl.load(window + (j - nq) * D + ch, mask=ok & (j >= nq), other=0.0).to(tl.float32)
    return tl.where(j < 0, x, tl.where(in_q, xq, xw))


# ---- the kernel ---------------------------------------------------------------------------------

@triton.jit(do_not_specialize=["num_sinks", "win_k", "win_v", "num_mid", "tail_len", "num_parts"])
def fast_decode_kernel(
        q_ptr, kc, kc16, ks, kz, k_sinks, k_win, vc, vc16, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr,
        qk_scale, num_sinks, nq_k, nq_v, win_k, win_v, nq_mid, chunk, num_mid, tail_len, num_parts,
        TAIL: tl.constexpr, KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GP: tl.constexpr, NSUB: tl.constexpr,
        D: tl.constexpr, R: tl.constexpr, K_KIND: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr,
        K_G: tl.constexpr, K_MODE: tl.constexpr, V_KIND: tl.constexpr, V_A: tl.constexpr, V_B: tl.constexpr,
        V_G: tl.constexpr, V_MODE: tl.constexpr, K_OFF: tl.constexpr, V_OFF: tl.constexpr, EMU: tl.constexpr):
    pid = tl.program_id(0)
    bh = (tl.program_id(2) * KV_HEADS + tl.program_id(1)).to(tl.int64)  # sequence b, KV head h
    kc += bh * (nq_k * D * (K_A + K_B) // 8)
    kc16 += bh * (nq_k * D * (K_A + K_B) // 16)
    ks += bh * (nq_k * D // K_G)
    kz += bh * (nq_k * D // K_G)
    vc += bh * (nq_v * D * (V_A + V_B) // 8)
    vc16 += bh * (nq_v * D * (V_A + V_B) // 16)
    vs += bh * (nq_v * D // V_G)
    vz += bh * (nq_v * D // V_G)
    k_sinks += bh * num_sinks * D
    v_sinks += bh * num_sinks * D
    k_win += bh * win_k * D
    v_win += bh * win_v * D
    if TAIL:
        _tail_part(q_ptr, kc, ks, kz, k_sinks, k_win, vc, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr, bh, pid,
                   qk_scale, num_sinks, nq_k, nq_v, nq_mid, chunk, num_mid, tail_len, num_parts, GROUP, GP, D, R,
                   K_KIND, K_A, K_B, K_G, K_MODE, K_OFF, V_KIND, V_A, V_B, V_G, V_MODE, V_OFF, EMU)
    else:
        ROWS: tl.constexpr = NSUB * GP
        rows = tl.arange(0, ROWS)
        kb = rows // GP  # row block
        hh = rows % GP
        row_ok = hh < GROUP
        q_rows = q_ptr + (bh * GROUP + hh)[:, None] * D
        rr = tl.arange(0, R)
        # ---- q operands (loop-invariant): row block kb's copy of q, zero elsewhere
        qops = ()
        qsums = ()
        qoffs = ()
        if K_KIND == TK:
            QH: tl.constexpr = D // 2
            qcol = tl.arange(0, QH)
            for qb in tl.static_range(NSUB):
                for qsec in tl.static_range(2):
                    x = tl.load(q_rows + qsec * QH + qcol[None, :], mask=(row_ok & (kb == qb))[:, None], other=0.0)
                    qops = qops + (_op(x, EMU),)
        else:
            QW: tl.constexpr = D * K_A // 16
            qcol = tl.arange(0, QW)
            for _ in tl.static_range(D // K_G):
                qsums = qsums + (0.0,)
                qoffs = qoffs + (0.0,)
            ones = _op(tl.full([QW, R], 1.0, tl.float32), EMU)
            for qf in tl.static_range(8 // K_A):
                for qsec in tl.static_range(2):
                    x = tl.load(q_rows + qf * 2 * QW + qsec * QW + qcol[None, :], mask=row_ok[:, None],
                                other=0.0).to(tl.float32)
                    xs = _op(x * (1.0 / (1 << (K_A * qf))), EMU)  # exact: a power of two
                    # row sums through a dot: they land in the layout of the loop's dot outputs
                    qsums = _put(qsums, (qf * 2 * QW + qsec * QW) // K_G, qsums[(qf * 2 * QW + qsec * QW) // K_G]
                                 + tl.max(tl.dot(_op(x, EMU), ones), axis=1))
                    qoffs = _put(qoffs, (qf * 2 * QW + qsec * QW) // K_G, qoffs[(qf * 2 * QW + qsec * QW) // K_G]
                                 + 1024.0 * tl.max(tl.dot(xs, ones), axis=1))
                    for qb in tl.static_range(NSUB):
                        qops = qops + (tl.where((kb == qb)[:, None], xs, 0.0),)
        # ---- value accumulators: channel pieces (see _store_piece)
        if V_KIND == TV:
            NPIECE: tl.constexpr = 2
            PW: tl.constexpr = D // 2
        elif V_KIND == CVT:
            NPIECE: tl.constexpr = 8 // V_A
            PW: tl.constexpr = D * V_A // 8
        else:
            NPIECE: tl.constexpr = 2 * (8 // V_A)
            PW: tl.constexpr = D * V_A // 16
        accs = ()
        for _ in tl.static_range(NPIECE):
            accs = accs + (tl.zeros([ROWS, PW], dtype=tl.float32),)
        m_i = tl.full([ROWS], -1.0e30, dtype=tl.float32)
        l_i = tl.zeros([ROWS], dtype=tl.float32)
        lo = pid * chunk
        for j0 in range(lo, tl.minimum(lo + chunk, nq_mid), NSUB * R):
            # ---- scores [ROWS, R]: row block kb against tokens j0 + kb*R + rr
            if K_KIND == TK:
                FK: tl.constexpr = 8 // K_A
                H2: tl.constexpr = D // 2
                col = tl.arange(0, H2)
                s = tl.zeros([ROWS, R], dtype=tl.float32)
                for c in tl.static_range(NSUB // FK):
                    cid = j0 // (FK * R) + c
                    w = tl.load(kc16 + cid * (R * H2) + rr[:, None] * H2 + col[None, :])  # [R, D/2]
                    for f in tl.static_range(FK):
                        t = (j0 + (c * FK + f) * R) // K_G
                        a0, c0 = _affine16(ks, kz, t * D + col, K_MODE, K_OFF, EMU)
                        a1, c1 = _affine16(ks, kz, t * D + H2 + col, K_MODE, K_OFF, EMU)
                        x0, x1 = _deq(w, a0[None, :], c0[None, :], a1[None, :], c1[None, :], K_A, f, EMU)
                        s = tl.dot(qops[2 * (c * FK + f)], tl.trans(_op(x0, EMU)), s)  # (constexpr index)
                        s = tl.dot(qops[2 * (c * FK + f) + 1], tl.trans(_op(x1, EMU)), s)
            else:
                W: tl.constexpr = D * K_A // 16
                NG: tl.constexpr = D // K_G
                FK: tl.constexpr = 8 // K_A
                col = tl.arange(0, W)
                ds = ()
                for _ in tl.static_range(NG):
                    ds = ds + (tl.zeros([ROWS, R], dtype=tl.float32),)
                for k in tl.static_range(NSUB):
                    tok = j0 + k * R + rr
                    row16 = tok[:, None] * (D * (K_A + K_B) // 16)
                    w = tl.load(kc16 + row16 + col[None, :])  # [R, W]
                    hb = w
                    if K_B:
                        hb = _plane_b(kc, kc16, tok[:, None] * (D * (K_A + K_B) // 8) + D * K_A // 8,
                                      row16 + D * K_A // 16, R, W, EMU)
                    for f in tl.static_range(FK):
                        x0, x1 = _raw(w, hb, K_A, K_B, f, EMU)
                        ds = _put(ds, (f * 2 * W) // K_G, tl.dot(qops[(f * 2) * NSUB + k], tl.trans(_op(x0, EMU)),
                                                                ds[(f * 2 * W) // K_G]))
                        ds = _put(ds, (f * 2 * W + W) // K_G,  # (indices inline: constexpr)
                                  tl.dot(qops[(f * 2 + 1) * NSUB + k], tl.trans(_op(x1, EMU)),
                                         ds[(f * 2 * W + W) // K_G]))
                KP: tl.constexpr = 16 if NSUB <= 16 else NSUB
                kk = tl.arange(0, KP)
                moff = (j0 // R + kk[:, None]) * (R * NG) + rr[None, :]  # chunk-transposed [KP, R] per group
                s = tl.zeros([ROWS, R], dtype=tl.float32)
                for gi in tl.static_range(NG):
                    a, c = _rows(ks, kz, moff + gi * R, (kk < NSUB)[:, None], kb, K_MODE, K_OFF, KP, EMU)
                    s += a * (ds[gi] - qoffs[gi][:, None]) + c * qsums[gi][:, None]
            # ---- online softmax, log2 domain, one state per row
            s = s * qk_scale
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            m_i = m_new
            scaled = ()
            for i in tl.static_range(NPIECE):
                scaled = scaled + (accs[i] * alpha[:, None],)
            accs = scaled
            p16 = _op(p, EMU)
            # ---- values
            if V_KIND == TV:
                FV: tl.constexpr = 8 // V_A
                H2V: tl.constexpr = D // 2
                colv = tl.arange(0, H2V)
                da0 = tl.zeros([ROWS, H2V], dtype=tl.float32)
                da1 = tl.zeros([ROWS, H2V], dtype=tl.float32)
                for c in tl.static_range(NSUB // FV):
                    cid = j0 // (FV * R) + c
                    w = tl.load(vc16 + cid * (R * H2V) + colv[:, None] * R + rr[None, :])  # [D/2, R]
                    hb = w
                    if V_B:
                        hb = _plane_b(vc, vc16, nq_v * D * V_A // 8 + cid * (R * H2V) + colv[:, None] * R,
                                      nq_v * D * V_A // 16 + (cid * (R * H2V) + colv[:, None] * R) // 2,
                                      H2V, R, EMU)
                    for f in tl.static_range(FV):
                        pk = tl.where((kb == c * FV + f)[:, None], p16, 0.0)
                        x0, x1 = _raw(w, hb, V_A, V_B, f, EMU)
                        da0 = tl.dot(pk, tl.trans(_op(x0, EMU)), da0)
                        da1 = tl.dot(pk, tl.trans(_op(x1, EMU)), da1)
                psum = tl.sum(p16.to(tl.float32), axis=1)
                wv = tl.exp2(-(V_A * (kb % FV)).to(tl.float32))  # 2^(-a f) of the row block's field
                VP: tl.constexpr = 16 if NSUB <= 16 else NSUB
                kv = tl.arange(0, VP)
                t = ((j0 + kv * R) // V_G)[:, None] * D + colv[None, :]  # [KP, D/2]
                a, c = _rows(vs, vz, t, (kv < NSUB)[:, None], kb, V_MODE, V_OFF, VP, EMU)
                accs = _put(accs, 0, accs[0] + a * ((da0 - 1024.0 * psum[:, None]) * wv[:, None]) + c * psum[:, None])
                a, c = _rows(vs, vz, t + H2V, (kv < NSUB)[:, None], kb, V_MODE, V_OFF, VP, EMU)
                accs = _put(accs, 1, accs[1] + a * ((da1 - 1024.0 * psum[:, None]) * wv[:, None]) + c * psum[:, None])
            elif V_KIND == CVT:
                FV: tl.constexpr = 8 // V_A
                PER: tl.constexpr = D * V_A // 8
                NGV: tl.constexpr = D // V_G
                colv = tl.arange(0, PER)
                for c in tl.static_range(NSUB // 2):
                    cid = j0 // (2 * R) + c
                    w = tl.load(vc16 + cid * (R * PER) + colv[:, None] * R + rr[None, :])  # [PER, R]
                    p0 = tl.where((kb == 2 * c)[:, None], p16, 0.0)
                    p1 = tl.where((kb == 2 * c + 1)[:, None], p16, 0.0)
                    for f in tl.static_range(FV):
                        meta = cid * (2 * R * NGV) + ((f * PER) // V_G) * (2 * R) + rr
                        a0, c0 = _affine16(vs, vz, meta, V_MODE, V_OFF, EMU)
                        a1, c1 = _affine16(vs, vz, meta + R, V_MODE, V_OFF, EMU)
                        x0, x1 = _deq(w, a0[None, :], c0[None, :], a1[None, :], c1[None, :], V_A, f, EMU)
                        acc = tl.dot(p0, tl.trans(_op(x0, EMU)), accs[f])
                        accs = _put(accs, f, tl.dot(p1, tl.trans(_op(x1, EMU)), acc))
            else:  # CVC
                FV: tl.constexpr = 8 // V_A
                W2: tl.constexpr = D * V_A // 16
                NGV: tl.constexpr = D // V_G
                colv = tl.arange(0, W2)
                for k in tl.static_range(NSUB):
                    cid = j0 // R + k
                    w = tl.load(vc16 + cid * (R * W2) + colv[:, None] * R + rr[None, :])  # [W, R]
                    pk = tl.where((kb == k)[:, None], p16, 0.0)
                    for f in tl.static_range(FV):
                        meta = cid * (R * NGV) + rr
                        a0, c0 = _affine16(vs, vz, meta + ((f * 2 * W2) // V_G) * R, V_MODE, V_OFF, EMU)
                        a1, c1 = _affine16(vs, vz, meta + ((f * 2 * W2 + W2) // V_G) * R, V_MODE, V_OFF, EMU)
                        x0, x1 = _deq(w, a0[None, :], c0[None, :], a1[None, :], c1[None, :], V_A, f, EMU)
                        accs = _put(accs, 2 * f, tl.dot(pk, tl.trans(_op(x0, EMU)), accs[2 * f]))
                        accs = _put(accs, 2 * f + 1, tl.dot(pk, tl.trans(_op(x1, EMU)), accs[2 * f + 1]))
        # ---- merge the NSUB states of each head, store the split's partials
        mr = tl.reshape(m_i, [NSUB, GP])
        mx = tl.max(mr, axis=0)
        sc = tl.exp2(mr - mx[None, :])  # [NSUB, GP]
        heads = tl.arange(0, GP)
        part = (bh * GROUP + heads) * num_parts + pid
        h_ok = heads < GROUP
        tl.store(m_ptr + part, mx, mask=h_ok)
        tl.store(l_ptr + part, tl.sum(tl.reshape(l_i, [NSUB, GP]) * sc, axis=0), mask=h_ok)
        for i in tl.static_range(NPIECE):
            c0 = i * PW  # TV, CVT: piece i = channels i*PW.., CVC: piece 2f + second = f*2PW + second*PW
            if V_KIND == CVC:
                c0 = (i // 2) * 2 * PW + (i % 2) * PW
            x = tl.sum(tl.reshape(accs[i], [NSUB, GP, PW]) * sc[:, :, None], axis=0)  # [GP, PW]
            tl.store(acc_ptr + part[:, None] * D + c0 + tl.arange(0, PW)[None, :], x, mask=h_ok[:, None])


@triton.jit
def _tail_part(q_ptr, kc, ks, kz, k_sinks, k_win, vc, vs, vz, v_sinks, v_win, m_ptr, l_ptr, acc_ptr, bh, pid,
               qk_scale, num_sinks, nq_k, nq_v, nq_mid, chunk, num_mid, tail_len, num_parts, GROUP: tl.constexpr,
               GP: tl.constexpr, D: tl.constexpr, R: tl.constexpr, K_KIND: tl.constexpr, K_A: tl.constexpr,
               K_B: tl.constexpr, K_G: tl.constexpr, K_MODE: tl.constexpr, K_OFF: tl.constexpr,
               V_KIND: tl.constexpr, V_A: tl.constexpr, V_B: tl.constexpr, V_G: tl.constexpr, V_MODE: tl.constexpr,
               V_OFF: tl.constexpr, EMU: tl.constexpr):
    """One tail part: positions [0, S) and [S + nq_mid, L) (sinks, leftover quantized tokens, windows)."""
    RP: tl.constexpr = 16 if GP <= 16 else GP
    heads = tl.arange(0, RP)
    row_ok = heads < GROUP
    dd = tl.arange(0, D)
    q = _op(tl.load(q_ptr + (bh * GROUP + heads)[:, None] * D + dd[None, :], mask=row_ok[:, None], other=0.0), EMU)
    m_i = tl.full([RP], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([RP], dtype=tl.float32)
    acc = tl.zeros([RP, D], dtype=tl.float32)
    lo = pid * chunk
    for i0 in range(lo, tl.minimum(lo + chunk, tail_len), TAIL_TOKENS):
        i = i0 + tl.arange(0, TAIL_TOKENS)
        ok = i < tail_len
        tok = tl.where(i < num_sinks, i, i + nq_mid)
        kt = _tail_values(kc, ks, kz, k_sinks, k_win, tok[None, :], dd[:, None], ok[None, :], num_sinks, nq_k,
                          K_KIND, K_A, K_B, K_G, K_MODE, K_OFF, D, R)  # [D, T]
        s = tl.dot(q, _op(kt, EMU)) * qk_scale
        s = tl.where(ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        m_i = m_new
        v = _tail_values(vc, vs, vz, v_sinks, v_win, tok[:, None], dd[None, :], ok[:, None], num_sinks, nq_v,
                         V_KIND, V_A, V_B, V_G, V_MODE, V_OFF, D, R)  # [T, D]
        acc = acc * alpha[:, None] + tl.dot(_op(p, EMU), _op(v, EMU))
    part = (bh * GROUP + heads) * num_parts + num_mid + pid
    tl.store(m_ptr + part, m_i, mask=row_ok)
    tl.store(l_ptr + part, l_i, mask=row_ok)
    tl.store(acc_ptr + part[:, None] * D + dd[None, :], acc, mask=row_ok[:, None])


# ---- launch -------------------------------------------------------------------------------------

def plan(r, tk, tv, heads: int, kv_heads: int, dim: int, emu: bool | None = None) -> dict:
    """The kernel's compile-time parameters for recipe r stored with tilings (tk, tv) (packing.cache_tilings)."""
    from validate.families.packing import MODES

    emu = os.environ.get("TRITON_INTERPRET", "0") == "1" if emu is None else emu
    group = heads // kv_heads
    gp = triton.next_power_of_2(group)
    along_tokens = [8 // t.planes[0] for t, til in ((r.k, tk), (r.v, tv)) if til.kind in ("TK", "TV")]
    nsub = max([*along_tokens, 16 // gp if gp < 16 else 1, 2 if tv.kind == "CVT" else 1])
    if tk.rows != tv.rows:
        raise ValueError("tiling: K and V sub-tiles differ")
    out = {"KV_HEADS": kv_heads, "GROUP": group, "GP": gp, "NSUB": nsub, "D": dim, "R": tk.rows, "EMU": emu}
    for name, t, til in (("K", r.k, tk), ("V", r.v, tv)):
        out.update({f"{name}_KIND": KINDS[til.kind], f"{name}_A": t.planes[0], f"{name}_B": t.planes[1],
                    f"{name}_G": t.group, f"{name}_MODE": MODES[t.mode], f"{name}_OFF": t.levels // 2})
    return out


def step_tokens(ce: dict) -> int:
    """Tokens of one middle step (NSUB sub-tiles of R tokens): the middle covers a multiple of it."""
    return ce["NSUB"] * ce["R"]


def split_plan(nq_mid: int, step: int, num_splits: int) -> tuple[int, int]:
    """(tokens per middle program, a multiple of `step`; number of middle programs)."""
    chunk = triton.cdiv(triton.cdiv(max(nq_mid, 1), num_splits), step) * step
    return chunk, triton.cdiv(nq_mid, chunk)


def signature(r) -> dict:
    """validate.sm90 signature of fast_decode_kernel for recipe r."""
    sig = {"q_ptr": "*bf16", "m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "qk_scale": "fp32"}
    for x, t in (("k", r.k), ("v", r.v)):
        meta = "*fp16" if t.meta == "fp16" else "*fp8e4nv"
        sig.update({f"{x}c": "*u8", f"{x}c16": "*i16", f"{x}s": meta, f"{x}z": meta, f"{x}_sinks": "*fp16",
                    f"{x}_win": "*fp16"})
    for name in ("num_sinks", "nq_k", "nq_v", "win_k", "win_v", "nq_mid", "chunk", "num_mid", "tail_len",
                 "num_parts"):
        sig[name] = "i32"
    return sig


WAVES = 1  # middle programs = WAVES x the programs the GPU holds at once (whole waves, no straggling tail)
DEFAULT_RESIDENT = 4  # programs per SM assumed before the compiled kernel says (interpreter, first call)
MAX_SPLITS = 64
_RESIDENT: dict = {}  # (constexprs, warps, stages, device) -> programs per SM, from the compiled kernel


def resident(n_regs: int, shared: int, num_warps: int) -> int:
    """Programs of a kernel an H100/H200 SM holds at once: 64K registers (allocated per warp in units of
    256), 228 KB shared memory (1 KB reserved per block), 64 warps, 32 blocks."""
    per_warp = -(-n_regs * 32 // 256) * 256
    by_regs = 65536 // max(per_warp * num_warps, 1)
    by_smem = 228 * 1024 // (shared + 1024)
    return max(1, min(by_regs, by_smem, 64 // num_warps, 32))


def choose_splits(programs: int, tokens: int, sm_count: int, step: int, slots_per_sm: int = DEFAULT_RESIDENT,
                  waves: int = WAVES) -> int:
    """Middle splits per (sequence, KV head): the most that keep programs x splits within `waves` whole
    waves of resident programs (floor, not ceil: a partial extra wave runs at a fraction of the GPU), each
    split >= one step, at most MAX_SPLITS."""
    return max(1, min(waves * slots_per_sm * sm_count // programs, tokens // step, MAX_SPLITS))


def _pointers(t, fallback) -> list:
    """codes (uint8 and int16 views), scale, zero, sinks, window of one tensor; empty ones -> `fallback`."""
    import torch

    ts = t.tensors
    codes = ts["codes"]
    out = [codes, codes.view(torch.int16)] if codes.numel() else [fallback] * 2
    for name in ("scale", "zero" if "zero" in ts else "scale", "sinks", "window"):
        out.append(ts[name] if ts[name].numel() else fallback)
    return out


def _args(q, k, v, work, out, dim: int, nq_mid: int) -> tuple:
    """The kernel's arguments up to nq_mid (partials buffers: `work`, or stand-ins for a compile)."""
    stand_in = work is None
    m, l_, acc = (q, q, q) if stand_in else (work["m"], work["l"], work["acc"])
    if stand_in:
        import torch

        m = l_ = acc = torch.empty(1, dtype=torch.float32, device=q.device)
    return (q, *_pointers(k, q), *_pointers(v, q), m, l_, acc, dim ** -0.5 * LOG2E, k.sinks, k.nq, v.nq, k.recent,
            v.recent, nq_mid)


# launch defaults by (K, V) tiling kinds: (warps, register cap or None, pipeline stages), the best measured on an
# H200 (QUANT_NOTES.md): 4 warps for KIVI, 2 for InnerQ, 2 uncapped with 3 stages for SKVQ
LAUNCH = {("TK", "CVT"): (4, None, 2), ("TK", "CVC"): (4, None, 2), ("CK", "TV"): (2, None, 2),
          ("CK", "CVT"): (2, None, 3), ("CK", "CVC"): (2, None, 3)}


def launch_defaults(tk, tv) -> tuple[int, int | None, int]:
    """(num_warps, maxnreg, num_stages) of LAUNCH for tilings tk, tv."""
    return LAUNCH.get((tk.kind, tv.kind), (4, None, 2))


def fast_decode(q, cache, num_splits: int | None = None, out=None, work: dict | None = None,
                num_warps: int | None = None, num_stages: int | None = None, waves: int = WAVES,
                maxnreg: int | None = 0):
    """quant_attention.decode for a cache stored tiled (packing.cache_tilings): q [B, HQ, D] bf16 -> out.
    num_warps, num_stages None and maxnreg 0: LAUNCH's defaults for the tilings (maxnreg None: no cap)."""
    import torch

    from validate.families.attention_fp16 import reduce_kernel

    batch, heads, dim = q.shape
    k, v = cache.k, cache.v
    kv_heads = k.tensors["codes"].shape[1]
    ce = plan(cache.recipe, k.tiling, v.tiling, heads, kv_heads, dim)
    warps0, cap0, stages0 = launch_defaults(k.tiling, v.tiling)
    num_warps = warps0 if num_warps is None else num_warps
    num_stages = stages0 if num_stages is None else num_stages
    maxnreg = cap0 if maxnreg == 0 else maxnreg
    step = step_tokens(ce)
    launch = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg and q.is_cuda:
        launch["maxnreg"] = maxnreg
    nq_mid = min(k.nq, v.nq) // step * step
    tail_len = cache.context - nq_mid
    args = None
    if num_splits is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
        slots = DEFAULT_RESIDENT
        key = (tuple(sorted(ce.items())), num_warps, num_stages, maxnreg, str(q.device))
        if q.is_cuda and nq_mid:
            if key not in _RESIDENT:  # compile (no launch) to read registers and shared memory
                args = _args(q, k, v, None, None, dim, nq_mid)
                kernel = fast_decode_kernel.warmup(*args, step, 2, tail_len, 3, TAIL=False, **ce, grid=(1,), **launch)
                kernel._init_handles()
                _RESIDENT[key] = resident(kernel.n_regs, kernel.metadata.shared, num_warps)
            slots = _RESIDENT[key]
        num_splits = choose_splits(batch * kv_heads, nq_mid, sms, step, slots, waves)
    chunk, num_mid = split_plan(nq_mid, step, num_splits) if nq_mid else (step, 0)
    num_parts = num_mid + triton.cdiv(tail_len, TAIL_TOKENS.value)
    work = {} if work is None else work
    work["num_splits"] = num_mid
    work = {} if work is None else work
    key = (batch, heads, num_parts, dim, q.device)
    if work.get("key") != key:
        m = torch.empty(batch, heads, num_parts, dtype=torch.float32, device=q.device)
        work.update(key=key, m=m, l=torch.empty_like(m), acc=torch.empty(*m.shape, dim, dtype=torch.float32,
                                                                          device=q.device))
    out = torch.empty_like(q) if out is None else out
    assert q.is_contiguous() and heads % kv_heads == 0
    args = _args(q, k, v, work, out, dim, nq_mid)
    if num_mid:
        # one program: the GROUP query heads of one KV head of one sequence, over `chunk` middle tokens
        fast_decode_kernel[(num_mid, kv_heads, batch)](*args, chunk, num_mid, tail_len, num_parts, TAIL=False,
                                                       **ce, **launch)
    if num_parts > num_mid:
        tail_grid = (num_parts - num_mid, kv_heads, batch)
        fast_decode_kernel[tail_grid](*args, TAIL_TOKENS.value, num_mid, tail_len, num_parts, TAIL=True, **ce,
                                      num_warps=4, num_stages=1)
    reduce_kernel[(batch * heads,)](work["m"], work["l"], work["acc"], out, num_parts, out.stride(0), out.stride(1),
                                    HEADS=heads, HEAD_DIM=dim, SPLITS_PAD=max(2, triton.next_power_of_2(num_parts)),
                                    num_warps=4)
    return out
