// FPNA instruments (`polycert fpna`): the order in which thread blocks
// reach the last stage of a sum reduction, reduction variants with and
// without atomics, and a split-K dense layer whose sums end in atomicAdd.
// Not used by the analysis.

// Block-level tree sum of `x[lo..hi)` in shared memory (fixed order within
// the block); the result is valid in thread 0.
template <typename T>
__device__ T fpna_block_sum(const T* __restrict__ x, size_t lo, size_t hi) {
    extern __shared__ unsigned char fpna_smem[];
    T* s = reinterpret_cast<T*>(fpna_smem);
    T v = (T)0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) v += x[i];
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    return s[0];
}

// Single pass with an atomic last stage: every block adds its partial sum
// to `acc` with atomicAdd and records the value it returned (`before`) and
// a retirement ticket from atomicInc (`ticket`).
template <typename T>
__device__ void fpna_order(const T* __restrict__ x, size_t n, size_t chunk, T* acc, unsigned* counter,
                           T* __restrict__ before, unsigned* __restrict__ ticket) {
    size_t lo = (size_t)blockIdx.x * chunk, hi = min(n, lo + chunk);
    T p = fpna_block_sum<T>(x, lo, hi);
    if (threadIdx.x == 0) {
        before[blockIdx.x] = atomicAdd(acc, p);
        ticket[blockIdx.x] = atomicInc(counter, 0xffffffffu);
    }
}

// Deterministic two-pass: per-block partial sums, then one block sums them.
template <typename T>
__device__ void fpna_partials(const T* __restrict__ x, size_t n, size_t chunk, T* __restrict__ part) {
    size_t lo = (size_t)blockIdx.x * chunk, hi = min(n, lo + chunk);
    T p = fpna_block_sum<T>(x, lo, hi);
    if (threadIdx.x == 0) part[blockIdx.x] = p;
}

template <typename T>
__device__ void fpna_final(const T* __restrict__ part, size_t blocks, T* out) {
    T p = fpna_block_sum<T>(part, 0, blocks);
    if (threadIdx.x == 0) *out = p;
}

// Atomics only: every element is added to `acc` by its own atomicAdd.
template <typename T>
__device__ void fpna_atomic_all(const T* __restrict__ x, size_t n, T* acc) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(acc, x[i]);
}

// Split-K dense layer y[b][o] += Σ_{k in chunk} w[o][k]·x[b][k]: block
// c + chunks·(o + out·b), so that the chunks of one sum are launched together
// and race; `y` holds the bias beforehand. The chunks' atomicAdd order
// differs from run to run.
template <typename T>
__device__ void fpna_splitk_dense(const T* __restrict__ w, const T* __restrict__ x, T* y, size_t n_in,
                                  size_t n_out, size_t chunk) {
    extern __shared__ unsigned char fpna_smem[];
    T* s = reinterpret_cast<T*>(fpna_smem);
    size_t chunks = (n_in + chunk - 1) / chunk;
    size_t ob = blockIdx.x / chunks, o = ob % n_out, b = ob / n_out;
    size_t lo = (blockIdx.x % chunks) * chunk, hi = min(n_in, lo + chunk);
    T v = (T)0;
    for (size_t k = lo + threadIdx.x; k < hi; k += blockDim.x) v += w[o * n_in + k] * x[b * n_in + k];
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(&y[b * n_out + o], s[0]);
}

#define INSTANTIATE_FPNA(T, S)                                                                                  \
    extern "C" __global__ void fpna_order_##S(const T* x, size_t n, size_t chunk, T* acc, unsigned* counter,   \
                                              T* before, unsigned* ticket) {                                   \
        fpna_order<T>(x, n, chunk, acc, counter, before, ticket);                                              \
    }                                                                                                           \
    extern "C" __global__ void fpna_partials_##S(const T* x, size_t n, size_t chunk, T* part) {               \
        fpna_partials<T>(x, n, chunk, part);                                                                    \
    }                                                                                                           \
    extern "C" __global__ void fpna_final_##S(const T* part, size_t blocks, T* out) {                         \
        fpna_final<T>(part, blocks, out);                                                                       \
    }                                                                                                           \
    extern "C" __global__ void fpna_atomic_all_##S(const T* x, size_t n, T* acc) { fpna_atomic_all<T>(x, n, acc); } \
    extern "C" __global__ void fpna_splitk_dense_##S(const T* w, const T* x, T* y, size_t n_in, size_t n_out,  \
                                                     size_t chunk) {                                           \
        fpna_splitk_dense<T>(w, x, y, n_in, n_out, chunk);                                                      \
    }

INSTANTIATE_FPNA(float, f32)
INSTANTIATE_FPNA(double, f64)
