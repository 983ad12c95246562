//! The shared backend conformance suite, on the CUDA backend (skips
//! without a GPU).
polycert_deeppoly::backend_conformance_tests!(match polycert_backend_cuda::test_backend() {
    Some(b) => b,
    None => return,
});
