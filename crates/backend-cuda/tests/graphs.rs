//! CUDA graphs are recorded only while a backend has its context to itself
//! (`Device::shares_context`); skips without a GPU.
use polycert_backend_cuda::CudaBackend;
use polycert_deeppoly::{InferOps, MemoryOps, Pointwise, RuntimeOps};

/// Records one copy kernel: whether a graph came back.
fn records(be: &CudaBackend) -> bool {
    let x = MemoryOps::<f32>::upload(be, &[1.0, 2.0]).expect("upload");
    let g = RuntimeOps::capture(be, &mut || InferOps::<f32>::pointwise(be, Pointwise::Copy(&x)).map(drop));
    g.expect("capture").is_some()
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: cargo xtask gpu-prepare builds it to run")]
fn no_graph_while_workers_share_the_context() {
    let Some(be) = polycert_backend_cuda::test_backend() else { return };
    assert!(!be.device().shares_context());
    assert!(records(&be), "alone, the copy is recorded");
    let w = be.worker().expect("worker");
    assert!(be.device().shares_context() && w.device().shares_context());
    assert!(!records(&be) && !records(&w), "no graph while a worker shares the context");
    drop(w);
    assert!(!be.device().shares_context());
    assert!(records(&be), "recorded again once the worker is gone");
}
