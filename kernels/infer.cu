// Batched point inference and gradients for the attack's search (never for
// a verdict): elementwise kernels over `total` values, points stacked.

template <typename T>
__device__ void infer_bias(T* __restrict__ y, const T* __restrict__ b, size_t n, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = b[i % n];
}

template <typename T>
__device__ void pw_relu(const T* __restrict__ x, T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[i] > (T)0 ? x[i] : (T)0;
}

template <typename T>
__device__ void pw_relu_grad(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[i] > (T)0 ? g[i] : (T)0;
}

template <typename T>
__device__ void pw_sigmoid(const T* __restrict__ x, T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = (T)1 / ((T)1 + exp(-x[i]));
}

template <typename T>
__device__ void pw_sigmoid_grad(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ out, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) out[i] = g[i] * y[i] * ((T)1 - y[i]);
}

template <typename T>
__device__ void pw_add(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = a[i] + b[i];
}

// y = x·m_j + c_j, with j the neuron within a point (tables of n values).
template <typename T>
__device__ void pw_scale(const T* __restrict__ x, const T* __restrict__ m, const T* __restrict__ c, size_t n,
                         T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[i] * m[i % n] + c[i % n];
}

// y = clamp(x − α·(hi − lo)·sign(g), lo, hi), sign(0) = 1, α = alpha[0]
// (read from memory, so that a recorded step can vary it).
template <typename T>
__device__ void pw_sign_step(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ lo,
                             const T* __restrict__ hi, const T* __restrict__ alpha_p, T* __restrict__ y,
                             size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    T alpha = alpha_p[0];
    T s = g[i] >= (T)0 ? (T)1 : (T)-1;
    T v = x[i] - alpha * (hi[i] - lo[i]) * s;
    v = v > lo[i] ? v : lo[i];
    y[i] = v < hi[i] ? v : hi[i];
}

// A bound's coefficients through a ReLU's lines: upper where g < 0, else lower.
template <typename T>
__device__ void pw_relax_back(const T* __restrict__ g, const T* __restrict__ up, const T* __restrict__ lo,
                              T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = g[i] < (T)0 ? g[i] * up[i] : g[i] * lo[i];
}

// The relaxed network along the lines pw_relax_back chose.
template <typename T>
__device__ void pw_relax_line(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ up,
                              const T* __restrict__ icpt, const T* __restrict__ lo, T* __restrict__ y,
                              size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = g[i] < (T)0 ? up[i] * x[i] + icpt[i] : lo[i] * x[i];
}

// pos where a >= 0, else neg.
template <typename T>
__device__ void pw_select(const T* __restrict__ a, const T* __restrict__ pos, const T* __restrict__ neg,
                          T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = a[i] >= (T)0 ? pos[i] : neg[i];
}

// g·x·free where g >= 0, else 0: the supergradient in the free lower slopes.
template <typename T>
__device__ void pw_slope_grad(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ free_,
                              T* __restrict__ y, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = g[i] >= (T)0 ? g[i] * x[i] * free_[i] : (T)0;
}

// y[k] = x[idx[k]]: a sparse download's gather (indices checked by the host).
template <typename T>
__device__ void gather(const T* __restrict__ x, const unsigned* __restrict__ idx, T* __restrict__ y, size_t k) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < k) y[i] = x[idx[i]];
}

// y[idx[k]] = v[k]: a sparse upload's scatter (indices checked by the host).
template <typename T>
__device__ void scatter(T* __restrict__ y, const unsigned* __restrict__ idx, const T* __restrict__ v, size_t k) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < k) y[idx[i]] = v[i];
}

// y[r·n + j] = x[rows[r]·n + j]: a table of per-slot rows repeated per
// output row (rows checked by the host).
template <typename T>
__device__ void repeat_rows(const T* __restrict__ x, const unsigned* __restrict__ rows, T* __restrict__ y, size_t n,
                            size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[(size_t)rows[i / n] * n + i % n];
}

#define INSTANTIATE_INFER(T, S)                                                                                 \
    extern "C" __global__ void infer_bias_##S(T* y, const T* b, size_t n, size_t total) {                      \
        infer_bias<T>(y, b, n, total);                                                                          \
    }                                                                                                           \
    extern "C" __global__ void pw_relu_##S(const T* x, T* y, size_t total) { pw_relu<T>(x, y, total); }        \
    extern "C" __global__ void pw_relu_grad_##S(const T* g, const T* x, T* y, size_t total) {                  \
        pw_relu_grad<T>(g, x, y, total);                                                                        \
    }                                                                                                           \
    extern "C" __global__ void pw_sigmoid_##S(const T* x, T* y, size_t total) { pw_sigmoid<T>(x, y, total); }  \
    extern "C" __global__ void pw_sigmoid_grad_##S(const T* g, const T* y, T* o, size_t total) {               \
        pw_sigmoid_grad<T>(g, y, o, total);                                                                     \
    }                                                                                                           \
    extern "C" __global__ void pw_add_##S(const T* a, const T* b, T* y, size_t total) {                        \
        pw_add<T>(a, b, y, total);                                                                              \
    }                                                                                                           \
    extern "C" __global__ void pw_scale_##S(const T* x, const T* m, const T* c, size_t n, T* y, size_t total) { \
        pw_scale<T>(x, m, c, n, y, total);                                                                      \
    }                                                                                                           \
    extern "C" __global__ void pw_sign_step_##S(const T* x, const T* g, const T* lo, const T* hi,              \
                                                const T* alpha, T* y, size_t total) {                           \
        pw_sign_step<T>(x, g, lo, hi, alpha, y, total);                                                         \
    }                                                                                                           \
    extern "C" __global__ void pw_relax_back_##S(const T* g, const T* up, const T* lo, T* y, size_t total) {   \
        pw_relax_back<T>(g, up, lo, y, total);                                                                  \
    }                                                                                                           \
    extern "C" __global__ void pw_relax_line_##S(const T* x, const T* g, const T* up, const T* icpt,           \
                                                 const T* lo, T* y, size_t total) {                             \
        pw_relax_line<T>(x, g, up, icpt, lo, y, total);                                                         \
    }                                                                                                           \
    extern "C" __global__ void pw_select_##S(const T* a, const T* pos, const T* neg, T* y, size_t total) {     \
        pw_select<T>(a, pos, neg, y, total);                                                                    \
    }                                                                                                           \
    extern "C" __global__ void pw_slope_grad_##S(const T* g, const T* x, const T* f, T* y, size_t total) {     \
        pw_slope_grad<T>(g, x, f, y, total);                                                                    \
    }                                                                                                           \
    extern "C" __global__ void gather_##S(const T* x, const unsigned* idx, T* y, size_t k) {                   \
        gather<T>(x, idx, y, k);                                                                                \
    }                                                                                                           \
    extern "C" __global__ void scatter_##S(T* y, const unsigned* idx, const T* v, size_t k) {                  \
        scatter<T>(y, idx, v, k);                                                                               \
    }                                                                                                           \
    extern "C" __global__ void repeat_rows_##S(const T* x, const unsigned* rows, T* y, size_t n, size_t total) { \
        repeat_rows<T>(x, rows, y, n, total);                                                                   \
    }

INSTANTIATE_INFER(float, f32)
INSTANTIATE_INFER(double, f64)
