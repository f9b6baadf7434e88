"""Which GPU kernels use tensor cores, told from their names.

Traces carry no tensor-core counter, so this is inferred from kernel names. Each family
below is a named pattern with an example of the kernels it covers. The reference plugin
only knew Volta/Turing cuDNN and cuBLAS names; this list adds Ampere and Hopper (xmma with
half/bf16/tf32/int8/fp8 operands, sm90 gmma/wgmma, CUTLASS tensorop, cuBLASLt nvjet),
flash and memory-efficient attention, and Inductor's Triton matmul templates. FP32 SIMT
kernels (`ffma`, `sgemm` without tf32) are excluded even when they come from xmma.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .names import name_mask


@dataclass(frozen=True)
class Family:
    name: str
    pattern: re.Pattern[str]
    example: str
    guess: bool = False  # true where the name alone cannot settle it


FAMILIES: tuple[Family, ...] = (
    Family("volta_turing_mma", re.compile(r"h884|s884|h1688|s1688|hmma|i8816|16816|16832|c1688|imma|dmma"),
           "volta_h884gemm_64x64_ldg8_nn"),
    Family("cudnn_legacy_tc", re.compile(r"dgrad_1x1_stride_2x2|first_layer_wgrad_kernel|conv1x1|conv2d_c1_k1|direct_group"),
           "cudnn::detail::dgrad_1x1_stride_2x2"),
    Family("xmma_tensor", re.compile(r"xmma_(?:sparse_)?(?:gemm|fprop|dgrad|wgrad|implicit_gemm|warp_specialized)"
                                     r"(?!\w*ffma)\w*?(?:f16|bf16|tf32|i8|e4m3|e5m2|fp8)"),
           "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc"),
    Family("hopper_gmma", re.compile(r"gmma|wgmma", re.IGNORECASE), "cutlass::device_kernel<GmmaWarpSpecialized>"),
    Family("cutlass_tensorop", re.compile(r"tensorop|wmma", re.IGNORECASE), "cutlass_80_tensorop_s1688gemm_128x128"),
    Family("cublaslt_nvjet", re.compile(r"nvjet"), "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"),
    Family("attention", re.compile(r"flash|fmha", re.IGNORECASE), "pytorch_flash::flash_fwd_kernel"),
    Family("triton_matmul_template", re.compile(r"^triton_tem_fused_\w*(?:mm|bmm|addmm|convolution)"),
           "triton_tem_fused_addmm_0", guess=True),
)

# FP32 SIMT kernels, and Inductor's pointwise/reduction kernels (named after the graph
# nodes they fuse, e.g. `triton_poi_fused__scaled_dot_product_flash_attention_3`), that a
# broad family pattern might otherwise catch.
_NOT_TENSOR = re.compile(r"ffma|sgemm(?!.*tf32)|_f32f32_f32f32_f32_(?!.*tf32)|^triton_(?:poi|red|per)_")


def tensor_core_family(kernel_name: str) -> Family | None:
    """The family that says this kernel uses tensor cores, or None."""
    if _NOT_TENSOR.search(kernel_name):
        return None
    for family in FAMILIES:
        if family.pattern.search(kernel_name):
            return family
    return None


def uses_tensor_cores(names: pd.Series) -> np.ndarray:
    """Per row of a categorical name column: True where the kernel uses tensor cores."""
    return name_mask(names, lambda name: tensor_core_family(name) is not None)


# Operators that can run on tensor cores (matrix products, convolutions, attention, RNN
# cells), by name. An operator that calls one of these, or launches a tensor-core kernel,
# is eligible too (optree.py propagates that). The reference plugin's list, taken from
# autocast's fp16 list, plus what PyTorch 2.x adds (scaled_mm, SDPA, convolution_backward).
TC_ELIGIBLE_OPS = frozenset({
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::convolution",
    "aten::convolution_backward", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::cudnn_convolution_backward", "aten::cudnn_convolution_backward_input",
    "aten::cudnn_convolution_backward_weight", "aten::cudnn_convolution_transpose_backward",
    "aten::cudnn_convolution_transpose_backward_input", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::prelu", "aten::addmm", "aten::addmm_", "aten::_addmm_activation", "aten::addmv", "aten::addr",
    "aten::matmul", "aten::mm", "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
    "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_scaled_mm", "aten::_int_mm", "aten::einsum",
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_backward", "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_efficient_attention_backward", "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_cudnn_attention_backward", "aten::_flash_attention_forward",
    "aten::_flash_attention_backward", "aten::_efficient_attention_forward", "aten::_efficient_attention_backward",
    "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell",
    "aten::rnn_tanh_cell", "aten::rnn_relu_cell",
    # Backward nodes of PyTorch 1.x traces, by their autograd function names.
    "CudnnConvolutionBackward", "CudnnConvolutionTransposeBackward", "BmmBackward0", "MmBackward",
    "AddmvBackward", "MvBackward", "AddmmBackward", "AddbmmBackward",
})


def is_tc_eligible_op(op_name: str) -> bool:
    """Whether an operator of this name can use tensor cores (by name alone)."""
    return op_name in TC_ELIGIBLE_OPS
