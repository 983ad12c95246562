//! Several GPUs behind one backend: analysis workers and search forks go
//! to them in turn, each with its own stream on its GPU, so that one run
//! (or one search, whose forks share one open list) uses every GPU given.

use crate::device::Device;
use polycert_deeppoly::BackendError;
use std::collections::HashMap;
use std::sync::Mutex;

/// The GPUs of one backend and its workers.
pub struct GpuSet {
    /// CUDA ordinals, the backend's own first.
    ordinals: Vec<usize>,
    /// One opened device per other GPU (its context and kernels), whose
    /// new streams workers take.
    opened: Mutex<HashMap<usize, Device>>,
}

impl GpuSet {
    pub fn new(ordinals: &[usize]) -> Self {
        GpuSet { ordinals: ordinals.to_vec(), opened: Mutex::default() }
    }

    pub fn len(&self) -> usize {
        self.ordinals.len()
    }

    /// The ordinal of the `k`-th GPU, counted round the set.
    pub fn ordinal(&self, k: usize) -> usize {
        self.ordinals[k % self.ordinals.len()]
    }

    /// A fresh stream on GPU `ordinal` (opened on first use).
    pub fn stream_on(&self, ordinal: usize) -> Result<Device, BackendError> {
        let mut opened = self.opened.lock().map_err(|_| BackendError::Failure("GPU set poisoned".into()))?;
        match opened.entry(ordinal) {
            std::collections::hash_map::Entry::Occupied(d) => d.get().with_new_stream(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(Device::open(ordinal)?).with_new_stream(),
        }
    }
}

/// The GPUs the driver shows (after `CUDA_VISIBLE_DEVICES`).
pub fn visible_gpus() -> Result<usize, BackendError> {
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(BackendError::Unavailable("no CUDA driver (libcuda) found on this machine".into()));
    }
    let n = cudarc::driver::CudaContext::device_count()
        .map_err(|e| BackendError::Unavailable(format!("CUDA driver: {e:?}")))?;
    Ok(n.max(0) as usize)
}
