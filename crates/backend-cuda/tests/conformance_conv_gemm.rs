//! The shared backend conformance suite again, with every conv step on the
//! GEMM path (`with_conv_direct_max(0)`): the default suite's small nets
//! take the one-kernel path. Ignored unless built to run on a GPU.
polycert_deeppoly::backend_conformance_tests!(
    #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
    match polycert_backend_cuda::test_backend() {
        Some(b) => b.with_conv_direct_max(0),
        None => return,
    }
);
