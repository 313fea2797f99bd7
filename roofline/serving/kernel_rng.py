"""numpy's PCG64 stream, drawn inline in the compiled record loops (numba intrinsics): speculative decoding's
acceptance draws (serving.kernel_spec.accept) without a call into the Generator per draw.

numpy's default_rng is a PCG64 (O'Neill, "PCG: A Family of Simple Fast Space-Efficient Statistically Good
Algorithms for Random Number Generation", 2014): a 128-bit linear congruential state s -> a s + c (mod 2**128), with
a = PCG_DEFAULT_MULTIPLIER_128 (2549297995355413924 x 2**64 + 4865540595714422341) and c the stream's odd increment,
each draw the state stepped first and then output by XSL-RR (the high and low words xor-ed, rotated right by the
state's top 6 bits); Generator.random is that 64-bit output >> 11 times 2**-53 (numpy/random/src/pcg64/pcg64.h:
pcg_setseq_128_xsl_rr_64_random_r, pcg_output_xsl_rr_128_64; numpy/random/src/pcg64/pcg64.c: pcg64_next_double;
numpy 2.x). tests/serving/test_serving_kernel_rng.py compares the stream drawn here with Generator.random's.

Through numba's Generator every draw is a call through the bit generator's function pointer, ~8 ns, serial on the
128-bit multiply chain (serving_scale.md, session 17: 15 % of an EAGLE fleet's loop). Here the K draws of one
decoding sequence are the states a^j s + c (a^(j-1) + ... + 1), j = 1 .. K, each from the sequence's starting state
by a precomputed jump (independent multiplies, no chain); the state then moves K steps by one jump. The draws
compared are the same doubles in the same order as Speculative.draw's (n, K) array, consumed row by row.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

MULTIPLIER = 2549297995355413924 * 2**64 + 4865540595714422341  # PCG_DEFAULT_MULTIPLIER_128 (pcg64.h)
MASK = 2**128 - 1


def pcg_table(rng: np.random.Generator, k: int) -> np.ndarray:
    """The compiled loops' draw state for K drafts a sequence: row 0 the Generator's current 128-bit state
    (high, low words), row j (1 .. K) the jump of j steps (a^j; c (a^(j-1) + ... + 1)), as (mult high, mult low,
    add high, add low) uint64 words. `rng` must be a PCG64 Generator (numpy's default_rng)."""
    state = rng.bit_generator.state
    if state["bit_generator"] != "PCG64":
        raise ValueError(f"speculative draws: a PCG64 Generator is needed, not {state['bit_generator']}")
    s, inc = state["state"]["state"], state["state"]["inc"]
    table = np.zeros((k + 1, 4), dtype=np.uint64)
    table[0, 0], table[0, 1] = s >> 64, s & (2**64 - 1)
    mult, add = 1, 0
    for j in range(1, k + 1):
        mult, add = (mult * MULTIPLIER) & MASK, (add * MULTIPLIER + inc) & MASK
        table[j] = (mult >> 64, mult & (2**64 - 1), add >> 64, add & (2**64 - 1))
    return table


def _wide(builder, hi, lo):
    """The 128-bit integer of two 64-bit words."""
    i128 = ir.IntType(128)
    return builder.or_(builder.shl(builder.zext(hi, i128), ir.Constant(i128, 64)), builder.zext(lo, i128))


@intrinsic
def jump(typingctx, s_hi, s_lo, m_hi, m_lo, c_hi, c_lo):
    """(m s + c) mod 2**128 of 128-bit values given as uint64 (high, low) words: a PCG64 jump."""
    u64 = types.uint64
    sig = types.UniTuple(u64, 2)(u64, u64, u64, u64, u64, u64)

    def codegen(context, builder, signature, args):
        s, m, c = _wide(builder, args[0], args[1]), _wide(builder, args[2], args[3]), _wide(builder, args[4], args[5])
        out = builder.add(builder.mul(s, m), c)
        i64, i128 = ir.IntType(64), ir.IntType(128)
        hi = builder.trunc(builder.lshr(out, ir.Constant(i128, 64)), i64)
        return context.make_tuple(builder, signature.return_type, (hi, builder.trunc(out, i64)))

    return sig, codegen


@intrinsic
def uniform(typingctx, hi, lo):
    """Generator.random's double of a PCG64 state (already stepped): XSL-RR of the state, >> 11, times 2**-53."""
    sig = types.float64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        h, lo64 = args
        x = builder.xor(h, lo64)
        rot = builder.lshr(h, ir.Constant(i64, 58))
        back = builder.and_(builder.sub(ir.Constant(i64, 0), rot), ir.Constant(i64, 63))
        out = builder.or_(builder.lshr(x, rot), builder.shl(x, back))
        top = builder.uitofp(builder.lshr(out, ir.Constant(i64, 11)), ir.DoubleType())
        return builder.fmul(top, ir.Constant(ir.DoubleType(), 1.0 / 9007199254740992.0))

    return sig, codegen


@njit(cache=True, inline="always")
def leading_below(s_hi, s_lo, pcg, acceptance):
    """Draw K = len(acceptance) uniforms from the state (s_hi, s_lo): (how many leading draws fall below their
    position's acceptance, draw x against acceptance[x], the state K steps on). All K are computed, without a
    branch on their outcome (a break at the first rejection costs its misprediction, ~20 ns a sequence, more than
    the draws: K = 3, 51 ns a sequence so, 14 ns without, 30 through numba's Generator). The caller keeps the
    state in locals across its draws (through pcg[0] each sequence's draws would wait on a store and a load: 8 ns
    a draw instead of 2.5, measured)."""
    k = len(acceptance)
    m, alive = 0, 1
    for x in range(k):
        hi, lo = jump(s_hi, s_lo, pcg[x + 1, 0], pcg[x + 1, 1], pcg[x + 1, 2], pcg[x + 1, 3])
        alive &= uniform(hi, lo) < acceptance[x]
        m += alive
    hi, lo = jump(s_hi, s_lo, pcg[k, 0], pcg[k, 1], pcg[k, 2], pcg[k, 3])
    return m, hi, lo


@njit(cache=True)
def stream(pcg, n):
    """n draws of the stream in order (one step at a time, by the table's first jump): for tests against
    Generator.random."""
    out = np.empty(n)
    for i in range(n):
        pcg[0, 0], pcg[0, 1] = jump(pcg[0, 0], pcg[0, 1], pcg[1, 0], pcg[1, 1], pcg[1, 2], pcg[1, 3])
        out[i] = uniform(pcg[0, 0], pcg[0, 1])
    return out
