"""Ceilings microbenchmarks: the read and copy kernels under the interpreter, sm_90 shared memory,
and the datasheet predictions."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on the CPU

import pytest  # noqa: E402
import torch  # noqa: E402

from roofline.validation.results_file import Case  # noqa: E402
from validate.common.sm90 import H100_SHARED_BYTES, shared_bytes  # noqa: E402
from validate.ops.ceilings import cases as family  # noqa: E402
from validate.ops.ceilings import kernel  # noqa: E402


@pytest.mark.parametrize(("n", "block"), [(1000, 128), (4096, 256), (77, 64)])
def test_read_kernel_sums(n: int, block: int) -> None:
    x = torch.rand(n, generator=torch.Generator().manual_seed(n)) + 0.5
    partial = torch.full(((n + block - 1) // block,), float("nan"))
    kernel.stream_sum(x, block, partial)
    assert not partial.isnan().any()
    assert partial.sum().item() == pytest.approx(x.double().sum().item(), rel=1e-5)


@pytest.mark.parametrize(("n", "block"), [(1000, 128), (77, 64)])
def test_copy_kernel_copies(n: int, block: int) -> None:
    x = torch.rand(n, generator=torch.Generator().manual_seed(n))
    y = torch.full_like(x, float("nan"))
    kernel.stream_copy(x, y, block)
    assert torch.equal(x, y)


def test_shared_memory_fits_h100() -> None:
    for r in shared_bytes(family.sm90_specs()):
        assert r["shared"] <= H100_SHARED_BYTES, r


def test_datasheet_predictions() -> None:
    from validate.model.hardware import load_hardware

    hw = load_hardware("H100-SXM")
    fam = family.Ceilings()
    read = fam.predict(Case("ceilings", "r", {"kind": "read", "bytes": 1 << 30, "dtype": "fp32"}), hw)
    assert read["time_s"] == pytest.approx((1 << 30) / 3.35e12)
    copy = fam.predict(Case("ceilings", "c", {"kind": "copy", "bytes": 1 << 30, "dtype": "fp32"}), hw)
    assert copy["bytes"] == 2 << 30
    gemm = fam.predict(Case("ceilings", "g", {"kind": "gemm", "dtype": "bf16", "size": 8192}), hw)
    assert gemm["time_s"] == pytest.approx(2 * 8192**3 / 989.4e12) and gemm["bound"] == "compute"
    launch = fam.predict(Case("ceilings", "l", {"kind": "launch", "launches": 1000}), hw)
    assert launch["time_s"] is None


def test_grid() -> None:
    cases = family.Ceilings().cases(quick=False)
    reads = [c.params["bytes"] for c in cases if c.params["kind"] == "read"]
    assert reads[0] == 1 << 20 and reads[-1] == 4 << 30
    assert {c.params["dtype"] for c in cases if c.params["kind"] == "gemm"} == {"bf16", "fp8"}
