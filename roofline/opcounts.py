"""Vector FLOPs per element of the elementwise ops, shared by the op graph and the methods.

RMSNorm: square, sum, scale, weight (4). RoPE: x*cos + rot(x)*sin (3). SiLU-gated product: x*sigmoid(x)
(~4) times up (1). Online softmax per score: max, subtract, exp, sum, rescale (5). Residual add (1).
"""

NORM_FLOPS = 4
ROPE_FLOPS = 3
GATED_ACT_FLOPS = 5
SOFTMAX_FLOPS = 5
ADD_FLOPS = 1
