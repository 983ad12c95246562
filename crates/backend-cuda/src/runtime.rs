//! [`RuntimeOps`] on the GPU: name and memory, search workers on their own
//! streams, and CUDA graphs.

use crate::CudaBackend;
use crate::device::driver_err;
use cudarc::driver::CudaGraph;
use polycert_deeppoly::{BResult, RuntimeOps};

impl RuntimeOps for CudaBackend {
    type Graph = CudaGraph;

    fn name(&self) -> String {
        format!("cuda ({})", self.dev.name)
    }

    fn memory_budget(&self) -> usize {
        self.budget.unwrap_or_else(|| self.dev.free_memory() / 3)
    }

    /// Four a GPU: a ReLU search's rounds are host work for the most part,
    /// so other workers' rounds run in one's gaps; more workers on one GPU grew
    /// the search's tree (measured: bench/results/2026-11-27-architecture-measurements.md).
    fn search_workers(&self) -> usize {
        4 * self.gpu_count()
    }

    /// A worker on the next GPU of the set, in turn (the same GPU where
    /// there is one).
    fn fork(&self) -> BResult<Option<Self>> {
        self.next_fork().map(Some)
    }

    /// Records the calls of `f` on this backend's stream as a CUDA graph.
    /// Not with cudarc's cross-stream events (a capture cannot hold them);
    /// a call that cannot be recorded (a sync, a host transfer) ends the
    /// capture and gives `None`, as does a stream that cannot be captured.
    /// Also `None` while workers share the context (`Device::shares_context`).
    fn capture(&self, f: &mut dyn FnMut() -> BResult<()>) -> BResult<Option<CudaGraph>> {
        let _span = self.trace.span("capture");
        if self.dev.ctx.is_event_tracking() || self.dev.shares_context() {
            return Ok(None);
        }
        let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        if self.dev.stream.begin_capture(mode).is_err() {
            let _ = self.dev.ctx.check_err();
            return Ok(None);
        }
        let recorded = f();
        let graph = self.dev.stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
        match (recorded, graph) {
            (Ok(()), Ok(g)) => Ok(g),
            _ => {
                // Clear what the failed capture left (errors of frees).
                let _ = self.dev.ctx.check_err();
                Ok(None)
            }
        }
    }

    fn replay(&self, g: &CudaGraph) -> BResult<()> {
        let _span = self.trace.span("replay");
        g.launch().map_err(|e| driver_err("graph launch", e))
    }
}
