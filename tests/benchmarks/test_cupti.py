"""benchmarks.gpu.cupti's kernel kinds: what pass_probe's per-kind GPU time adds up, from the
names CUPTI reports for ONNX Runtime's, cuBLAS's and CUTLASS's kernels (the timing itself needs
CUDA and runs on the GPU machine)."""

from __future__ import annotations

import pytest

from benchmarks.gpu import cupti


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<", "attention"),
        ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false", "attention"),
        ("void onnxruntime::contrib::attention_softmax_cuda::SoftmaxKernelSmall<", "attention"),
        ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopB_NNT", "matmul"),
        ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "matmul"),
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", "matmul"),
        ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __half", "matmul"),
        ("void onnxruntime::contrib::cuda::SkipLayerNormKernelSmall<__half, float, __half", "norm"),
        ("void onnxruntime::contrib::cuda::RotaryEmbeddingBSNH<__half>(__half*, __half const*", "rotary"),
        ("void onnxruntime::cuda::_SplitKernelSameSplitDim<int>(onnxruntime::cuda::fast_divmod", "layout"),
        ("void onnxruntime::cuda::_GatherKernel<float>(long, long, long", "layout"),
        ("void onnxruntime::contrib::cuda::FastGeluKernel<__half, 256>(__half", "elementwise"),
        ("void onnxruntime::cuda::_BinaryElementWiseSimple<true, true, __half, __half", "elementwise"),
    ],
)
def test_each_kernel_gets_its_kind(name, kind):
    assert cupti.kernel_kind(name) == kind


def test_kinds_add_up_every_kernel_largest_first():
    kernels = [
        ("nvjet_hsh_256x128", 2.0, 56),
        ("fmha_cutlassF_f16_aligned", 1.5, 28),
        ("sm90_xmma_gemm_f16f16", 0.5, 28),
        ("SkipLayerNormKernelSmall", 0.25, 57),
        ("_BinaryElementWiseSimple", 0.125, 10),
    ]
    kinds = cupti.by_kind(kernels)
    assert kinds == {"matmul": 2.5, "attention": 1.5, "norm": 0.25, "elementwise": 0.125}
    assert list(kinds) == ["matmul", "attention", "norm", "elementwise"]
