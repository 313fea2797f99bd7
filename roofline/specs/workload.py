"""Workload: what is asked of the deployment (batch, lengths, dtypes, parallelism, memory policy)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from roofline.gguf_quant import WEIGHT_DTYPES as GGUF_WEIGHT_DTYPES
from roofline.specs.base import Spec

# Bounded domains (the CLI flags have the same caps): every planner expression is evaluated inside them.
MAX_CONTEXT_TOKENS = 1 << 30
MAX_BATCH = 1 << 20
MAX_GPUS = 1 << 20
# the host speed's bound (Workload.host_speed, the CLI's --host-speed, the dashboard's box) and what it is, for their
# help texts: a host a hundred times the profile's already leaves no host work worth a figure
HOST_SPEED_MAX = 100.0
HOST_SPEED_HELP = ("the host CPU's speed against the one the engine's time profile was measured on: its host work "
                   "(scheduling, launches, the API server) is divided by this (default 1; measure: 16.63 ms / your "
                   "tiny vLLM server's median TTFT at concurrency 1, validate/engines/serve_tiny.sh; it times the API "
                   "server's path: an MoE's eager prefills, launched by the engine core's process, read 8-32 %% slower "
                   "than it implies on two of three H200 leases, runs 22 / 29)")

# mxfp4: fp4 + one e8m0 scale per 32 (4.25 bits); nvfp4: fp4 + one fp8 scale per 16 (4.5 bits)
ExpertWeightDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "nvfp4"]
# and llama-quantize's presets (gguf:Q4_K_M ...: roofline.gguf_quant), the whole model's per-tensor types
WeightDtype = Literal[(*ExpertWeightDtype.__args__, *GGUF_WEIGHT_DTYPES)]  # type: ignore[valid-type]
Engine = Literal["ideal", "vllm", "sglang", "trtllm", "llamacpp"]
GGUF_ENGINES = ("llamacpp", "ideal")
# the engines' quantized formats llama.cpp has no ggml type for (it loads GGUF files: MXFP4 is one, gpt-oss's experts)
NOT_GGML = ("int4", "int8", "fp8", "nvfp4")


class Workload(Spec):
    """Batch, lengths and parallelism of one serving scenario.

    `context_tokens` is the sequence length each request reaches (prompt + generated); a decode step
    "at context L" attends over L cached tokens.
    """

    batch: PositiveInt = Field(1, le=MAX_BATCH, description="Concurrent sequences B.")
    context_tokens: PositiveInt = Field(le=MAX_CONTEXT_TOKENS,
                                        description="Sequence length L per request (prompt + generated).")
    prompt_tokens: PositiveInt | None = Field(
        None, description="Prompt length P prefilled at once; default L - generated_tokens."
    )
    generated_tokens: NonNegativeInt = Field(0, description="Tokens decoded per request (for averaged TPOT).")
    weight_dtype: WeightDtype = Field(
        "bf16", description="Storage dtype of the weights; on a model without a quantization_config fp8, int8, int4, "
        "mxfp4 and nvfp4 store the linear matrices in the dtype's usual format with its scales, the embedding, LM "
        "head and norms at bf16 (roofline.planned_weights).")
    expert_weight_dtype: ExpertWeightDtype | None = Field(
        None, description="Storage dtype of the routed experts' weights (gpt-oss ships MXFP4 experts beside bf16 "
        "attention); None: weight_dtype. Shared experts, the router and dense MLPs keep weight_dtype.")
    compute_dtype: Literal["bf16", "fp16", "fp8", "fp32"] = Field(
        "bf16", description="Dtype of the matrix math (selects the peak and the ridge point)."
    )
    activation_bytes: PositiveInt = Field(2, description="Bytes per activation element (2 for bf16).")
    tp: PositiveInt = Field(1, le=MAX_GPUS, description="Tensor-parallel degree.")
    pp: PositiveInt = Field(1, le=MAX_GPUS, description="Pipeline-parallel stages.")
    ep: PositiveInt = Field(
        1, le=MAX_GPUS, description="Expert-parallel degree: ep data-parallel replicas of tp GPUs each (every one "
        "serving its own `batch` sequences) share the routed experts, E/ep per replica, tokens dispatched and "
        "combined by all-to-all (vLLM --data-parallel-size ep --enable-expert-parallel); 1: no expert parallelism.")
    micro_batches: PositiveInt = Field(1, description="Micro-batches in flight through the pipeline.")
    prefill_chunk_tokens: PositiveInt | None = Field(
        None, description="Chunked-prefill size (tokens per prefill pass); None: the whole prompt at once."
    )
    gpu_memory_utilization: float | None = Field(
        None, gt=0.0, le=1.0, description="Fraction of device memory the engine may use; None: the engine's own "
        "default (vLLM 0.92 since 0.20, SGLang's rule by GPU memory, TensorRT-LLM 0.9, the planner's 0.90: "
        "roofline.engines.default_utilization)."
    )
    kv_cache_memory_bytes: PositiveInt | None = Field(
        None, le=1 << 50, description="The KV pool per GPU in bytes (vLLM --kv-cache-memory-bytes): replaces the "
        "engine's budget rule, so gpu_memory_utilization no longer sizes the pool; None: the engine's rule.")
    runtime_reserve_bytes: NonNegativeInt | None = Field(
        None, le=1 << 60, description="CUDA context, allocator and communication buffers; None: the planner's default."
    )
    page_tokens: PositiveInt = Field(16, description="KV pages hold this many tokens (vLLM block size 16).")
    fusion: Literal["none", "typical", "full"] = Field(
        "typical", description="Kernels each op launches (roofline.costmodel.fusion): 'none' eager PyTorch, 'typical' "
        "vLLM/SGLang's fused norms and activations, 'full' torch.compile; each kernel pays the device's per-kernel "
        "time when its measured section has one.")
    engine: Engine = Field(
        "ideal", description="Whose memory conventions size the KV pool (roofline.engines); 'ideal': the planner's.")
    host_speed: float = Field(
        1.0, gt=0.0, le=HOST_SPEED_MAX, description="The host CPU's speed against the one the engine's time profile "
        "was measured on (roofline.engines.timing mechanism 11): its host work is divided by this; 1: that host.")

    @model_validator(mode="after")
    def _lengths_consistent(self) -> Workload:
        if self.generated_tokens >= self.context_tokens:
            raise ValueError(
                f"generated_tokens: {self.generated_tokens} must be below context_tokens {self.context_tokens}"
            )
        if self.prompt_tokens is not None and self.prompt_tokens + self.generated_tokens > self.context_tokens:
            raise ValueError(
                "prompt_tokens: prompt_tokens + generated_tokens must not exceed context_tokens "
                f"({self.prompt_tokens} + {self.generated_tokens} > {self.context_tokens})"
            )
        if self.tp * self.pp * self.ep > MAX_GPUS:
            raise ValueError(f"ep: tp x pp x ep = {self.tp * self.pp * self.ep:,} GPUs exceeds the limit {MAX_GPUS:,}")
        if self.micro_batches > self.batch:
            raise ValueError(f"micro_batches: {self.micro_batches} exceeds batch {self.batch}")
        if self.weight_dtype in GGUF_WEIGHT_DTYPES:
            self._check_gguf()
        elif self.engine == "llamacpp":
            dtypes = (("weight_dtype", self.weight_dtype), ("expert_weight_dtype", self.expert_weight_dtype))
            for field, dtype in dtypes:
                if dtype in NOT_GGML:
                    raise ValueError(f"{field}: {dtype} is not a format llama.cpp loads (its weights are ggml types: "
                                     "give a GGUF file type, e.g. gguf:Q4_K_M or gguf:Q8_0, or bf16 / fp16)")
        return self

    def _check_gguf(self) -> None:
        """A GGUF preset is llama.cpp's file type: planned under engine llamacpp (or ideal, the physical bound); its
        per-tensor types cover the experts too."""
        if self.engine not in GGUF_ENGINES:
            raise ValueError(f"weight_dtype: {self.weight_dtype} is a llama.cpp GGUF file type; engine {self.engine} "
                             "loading GGUF is not modelled (use engine llamacpp or ideal)")
        if self.expert_weight_dtype is not None:
            raise ValueError(f"expert_weight_dtype: {self.weight_dtype} sets every tensor's type, the experts' too")

    @property
    def prompt(self) -> int:
        """P: the prompt length (default: the context less the generated tokens)."""
        return self.prompt_tokens if self.prompt_tokens is not None else self.context_tokens - self.generated_tokens

    @property
    def gpus(self) -> int:
        """GPUs the workload spans: tp x pp x ep (ep replicas of the tp x pp layout, sharing the experts)."""
        return self.tp * self.pp * self.ep

    @property
    def expert_dtype(self) -> str:
        """Storage dtype of the routed experts: expert_weight_dtype, else weight_dtype."""
        return self.expert_weight_dtype or self.weight_dtype
