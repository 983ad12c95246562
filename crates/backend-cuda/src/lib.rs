//! The CUDA backend of polycert: GPUPoly's kernels (tiled interval GEMM,
//! windowed conv backsubstitution, ReLU step, concretization, row
//! compaction) compiled at run time by NVRTC from `kernels/*.cu` and driven
//! through cudarc. Not implemented yet: see the CUDA backend issue.
