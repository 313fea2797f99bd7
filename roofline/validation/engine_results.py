"""Published engine benchmark runs as data: one file per source run (`validate/results/engines/public/*.json`).

A record says what ran (engine and version, GPU and count, tp, model, weight and KV dtypes), how it was driven
(the benchmark client's dataset, lengths, prompts, request rate or max concurrency, and the engine flags that
change scheduling: prefix caching, `max_num_seqs`, `max_num_batched_tokens`, eager mode), what it printed
(TTFT / TPOT / ITL mean, median, p99; request and output throughput; duration) and where it was published
(URL, repository, issue or PR number, date, and the quoted lines the figures are copied from).

Latencies stay in milliseconds (`*_ms`) because that is how `vllm bench serve` and `sglang.bench_serving`
print them ("Mean TPOT (ms)"), so every figure is the published digits, never a conversion.
`catalogue_model` / `catalogue_hardware` name roofline's catalogue entries the run maps to; `None` where the
catalogue lacks the device (the record is kept: another branch adds devices). Every setting the source does
not state but the prediction needs is written in `assumptions`, one sentence each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from roofline.catalogue.loading import parse_json_object, read_text, validate
from roofline.errors import SpecError
from roofline.specs.base import Spec
from roofline.specs.workload import WeightDtype


class Engine(Spec):
    """The serving engine that produced the figures."""

    name: Literal["vllm", "sglang"] = Field(description="Engine name.")
    version: str = Field(min_length=1, description="Version, image tag or commit as the source states it.")
    release: str | None = Field(pattern=r"^\d+\.\d+(\.\d+)?$",
                                description="The release number (e.g. 0.11.0) where the source gives one, else None: "
                                            "it selects the engine's scheduling defaults.")


class Deployment(Spec):
    """What ran: GPU, parallelism, model and dtypes."""

    hardware_as_published: str = Field(min_length=1, description="The GPU as the source names it.")
    catalogue_hardware: str | None = Field(description="roofline catalogue device; None if not in the catalogue.")
    gpus: PositiveInt = Field(description="GPUs serving the model (tp x pp).")
    tp: PositiveInt = Field(description="Tensor-parallel degree.")
    pp: PositiveInt = Field(1, description="Pipeline-parallel stages.")
    model_as_published: str = Field(min_length=1, description="Model id as the source names it.")
    catalogue_model: str = Field(min_length=1, description="roofline catalogue model with the same architecture.")
    weight_dtype: WeightDtype = Field(description="Storage dtype of the weights (AWQ/GPTQ 4-bit: int4).")
    expert_weight_dtype: WeightDtype | None = Field(
        None, description="Storage dtype of the routed experts where it differs (gpt-oss ships mxfp4 experts).")
    kv_cache_dtype: Literal["bf16", "fp16", "fp8"] = Field(description="KV-cache dtype (vLLM 'auto' = model dtype).")

    @model_validator(mode="after")
    def _gpus_cover_parallelism(self) -> Deployment:
        if self.gpus != self.tp * self.pp:
            raise ValueError(f"gpus: {self.gpus} must equal tp x pp = {self.tp * self.pp}")
        return self


class Benchmark(Spec):
    """How the run was driven: the client's workload and the engine flags that shape scheduling."""

    kind: Literal["serve"] = Field(description="serve: an online client (vllm bench serve / bench_serving).")
    client: str = Field(min_length=1, description="The benchmark client as the source runs it.")
    dataset: Literal["random", "sharegpt"] = Field(description="Prompt source of the client.")
    input_tokens: PositiveFloat = Field(
        description="Prompt tokens per request: the fixed length (random) or the run's mean (total / requests).")
    output_tokens: PositiveFloat = Field(description="Output tokens per request: fixed, or the run's mean.")
    lengths_fixed: bool = Field(description="True when every request has exactly these lengths (random, ignore-eos).")
    num_prompts: PositiveInt = Field(description="Requests sent.")
    request_rate_per_s: PositiveFloat | None = Field(description="Poisson rate; None = all at once (inf).")
    max_concurrency: PositiveInt | None = Field(description="Client's cap on requests in flight; None = none.")
    prefix_caching: bool | None = Field(description="Engine prefix caching; None where the source does not say.")
    max_num_seqs: PositiveInt | None = Field(description="Engine --max-num-seqs; None = the engine's default.")
    max_num_batched_tokens: PositiveInt | None = Field(description="Engine --max-num-batched-tokens; None = default.")
    enforce_eager: bool = Field(False, description="Engine ran without CUDA graphs (--enforce-eager).")
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="Engine --gpu-memory-utilization; None = the engine's default for the "
        "release (vLLM 0.92 from 0.20, 0.90 before; no release: current).")
    command: str = Field(min_length=1, description="The server and client commands, or the settings, as quoted.")


class Stat(Spec):
    """One latency metric's mean / median / p99 in milliseconds, as printed (None where not printed)."""

    mean_ms: NonNegativeFloat | None = Field(None, description="Mean, ms.")
    median_ms: NonNegativeFloat | None = Field(None, description="Median, ms.")
    p99_ms: NonNegativeFloat | None = Field(None, description="99th percentile, ms.")


class Outputs(Spec):
    """The published figures."""

    ttft: Stat = Field(description="Time to first token.")
    tpot: Stat = Field(description="Time per output token, excluding the first (per request, then aggregated).")
    itl: Stat = Field(default_factory=Stat, description="Inter-token latency.")
    request_throughput_per_s: PositiveFloat | None = Field(None, description="Requests per second.")
    output_throughput_tokens_per_s: PositiveFloat | None = Field(None, description="Output tokens per second.")
    duration_s: PositiveFloat | None = Field(None, description="Benchmark duration, s.")

    @model_validator(mode="after")
    def _has_a_judged_figure(self) -> Outputs:
        judged = (self.tpot.mean_ms, self.tpot.median_ms, self.itl.mean_ms, self.output_throughput_tokens_per_s)
        if all(v is None for v in judged):
            raise ValueError("tpot: a record needs TPOT (mean or median), ITL mean or output throughput: "
                             "the figures it is judged on")
        return self


class Source(Spec):
    """Where the figures were published."""

    url: str = Field(pattern=r"^https://", description="Link to the issue / PR / page.")
    repository: str | None = Field(pattern=r"^[\w.-]+/[\w.-]+$",
                                   description="owner/name of the GitHub repository; None for a web page.")
    number: PositiveInt | None = Field(None, description="Issue or pull-request number (a thread's figures).")
    path: str | None = Field(None, min_length=1, description="File in the repository (a committed document's figures).")
    commit: str | None = Field(None, pattern=r"^[0-9a-f]{40}$", description="Commit of `path` the quote was read at.")
    author: str = Field(min_length=1, description="Who posted the figures.")
    date: str | None = Field(pattern=r"^\d{4}-\d{2}-\d{2}$",
                             description="Date of the post (YYYY-MM-DD); None where the source shows none.")
    quote: str = Field(min_length=40, description="The lines the figures are copied from, verbatim.")

    @model_validator(mode="after")
    def _locates_the_figures(self) -> Source:
        if self.repository is not None and self.number is None and (self.path is None or self.commit is None):
            raise ValueError("number: give the issue / PR number, or the file's path and commit")
        return self


class PublishedRun(Spec):
    """One published benchmark run (see the module docstring)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$", description="Short name = the file's stem.")
    engine: Engine = Field(description="Engine and version.")
    deployment: Deployment = Field(description="GPU, parallelism, model, dtypes.")
    benchmark: Benchmark = Field(description="Client workload and engine flags.")
    outputs: Outputs = Field(description="Published figures.")
    source: Source = Field(description="Citation.")
    control: bool = Field(description="True for an H100/H200 run kept as a control beside the other GPUs.")
    assumptions: tuple[str, ...] = Field((), description="Settings the source does not state, one sentence each.")

    @model_validator(mode="after")
    def _consistent(self) -> PublishedRun:
        hw = self.deployment.hardware_as_published.upper()
        if self.control != ("H100" in hw or "H200" in hw):
            raise ValueError("control: true exactly for H100 / H200 runs")
        for value, figure in ((self.benchmark.input_tokens, "input_tokens"),
                              (self.benchmark.output_tokens, "output_tokens")):
            if self.benchmark.lengths_fixed and value != int(value):
                raise ValueError(f"benchmark.{figure}: fixed lengths are whole tokens, got {value}")
        return self


def load_run(path: Path) -> PublishedRun:
    """Read one record; a bad file is one SpecError line naming the file and the field. The name must equal
    the file's stem, and the catalogue names must exist (an unknown name is an error, never skipped)."""
    from roofline.catalogue.store import hardware_names, model_names

    where = path.name
    run = validate(PublishedRun, parse_json_object(read_text(path), where), where)
    if run.name != path.stem:
        raise SpecError(f"{where}: name: {run.name!r} must equal the file's stem {path.stem!r}")
    if run.deployment.catalogue_model not in model_names():
        raise SpecError(f"{where}: deployment.catalogue_model: {run.deployment.catalogue_model!r} is not in models/")
    hw = run.deployment.catalogue_hardware
    if hw is not None and hw not in hardware_names():
        raise SpecError(f"{where}: deployment.catalogue_hardware: {hw!r} is not in hardware/")
    return run


def load_runs(folder: Path) -> list[PublishedRun]:
    """Every `*.json` record in `folder`, sorted by name; an empty or missing folder is an error."""
    if not folder.is_dir():
        raise SpecError(f"{folder}: (folder): no such folder of published runs")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise SpecError(f"{folder}: (folder): holds no *.json published runs")
    return [load_run(p) for p in files]
