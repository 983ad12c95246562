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

    /// Four: a ReLU search's rounds are host work for the most part (with 4
    /// workers the GPU was busy 28% of the time on an H100), so other
    /// workers' rounds run in one's gaps. On an H100 with 16 cores, 60 s of
    /// resnet_4b prop_8 proved 25,369 / 31,712 / 29,918 leaves with 4 / 8 /
    /// 12 workers, but with 8, 256x4 prop_7_0.03 timed out at 300 s after
    /// 790,568 leaves, where 4 (an older build) had proved it in 291 s with
    /// 541,683: the search's tree grew (one run each).
    fn search_workers(&self) -> usize {
        4
    }

    fn fork(&self) -> BResult<Option<Self>> {
        self.worker().map(Some)
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
