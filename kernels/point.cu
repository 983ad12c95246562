// Point-coefficient kernels (appended to deeppoly.cu: they use its Geom,
// ConvGeom, neuron_of and block_sum_rd). Coefficients are computed in
// round-to-nearest; every rounding is bounded (err >= |exact - stored|) and
// paid in the row's constant as err * r with r >= |x|, summed rounded up.
// Constants are f64 per row, rounded down; NaN becomes -inf.

#define POINT_INF __longlong_as_double(0x7ff0000000000000LL)

__device__ __forceinline__ double unit_roundoff(float) { return 5.9604644775390625e-8; }    // 2^-24
__device__ __forceinline__ double unit_roundoff(double) { return 1.1102230246251565e-16; }  // 2^-53
__device__ __forceinline__ double min_subnormal(float) { return 1.40129846432481707e-45; }
__device__ __forceinline__ double min_subnormal(double) { return 4.9406564584124654e-324; }

// Start of row r's batch slot in a per-(property, neuron) table over g's node.
__device__ __forceinline__ size_t slot_base(Geom g, const unsigned* __restrict__ prop, int r) {
    return (size_t)prop[r] * g.c * g.h * g.w;
}

// Upper bound of a block-wide sum of terms each rounded up.
__device__ __forceinline__ double block_sum_ru(double v) { return -block_sum_rd(-v); }

__device__ __forceinline__ double no_nan(double c) { return isnan(c) ? -POINT_INF : c; }

// Bound on |a*b - fl(a*b)| for a point multiplier b (round-to-nearest:
// u*|g| + eta/2; 2u*|g| is an exact power-of-two scaling in double).
template <typename T>
__device__ __forceinline__ double point_mul_err(T g, T b) {
    if (b == (T)0 || b == (T)1) return 0.0;
    if (!isfinite((double)g)) return POINT_INF;
    return 2.0 * unit_roundoff(g) * fabs((double)g) + 4.0 * min_subnormal(g);
}

// Per row: min(a*b) - gamma * sum |a| wr - eta_r1, over the row's window.
template <typename T>
__device__ void point_affine_const(const T* __restrict__ a, Geom g, const int2* __restrict__ off,
                                   const unsigned* __restrict__ prop, const T* __restrict__ blo,
                                   const T* __restrict__ bhi, const T* __restrict__ wr, double gamma,
                                   const double* __restrict__ eta_r1, double* __restrict__ cst) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    const T* ar = a + r * cols;
    int oy = off[r].x, ox = off[r].y;
    size_t base = slot_base(g, prop, r);
    blo += base, bhi += base, wr += base;
    double s = 0.0, e = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        double aj = (double)ar[j];
        if (aj == 0.0) continue;
        int i = neuron_of(g, oy, ox, j);
        if (i < 0) continue;
        s = __dadd_rd(s, min_prod_rd(aj, aj, (double)blo[i], (double)bhi[i]));
        e = __dadd_ru(e, __dmul_ru(fabs(aj), (double)wr[i]));
    }
    s = block_sum_rd(s);
    e = block_sum_ru(e);
    if (threadIdx.x == 0) cst[r] = no_nan(__dadd_rd(__dadd_rd(s, -__dmul_ru(gamma, e)), -eta_r1[prop[r]]));
}

// Conv step as a GEMM, part 1: rows r0..r0+nr of `a` (window over the conv
// output) transposed to ahat[(row, y, x), c_out].
template <typename T>
__device__ void point_conv_im(const T* __restrict__ a, Geom gi, int r0, int nr, T* __restrict__ ahat) {
    size_t pos = (size_t)gi.wh * gi.ww, cols_i = (size_t)gi.c * pos;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)nr * cols_i) return;
    size_t rl = idx / cols_i, rem = idx % cols_i, p = rem / gi.c, co = rem % gi.c;
    ahat[idx] = a[((size_t)r0 + rl) * cols_i + co * pos + p];
}

// Part 2 (after t = ahat * W by a GEMM, t[(row, y, x), (c_in, ky, kx)]): each
// coefficient over the conv input sums the taps that reach it, in double,
// rounded once.
template <typename T>
__device__ void point_conv_col2im(const T* __restrict__ t, Geom gi, const int2* __restrict__ offi, ConvGeom cg,
                                  Geom go, const int2* __restrict__ offo, T* __restrict__ out, int r0, int nr) {
    size_t cols_o = (size_t)go.c * go.wh * go.ww;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)nr * cols_o) return;
    int rl = idx / cols_o, r = r0 + rl;
    int col = idx % cols_o;
    int tx = col % go.ww, tt = col / go.ww, ty = tt % go.wh, ci = tt / go.wh;
    int iy = offo[r].x + ty, ix = offo[r].y + tx;
    size_t taps = (size_t)go.c * cg.kh * cg.kw;
    double acc = 0.0;
    if (iy >= 0 && iy < go.h && ix >= 0 && ix < go.w) {
        int oy = offi[r].x, ox = offi[r].y;
        for_each_tap_to(cg, gi, oy, ox, iy, ix, [&](int ky, int kx, int, int, int wy, int wx) {
            acc += (double)t[(((size_t)rl * gi.wh + wy) * gi.ww + wx) * taps + (ci * cg.kh + ky) * cg.kw + kx];
        });
    }
    out[(size_t)r * cols_o + col] = (T)acc;
}

// The conv step in one kernel, for steps too small to pay for a GEMM's
// launches: each coefficient over the conv input sums, in double and rounded
// once, a[r, co, wy, wx]·w[co, ci, ky, kx] over the taps and output channels
// that reach it (at most the step's m products), a group of 2^lg lanes (up
// to 32) taking every 2^lg-th channel. The step's constant
// pays for any order of the m products, so the grouping is free.
template <typename T, bool SPLIT>
__device__ __forceinline__ double conv_direct_sum(const T* __restrict__ ar, Geom gi, int2 oi, const T* __restrict__ w,
                                                  ConvGeom cg, Geom go, int ci, int iy, int ix, int lane, int gs) {
    double acc = 0.0;
    for_each_tap_to(cg, gi, oi.x, oi.y, iy, ix, [&](int ky, int kx, int, int, int wy, int wx) {
        for (int co = SPLIT ? lane : 0; co < gi.c; co += SPLIT ? gs : 1) {
            double x = (double)ar[(co * gi.wh + wy) * gi.ww + wx];
            acc += x * (double)w[((co * go.c + ci) * cg.kh + ky) * cg.kw + kx];
        }
    });
    return acc;
}

template <typename T>
__device__ void point_conv_direct(const T* __restrict__ a, Geom gi, const int2* __restrict__ offi,
                                  const T* __restrict__ w, ConvGeom cg, Geom go, const int2* __restrict__ offo,
                                  T* __restrict__ out, int rows, int lg) {
    size_t cols_o = (size_t)go.c * go.wh * go.ww, cols_i = (size_t)gi.c * gi.wh * gi.ww;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t idx = t >> lg;
    int gs = 1 << lg, lane = (int)(t & (gs - 1));
    // Whole groups leave together; the shuffles below need every lane of a live group.
    bool live = idx < (size_t)rows * cols_o;
    if (!live && lg == 0) return;
    int r = live ? idx / cols_o : 0, col = live ? idx % cols_o : 0;
    int tx = col % go.ww, tt = col / go.ww, ty = tt % go.wh, ci = tt / go.wh;
    int iy = offo[r].x + ty, ix = offo[r].y + tx;
    double acc = 0.0;
    if (live && iy >= 0 && iy < go.h && ix >= 0 && ix < go.w) {
        const T* ar = a + (size_t)r * cols_i;
        acc = lg == 0 ? conv_direct_sum<T, false>(ar, gi, offi[r], w, cg, go, ci, iy, ix, 0, 1)
                      : conv_direct_sum<T, true>(ar, gi, offi[r], w, cg, go, ci, iy, ix, lane, gs);
    }
    for (int s = gs / 2; s > 0; s >>= 1) acc += __shfl_down_sync(0xffffffff, acc, s, gs);
    if (live && lane == 0) out[idx] = (T)acc;
}

// Point ReLU (relu == 1; relu == 2: sigmoid, c_hi the lower line's intercept)
// or diagonal step (relu == 0), one block per row.
template <typename T>
__device__ void point_diag(const T* __restrict__ a, Geom g, const int2* __restrict__ off,
                           const unsigned* __restrict__ prop, const T* __restrict__ p_lo, const T* __restrict__ p_hi,
                           const T* __restrict__ c_lo, const T* __restrict__ c_hi, const T* __restrict__ rr, int relu,
                           T* __restrict__ out, double* __restrict__ cst) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    int oy = off[r].x, ox = off[r].y;
    size_t base = slot_base(g, prop, r);
    p_lo += base, p_hi += base, c_lo += base, c_hi += base, rr += base;
    double s = 0.0, e = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        size_t k = r * cols + j;
        T aj = a[k];
        int i = neuron_of(g, oy, ox, j);
        T gj = (T)0;
        if (i >= 0 && aj != (T)0) {
            double ad = (double)aj, err;
            if (relu) {
                // lam_lo for a >= 0, lam_up (plus a*mu) for a < 0.
                T lam = aj > (T)0 ? p_lo[i] : p_hi[i];
                gj = aj * lam;
                err = point_mul_err(gj, lam);
                if (aj < (T)0) s = __dadd_rd(s, __dmul_rd(ad, (double)c_lo[i]));
                else if (relu == 2) s = __dadd_rd(s, __dmul_rd(ad, (double)c_hi[i]));
            } else {
                T ml = p_lo[i], mh = p_hi[i];
                gj = aj * ml;
                if (ml == mh) {
                    err = point_mul_err(gj, ml);
                } else {
                    double gd = (double)gj;
                    double l1 = __dmul_rd(ad, (double)ml), h1 = __dmul_ru(ad, (double)ml);
                    double l2 = __dmul_rd(ad, (double)mh), h2 = __dmul_ru(ad, (double)mh);
                    err = fmax(fmax(__dadd_ru(h1, -gd), __dadd_ru(gd, -l1)), fmax(__dadd_ru(h2, -gd), __dadd_ru(gd, -l2)));
                    if (!isfinite(gd)) err = POINT_INF;
                }
                s = __dadd_rd(s, min_prod_rd(ad, ad, (double)c_lo[i], (double)c_hi[i]));
            }
            if (err != 0.0) e = __dadd_ru(e, __dmul_ru(err, (double)rr[i]));
        }
        out[k] = gj;
    }
    s = block_sum_rd(s);
    e = block_sum_ru(e);
    if (threadIdx.x == 0) cst[r] = no_nan(__dadd_rd(s, -e));
}

// Point MaxPool step, gather form: one thread per element of the window over
// the pool input; sums the coefficients of the outputs that select it and
// writes the sum's rounding, times r, to `err` (reduced per row later).
template <typename T>
__device__ void point_maxpool(const T* __restrict__ a, Geom gi, const int2* __restrict__ offi,
                              const unsigned* __restrict__ prop, const T* __restrict__ sel_lo,
                              const T* __restrict__ sel_up, ConvGeom cg, Geom go, const int2* __restrict__ offo,
                              const T* __restrict__ rr, T* __restrict__ out, double* __restrict__ err, int rows) {
    size_t cols_o = (size_t)go.c * go.wh * go.ww;
    size_t cols_i = (size_t)gi.c * gi.wh * gi.ww;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols_o) return;
    int r = idx / cols_o;
    int col = idx % cols_o;
    int tx = col % go.ww, t = col / go.ww, ty = t % go.wh, c = t / go.wh;
    int iy = offo[r].x + ty, ix = offo[r].y + tx;
    size_t bo = slot_base(gi, prop, r);
    sel_lo += bo, sel_up += bo, rr += slot_base(go, prop, r);
    T sum = (T)0;
    double e = 0.0;
    int me = -1;
    if (iy >= 0 && iy < go.h && ix >= 0 && ix < go.w) {
        me = (c * go.h + iy) * go.w + ix;
        int oy = offi[r].x, ox = offi[r].y;
        for_each_tap_to(cg, gi, oy, ox, iy, ix, [&](int, int, int gy, int gx, int wy, int wx) {
            T v = a[r * cols_i + (c * gi.wh + wy) * gi.ww + wx];
            if (v == (T)0) return;
            int o = (c * gi.h + gy) * gi.w + gx;
            double sel = v > (T)0 ? (double)sel_lo[o] : (double)sel_up[o];
            if (sel != (double)me) return;
            // TwoSum: the exact error of sum + v.
            T s2 = sum + v, bb = s2 - sum;
            T d = (sum - (s2 - bb)) + (v - bb);
            e = isfinite((double)s2) ? __dadd_ru(e, fabs((double)d)) : POINT_INF;
            sum = s2;
        });
    }
    out[idx] = sum;
    err[idx] = (me >= 0 && e != 0.0) ? __dmul_ru(e, (double)rr[me]) : 0.0;
}

// MaxPool constants per row: a * up where no input dominates, minus the
// gathered rounding terms `err` (cols_o per row).
template <typename T>
__device__ void point_maxpool_const(const T* __restrict__ a, Geom g, const int2* __restrict__ off,
                                    const unsigned* __restrict__ prop, const T* __restrict__ sel_lo,
                                    const T* __restrict__ sel_up, const T* __restrict__ yup,
                                    const double* __restrict__ err, size_t cols_o, double* __restrict__ cst) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    int oy = off[r].x, ox = off[r].y;
    size_t base = slot_base(g, prop, r);
    sel_lo += base, sel_up += base, yup += base;
    double s = 0.0, e = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        double aj = (double)a[r * cols + j];
        if (aj == 0.0) continue;
        int i = neuron_of(g, oy, ox, j);
        if (i < 0) continue;
        double target = aj > 0.0 ? (double)sel_lo[i] : (double)sel_up[i];
        if (target < 0.0) s = __dadd_rd(s, __dmul_rd(aj, (double)yup[i]));
    }
    for (size_t j = threadIdx.x; j < cols_o; j += blockDim.x) e = __dadd_ru(e, err[r * cols_o + j]);
    s = block_sum_rd(s);
    e = block_sum_ru(e);
    if (threadIdx.x == 0) cst[r] = no_nan(__dadd_rd(s, -e));
}

// Lower bound of sum_j g_j * x_j over the box, per row: one product each;
// with add_to, add_to[r] plus it, rounded down (out may be add_to).
template <typename T>
__device__ void point_concretize(const T* __restrict__ a, Geom g, const int2* __restrict__ off,
                                 const unsigned* __restrict__ prop, const T* __restrict__ xlo,
                                 const T* __restrict__ xhi, const double* add_to, double* out) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    const T* ar = a + r * cols;
    int oy = off[r].x, ox = off[r].y;
    size_t base = slot_base(g, prop, r);
    xlo += base, xhi += base;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        double aj = (double)ar[j];
        if (aj == 0.0) continue;
        int i = neuron_of(g, oy, ox, j);
        if (i < 0) continue;
        s = __dadd_rd(s, __dmul_rd(aj, aj > 0.0 ? (double)xlo[i] : (double)xhi[i]));
    }
    s = block_sum_rd(s);
    if (threadIdx.x == 0) out[r] = add_to ? __dadd_rd(add_to[r], no_nan(s)) : no_nan(s);
}

// dst += src (placed as add_into does); err gets |TwoSum error| * r per
// source element, reduced per row by row_sum_neg.
template <typename T>
__device__ void point_add_into(T* __restrict__ dst, Geom gd, const int2* __restrict__ offd, const T* __restrict__ src,
                               Geom gs, const int2* __restrict__ offs, const unsigned* __restrict__ prop,
                               const T* __restrict__ rr, double* __restrict__ err, int rows) {
    size_t cols_s = (size_t)gs.c * gs.wh * gs.ww;
    size_t cols_d = (size_t)gd.c * gd.wh * gd.ww;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols_s) return;
    err[idx] = 0.0;
    int r = idx / cols_s;
    int j = idx % cols_s;
    T v = src[idx];
    if (v == (T)0) return;
    int sx = j % gs.ww, t = j / gs.ww, sy = t % gs.wh, c = t / gs.wh;
    int y = offs[r].x + sy, x = offs[r].y + sx;
    if (y < 0 || y >= gs.h || x < 0 || x >= gs.w) return;
    int ty = y - offd[r].x, tx = x - offd[r].y;
    if (ty < 0 || ty >= gd.wh || tx < 0 || tx >= gd.ww) return;  // cannot happen for valid windows
    size_t d = r * cols_d + ((size_t)c * gd.wh + ty) * gd.ww + tx;
    T o = dst[d];
    T s2 = o + v, bb = s2 - o;
    T e = (o - (s2 - bb)) + (v - bb);
    dst[d] = s2;
    double ed = isfinite((double)s2) ? fabs((double)e) : POINT_INF;
    if (ed != 0.0) err[idx] = __dmul_ru(ed, (double)rr[slot_base(gs, prop, r) + (c * gs.h + y) * gs.w + x]);
}

// out[r] = -(sum of err over the row's cols entries), the sum rounded up.
__device__ void row_sum_neg(const double* __restrict__ err, size_t cols, double* __restrict__ out) {
    int r = blockIdx.x;
    double e = 0.0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) e = __dadd_ru(e, err[r * cols + j]);
    e = block_sum_ru(e);
    if (threadIdx.x == 0) out[r] = no_nan(-e);
}

template <typename T>
__device__ void point_compact(const T* __restrict__ a, const unsigned* __restrict__ keep, int n, size_t cols,
                              T* __restrict__ out) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * cols) return;
    out[idx] = a[(size_t)keep[idx / cols] * cols + idx % cols];
}

// One coefficient per row into a zeroed matrix (rows bounding single neurons).
template <typename T>
__device__ void point_unit(T* __restrict__ out, size_t cols, const unsigned* __restrict__ col,
                           const T* __restrict__ val, int rows) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) out[(size_t)r * cols + col[r]] = val[r];
}

template <typename T>
__device__ void point_slice_cols(const T* __restrict__ a, int rows, size_t cols, size_t start, size_t len,
                                 T* __restrict__ out) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * len) return;
    out[idx] = a[(idx / len) * cols + start + idx % len];
}

extern "C" __global__ void point_row_sum_neg(const double* err, size_t cols, double* out) {
    row_sum_neg(err, cols, out);
}

#define INSTANTIATE_POINT(T, S)                                                                                    \
    extern "C" __global__ void point_affine_const_##S(const T* a, Geom g, const int2* off, const unsigned* pr,    \
                                                      const T* bl, const T* bh, const T* wr, double gamma,        \
                                                      const double* er, double* cst) {                           \
        point_affine_const<T>(a, g, off, pr, bl, bh, wr, gamma, er, cst);                                        \
    }                                                                                                            \
    extern "C" __global__ void point_conv_im_##S(const T* a, Geom gi, int r0, int nr, T* ahat) {                 \
        point_conv_im<T>(a, gi, r0, nr, ahat);                                                                   \
    }                                                                                                            \
    extern "C" __global__ void point_conv_col2im_##S(const T* t, Geom gi, const int2* offi, ConvGeom cg, Geom go, \
                                                     const int2* offo, T* out, int r0, int nr) {                 \
        point_conv_col2im<T>(t, gi, offi, cg, go, offo, out, r0, nr);                                            \
    }                                                                                                            \
    extern "C" __global__ void point_conv_direct_##S(const T* a, Geom gi, const int2* offi, const T* w, ConvGeom cg,  \
                                                     Geom go, const int2* offo, T* out, int rows, int lg) {      \
        point_conv_direct<T>(a, gi, offi, w, cg, go, offo, out, rows, lg);                                       \
    }                                                                                                            \
    extern "C" __global__ void point_diag_##S(const T* a, Geom g, const int2* off, const unsigned* pr,          \
                                              const T* pl, const T* ph, const T* cl, const T* ch, const T* r,    \
                                              int relu, T* out, double* cst) {                                   \
        point_diag<T>(a, g, off, pr, pl, ph, cl, ch, r, relu, out, cst);                                         \
    }                                                                                                            \
    extern "C" __global__ void point_maxpool_##S(const T* a, Geom gi, const int2* offi, const unsigned* pr,      \
                                                 const T* sl, const T* su, ConvGeom cg, Geom go, const int2* offo, \
                                                 const T* r, T* out, double* err, int rows) {                    \
        point_maxpool<T>(a, gi, offi, pr, sl, su, cg, go, offo, r, out, err, rows);                              \
    }                                                                                                            \
    extern "C" __global__ void point_maxpool_const_##S(const T* a, Geom g, const int2* off, const unsigned* pr,  \
                                                       const T* sl, const T* su, const T* yu, const double* err, \
                                                       size_t cols_o, double* cst) {                             \
        point_maxpool_const<T>(a, g, off, pr, sl, su, yu, err, cols_o, cst);                                     \
    }                                                                                                            \
    extern "C" __global__ void point_concretize_##S(const T* a, Geom g, const int2* off, const unsigned* pr,     \
                                                    const T* xl, const T* xh, double* out) {                     \
        point_concretize<T>(a, g, off, pr, xl, xh, nullptr, out);                                                \
    }                                                                                                            \
    extern "C" __global__ void point_concretize_add_##S(const T* a, Geom g, const int2* off, const unsigned* pr, \
                                                        const T* xl, const T* xh, const double* add_to,          \
                                                        double* out) {                                           \
        point_concretize<T>(a, g, off, pr, xl, xh, add_to, out);                                                 \
    }                                                                                                            \
    extern "C" __global__ void point_add_into_##S(T* d, Geom gd, const int2* offd, const T* s, Geom gs,          \
                                                  const int2* offs, const unsigned* pr, const T* r, double* err, \
                                                  int rows) {                                                    \
        point_add_into<T>(d, gd, offd, s, gs, offs, pr, r, err, rows);                                           \
    }                                                                                                            \
    extern "C" __global__ void point_compact_##S(const T* a, const unsigned* keep, int n, size_t cols, T* out) { \
        point_compact<T>(a, keep, n, cols, out);                                                                 \
    }                                                                                                            \
    extern "C" __global__ void point_unit_##S(T* out, size_t cols, const unsigned* col, const T* val, int rows) { \
        point_unit<T>(out, cols, col, val, rows);                                                                \
    }                                                                                                            \
    extern "C" __global__ void point_slice_cols_##S(const T* a, int rows, size_t cols, size_t start, size_t len, \
                                                    T* out) {                                                    \
        point_slice_cols<T>(a, rows, cols, start, len, out);                                                     \
    }

INSTANTIATE_POINT(float, f32)
INSTANTIATE_POINT(double, f64)

// Per-row constants: acc[i] += inc[i], rounded down.
extern "C" __global__ void cst_add_rd(double* acc, const double* inc, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] = __dadd_rd(acc[i], inc[i]);
}
