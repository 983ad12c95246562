//! The shared backend conformance suite, on the CUDA backend: ignored
//! unless built to run on a GPU (`cargo xtask gpu-prepare`, see
//! `build/test_cfg.rs`), where a missing GPU fails it.
polycert_deeppoly::backend_conformance_tests!(
    #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
    match polycert_backend_cuda::test_backend() {
        Some(b) => b,
        None => return,
    }
);
