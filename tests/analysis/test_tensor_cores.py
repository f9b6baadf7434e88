"""Tensor-core kernels told from names (server/analysis/tensor_cores.py).

Names come from real traces (the H100/V100 fixtures, cuBLAS/cuDNN/CUTLASS/Inductor output)
unless a comment says otherwise.
"""

from __future__ import annotations

import pandas as pd
import pytest

from profboard.server.analysis.tensor_cores import FAMILIES, tensor_core_family, uses_tensor_cores

# One real kernel name per family; it must be claimed by that family (not just by any).
REAL_NAME_BY_FAMILY = {
    # V100 cuDNN fp16 (the reference plugin's own tensor-core test kernel)
    "volta_turing_mma": "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1",
    # NVIDIA's tensor-core kernel list (PyProf / TF profiler) names this Volta cuDNN kernel
    "cudnn_legacy_tc": "void cudnn::detail::dgrad_1x1_stride_2x2<float>(float const*, float*)",
    # H100 fp32 model with TF32 allowed: cuDNN implicit-GEMM forward
    "xmma_tensor": "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32_"
                   "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
    # H100 cuDNN fused SDPA (warp-group MMA)
    "hopper_gmma": "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
    # A100 cuBLAS bf16 WMMA GEMM
    "cutlass_tensorop": "void cutlass::Kernel<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
                        "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)",
    # H100 cuBLASLt bf16 GEMM (gpt_big_bf16 fixture)
    "cublaslt_nvjet": "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
    # FlashAttention-2 as vendored in PyTorch
    "attention": "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
                 "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, "
                 "false, false, true, true, false>(pytorch_flash::Flash_fwd_params)",
    # Inductor max-autotune matmul template
    "triton_matmul_template": "triton_tem_fused_addmm_relu_0",
}

MORE_POSITIVES = {
    "hopper-cutlass-gmma": "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
                           "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized"
                           "Cooperative<4, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> > > > > >(Params)",
    "cudnn-sdpa-backward-wgmma": "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_"
                                 "cga1x1x1_kernel0_0",
    "a100-cutlass-s1688-tf32": "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
                               "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
    "a100-cublas-h16816": "ampere_h16816gemm_256x128_ldg8_stages_64x3_nt",
    "a100-xmma-tf32-fprop": "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x64x32_stage5_"
                            "warpsize2x2x1_g1_tensor16x8x8_execute_kernel__5x_cudnn",
    "h100-xmma-tf32-gemm": "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
                           "segment_k_off_kernel__5x_cublas",
    "mem-efficient-attention": "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
                               "cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
    "inductor-mm-template": "triton_tem_fused_mm_0",
    "v100-cublas-h884": "volta_h884gemm_64x64_ldg8_nn",
}

NEGATIVES = {
    "ampere-sgemm": "ampere_sgemm_128x64_nn",
    "xmma-fp32-ffma": "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_"
                      "execute_kernel__5x_cublas",
    "xmma-fp32-ffma-conv": "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_"
                           "warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
    "xmma-complex-ffma": "sm80_xmma_gemm_cf32cf32_f32f32_cf32_tn_n_tilesize32x32x8_stage3_warpsize2x2x1_ffma_aligna8_"
                         "alignc8_execute_kernel__5x_cublas",
    "cask-init-workspace-short": "cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel",
    "cask-init-workspace": "void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::"
                           "implicit_gemm::dgrad::Warp_specialized_params_nontemplate<xmma__5x_cudnn::Grid_constant_"
                           "params> >(xmma__5x_cudnn::implicit_gemm::dgrad::Warp_specialized_params_nontemplate<"
                           "xmma__5x_cudnn::Grid_constant_params>)",
    "elementwise-fill": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                        "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
    "elementwise-copy": "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
                        "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
                        "const::{lambda()#7}::operator()() const::{lambda(float)#1}> >(int, float)",
    "reduce": "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
              "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
              "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
              "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
              "unsigned int, float, 4>)",
    "triton-pointwise": "triton_poi_fused__native_batch_norm_legit_functional_add_relu_17",
    "triton-pointwise-addmm-epilogue": "triton_poi_fused_addmm_relu_0",
    "triton-persistent-reduction": "triton_per_fused__native_batch_norm_legit_functional_copy__11",
    "triton-reduction": "triton_red_fused__native_batch_norm_legit_functional_10",
    "triton-reduction-conv-backward": "triton_red_fused_convolution_backward_div_expand_native_batch_norm_backward_"
                                      "threshold_backward_view_2",
    "v100-sgemm": "volta_sgemm_128x32_nt",
    "v100-scudnn": "volta_scudnn_128x64_relu_interior_nn_v1",
    "cutlass-simt-sgemm": "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
                          "(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
    "cublas-gemv": "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 6, 7, false>(float const*)",
    "cudnn-implicit-sgemm": "void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int)",
    "cudnn-batch-norm": "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
    "nccl": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "cublaslt-epilogue": "void cublasLt::epilogue::impl::globalKernel<8, 32, float, float, float, true, true, 1>(int, int)",
}


def test_every_family_has_a_real_name_here():
    assert sorted(REAL_NAME_BY_FAMILY) == sorted(f.name for f in FAMILIES)


@pytest.mark.parametrize("family", [pytest.param(f, id=f.name) for f in FAMILIES])
def test_family_claims_a_real_kernel(family):
    found = tensor_core_family(REAL_NAME_BY_FAMILY[family.name])
    assert found is not None and found.name == family.name


@pytest.mark.parametrize("family", [pytest.param(f, id=f.name) for f in FAMILIES])
def test_family_example_is_a_tensor_core_kernel(family):
    # Only "some family": cutlass_tensorop's example (..._tensorop_s1688gemm_...) is claimed first by
    # volta_turing_mma's `s1688`, which is as good an answer.
    assert tensor_core_family(family.example) is not None


@pytest.mark.parametrize("name", [pytest.param(n, id=k) for k, n in MORE_POSITIVES.items()])
def test_more_tensor_core_kernels(name):
    assert tensor_core_family(name) is not None


@pytest.mark.parametrize("name", [pytest.param(n, id=k) for k, n in NEGATIVES.items()])
def test_not_tensor_core(name):
    assert tensor_core_family(name) is None


@pytest.mark.parametrize("name", [
    pytest.param("triton_poi_fused__scaled_dot_product_flash_attention_3", id="inductor-sdpa-prep"),
    pytest.param("triton_poi_fused__scaled_dot_product_flash_attention__unsafe_view_clone_slice_transpose_view_6",
                 id="inductor-sdpa-prep-long"),
])
def test_inductor_pointwise_named_after_flash_attention_is_not_tensor_core(name):
    assert tensor_core_family(name) is None


def test_ampere_int8_imma_gemm_is_tensor_core():
    assert tensor_core_family("ampere_int8_i16832gemm_int8_256x128_ldg16_relu_mods_stages_64x3_nt") is not None


def test_uses_tensor_cores_per_row_of_a_categorical():
    names = pd.Series(pd.Categorical([
        REAL_NAME_BY_FAMILY["cublaslt_nvjet"], NEGATIVES["ampere-sgemm"], None,
        REAL_NAME_BY_FAMILY["cublaslt_nvjet"], NEGATIVES["triton-pointwise"],
    ]))
    # a missing name (code -1) is not a tensor-core kernel
    assert uses_tensor_cores(names).tolist() == [True, False, False, True, False]


def test_uses_tensor_cores_on_empty_column():
    assert uses_tensor_cores(pd.Series(pd.Categorical([]))).tolist() == []
