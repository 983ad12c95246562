// polycert's GPU kernels (GPUPoly's algorithms), compiled at run time by
// NVRTC with fmad contraction off. Every rounding step is directed: lower
// ends round toward -inf (_rd), upper ends toward +inf (_ru). Sums are
// accumulated in double whatever the storage type T (float or double).
//
// Layout conventions (see polycert-deeppoly's Backend trait):
// - an expression matrix is two planes lo/hi, rows x cols, row-major;
// - a row over a spatial node covers a window C x wh x ww at a per-row
//   offset (oy, ox); positions outside the node are padding (always 0).

struct Geom {
    int c, h, w;     // node shape
    int wh, ww;      // window size
};

__device__ __forceinline__ double lo_of(float x) { return (double)x; }
__device__ __forceinline__ double lo_of(double x) { return x; }

// double -> T, rounded down / up.
__device__ __forceinline__ void store_rd(float* p, double v) { *p = __double2float_rd(v); }
__device__ __forceinline__ void store_rd(double* p, double v) { *p = v; }
__device__ __forceinline__ void store_ru(float* p, double v) { *p = __double2float_ru(v); }
__device__ __forceinline__ void store_ru(double* p, double v) { *p = v; }

// Neuron index of window column `col` of a row at offset (oy, ox), or -1
// when the position is outside the node.
__device__ __forceinline__ int neuron_of(const Geom& g, int oy, int ox, int col) {
    int wx = col % g.ww;
    int t = col / g.ww;
    int wy = t % g.wh;
    int c = t / g.wh;
    int y = oy + wy, x = ox + wx;
    if (y < 0 || y >= g.h || x < 0 || x >= g.w) return -1;
    return (c * g.h + y) * g.w + x;
}

// Lower end of [al, ah] * [bl, bh], rounded down.
__device__ __forceinline__ double min_prod_rd(double al, double ah, double bl, double bh) {
    if (al == 0.0 && ah == 0.0) return 0.0;
    return fmin(fmin(__dmul_rd(al, bl), __dmul_rd(al, bh)), fmin(__dmul_rd(ah, bl), __dmul_rd(ah, bh)));
}
__device__ __forceinline__ double max_prod_ru(double al, double ah, double bl, double bh) {
    if (al == 0.0 && ah == 0.0) return 0.0;
    return fmax(fmax(__dmul_ru(al, bl), __dmul_ru(al, bh)), fmax(__dmul_ru(ah, bl), __dmul_ru(ah, bh)));
}

// Block-wide sum rounded down (every partial sum rounds toward -inf).
__device__ double block_sum_rd(double v) {
    __shared__ double buf[32];
    for (int o = 16; o > 0; o >>= 1) v = __dadd_rd(v, __shfl_down_sync(0xffffffff, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = (threadIdx.x < nw) ? buf[threadIdx.x] : 0.0;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) v = __dadd_rd(v, __shfl_down_sync(0xffffffff, v, o));
    return v;  // valid in thread 0
}

// ---------------------------------------------------------------------------
// Dense backsubstitution: out = A (rows x n_out) * W (n_out x n_in).
// 64x64 output tiles, 16x16 threads, 4x4 outputs per thread.
#define BM 64
#define BN 64
#define BK 16
template <typename T>
__device__ void dense_backsub(const T* __restrict__ alo, const T* __restrict__ ahi, const T* __restrict__ w,
                              T* __restrict__ olo, T* __restrict__ ohi, int rows, int n_out, int n_in) {
    __shared__ T sal[BK][BM + 1];
    __shared__ T sah[BK][BM + 1];
    __shared__ T sw[BK][BN];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    double lo[4][4], hi[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) lo[i][j] = hi[i][j] = 0.0;
    for (int k0 = 0; k0 < n_out; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += 256) {
            int rr = e / BK, kk = e % BK;
            int r = r0 + rr, k = k0 + kk;
            bool ok = r < rows && k < n_out;
            sal[kk][rr] = ok ? alo[(size_t)r * n_out + k] : (T)0;
            sah[kk][rr] = ok ? ahi[(size_t)r * n_out + k] : (T)0;
        }
        for (int e = threadIdx.x; e < BK * BN; e += 256) {
            int kk = e / BN, cc = e % BN;
            int k = k0 + kk, c = c0 + cc;
            sw[kk][cc] = (k < n_out && c < n_in) ? w[(size_t)k * n_in + c] : (T)0;
        }
        __syncthreads();
        for (int kk = 0; kk < BK; kk++) {
            double wv[4], al[4], ah[4];
            for (int j = 0; j < 4; j++) wv[j] = (double)sw[kk][tx * 4 + j];
            for (int i = 0; i < 4; i++) {
                al[i] = (double)sal[kk][ty * 4 + i];
                ah[i] = (double)sah[kk][ty * 4 + i];
            }
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    double x = wv[j];
                    bool pos = x >= 0.0;
                    lo[i][j] = __fma_rd(pos ? al[i] : ah[i], x, lo[i][j]);
                    hi[i][j] = __fma_ru(pos ? ah[i] : al[i], x, hi[i][j]);
                }
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
        int r = r0 + ty * 4 + i;
        if (r >= rows) continue;
        for (int j = 0; j < 4; j++) {
            int c = c0 + tx * 4 + j;
            if (c >= n_in) continue;
            store_rd(&olo[(size_t)r * n_in + c], lo[i][j]);
            store_ru(&ohi[(size_t)r * n_in + c], hi[i][j]);
        }
    }
}

// ---------------------------------------------------------------------------
// Conv backsubstitution over windows (GBC), gather form: one thread per
// output element (row, ci, ty, tx) of the window over the conv input.
struct ConvGeom {
    int kh, kw, sh, sw, pt, pl;
};

// Gather form of a conv or pooling window: calls f(ky, kx, gy, gx, wy, wx) for
// every kernel tap (ky, kx) through which input position (iy, ix) feeds an
// output (gy, gx) of `gi` lying in the row's window (offset oy, ox) at (wy, wx).
template <typename F>
__device__ __forceinline__ void for_each_tap_to(ConvGeom cg, Geom gi, int oy, int ox, int iy, int ix, F f) {
    for (int ky = 0; ky < cg.kh; ky++) {
        int ty2 = iy + cg.pt - ky;
        if (ty2 < 0 || ty2 % cg.sh) continue;
        int gy = ty2 / cg.sh, wy = gy - oy;
        if (gy >= gi.h || wy < 0 || wy >= gi.wh) continue;
        for (int kx = 0; kx < cg.kw; kx++) {
            int tx2 = ix + cg.pl - kx;
            if (tx2 < 0 || tx2 % cg.sw) continue;
            int gx = tx2 / cg.sw, wx = gx - ox;
            if (gx >= gi.w || wx < 0 || wx >= gi.ww) continue;
            f(ky, kx, gy, gx, wy, wx);
        }
    }
}

template <typename T>
__device__ void conv_backsub(const T* __restrict__ alo, const T* __restrict__ ahi, Geom gi, const int2* __restrict__ offi,
                             const T* __restrict__ w, ConvGeom cg, Geom go, const int2* __restrict__ offo,
                             T* __restrict__ olo, T* __restrict__ ohi, int rows) {
    size_t cols_o = (size_t)go.c * go.wh * go.ww;
    size_t cols_i = (size_t)gi.c * gi.wh * gi.ww;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols_o) return;
    int r = idx / cols_o;
    int col = idx % cols_o;
    int tx = col % go.ww;
    int t = col / go.ww;
    int ty = t % go.wh;
    int ci = t / go.wh;
    int iy = offo[r].x + ty, ix = offo[r].y + tx;
    double lo = 0.0, hi = 0.0;
    if (iy >= 0 && iy < go.h && ix >= 0 && ix < go.w) {
        int oy = offi[r].x, ox = offi[r].y;
        const T* al = alo + r * cols_i;
        const T* ah = ahi + r * cols_i;
        for_each_tap_to(cg, gi, oy, ox, iy, ix, [&](int ky, int kx, int, int, int wy, int wx) {
            for (int co = 0; co < gi.c; co++) {
                int a = (co * gi.wh + wy) * gi.ww + wx;
                double l = (double)al[a], h = (double)ah[a];
                if (l == 0.0 && h == 0.0) continue;
                double x = (double)w[((co * go.c + ci) * cg.kh + ky) * cg.kw + kx];
                bool pos = x >= 0.0;
                lo = __fma_rd(pos ? l : h, x, lo);
                hi = __fma_ru(pos ? h : l, x, hi);
            }
        });
    }
    store_rd(&olo[idx], lo);
    store_ru(&ohi[idx], hi);
}

// ---------------------------------------------------------------------------
// Concretization: lower bound of sum_j a_j * [xlo, xhi]_{neuron(j)} per row.
// One block per row. Also gives the constant terms of every step
// (A * bias interval) since that is the same sum.
template <typename T>
__device__ void concretize(const T* __restrict__ alo, const T* __restrict__ ahi, Geom g, const int2* __restrict__ off,
                           const T* __restrict__ xlo, const T* __restrict__ xhi, double* __restrict__ out) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    const T* al = alo + r * cols;
    const T* ah = ahi + r * cols;
    int oy = off[r].x, ox = off[r].y;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        int i = neuron_of(g, oy, ox, j);
        if (i < 0) continue;
        s = __dadd_rd(s, min_prod_rd((double)al[j], (double)ah[j], (double)xlo[i], (double)xhi[i]));
    }
    s = block_sum_rd(s);
    if (threadIdx.x == 0) out[r] = s;
}

// ReLU (or sigmoid) step: coefficients collapse to their lower end (y >= 0);
// a >= 0 takes the lower line lam_lo*x (+ mu_lo when has_lo), a < 0 the upper
// line lam_up*x + mu_up.
template <typename T>
__device__ void relu_backsub(const T* __restrict__ alo, Geom g, const int2* __restrict__ off, const T* __restrict__ lam_lo,
                             const T* __restrict__ lam_up, const T* __restrict__ mu_up, int has_lo,
                             const T* __restrict__ mu_lo, T* __restrict__ olo, T* __restrict__ ohi,
                             double* __restrict__ cst) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    int oy = off[r].x, ox = off[r].y;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        size_t e = r * cols + j;
        int i = neuron_of(g, oy, ox, j);
        double a = (double)alo[e];
        double l = 0.0, h = 0.0;
        if (i >= 0 && a != 0.0) {
            double lam = a > 0.0 ? (double)lam_lo[i] : (double)lam_up[i];
            l = __dmul_rd(a, lam);
            h = __dmul_ru(a, lam);
            if (a < 0.0) s = __dadd_rd(s, __dmul_rd(a, (double)mu_up[i]));
            else if (has_lo) s = __dadd_rd(s, __dmul_rd(a, (double)mu_lo[i]));
        }
        store_rd(&olo[e], l);
        store_ru(&ohi[e], h);
    }
    s = block_sum_rd(s);
    if (threadIdx.x == 0) cst[r] = s;
}

// Diagonal step through y = x * [mlo, mhi] + [clo, chi].
template <typename T>
__device__ void diag_backsub(const T* __restrict__ alo, const T* __restrict__ ahi, Geom g, const int2* __restrict__ off,
                             const T* __restrict__ mlo, const T* __restrict__ mhi, const T* __restrict__ clo,
                             const T* __restrict__ chi, T* __restrict__ olo, T* __restrict__ ohi, double* __restrict__ cst) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    int oy = off[r].x, ox = off[r].y;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        size_t e = r * cols + j;
        int i = neuron_of(g, oy, ox, j);
        double al = (double)alo[e], ah = (double)ahi[e];
        double l = 0.0, h = 0.0;
        if (i >= 0 && (al != 0.0 || ah != 0.0)) {
            l = min_prod_rd(al, ah, (double)mlo[i], (double)mhi[i]);
            h = max_prod_ru(al, ah, (double)mlo[i], (double)mhi[i]);
            s = __dadd_rd(s, min_prod_rd(al, ah, (double)clo[i], (double)chi[i]));
        }
        store_rd(&olo[e], l);
        store_ru(&ohi[e], h);
    }
    s = block_sum_rd(s);
    if (threadIdx.x == 0) cst[r] = s;
}

// MaxPool step, gather form: one thread per element of the window over the
// pool input; it sums the (collapsed) coefficients of the pool outputs that
// select this input. `cg` holds the pool's kernel, stride and padding.
template <typename T>
__device__ void maxpool_backsub(const T* __restrict__ alo, Geom gi, const int2* __restrict__ offi,
                                const T* __restrict__ sel_lo, const T* __restrict__ sel_up, ConvGeom cg, Geom go,
                                const int2* __restrict__ offo, T* __restrict__ olo, T* __restrict__ ohi, int rows) {
    size_t cols_o = (size_t)go.c * go.wh * go.ww;
    size_t cols_i = (size_t)gi.c * gi.wh * gi.ww;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols_o) return;
    int r = idx / cols_o;
    int col = idx % cols_o;
    int tx = col % go.ww, t = col / go.ww, ty = t % go.wh, c = t / go.wh;
    int iy = offo[r].x + ty, ix = offo[r].y + tx;
    double lo = 0.0, hi = 0.0;
    if (iy >= 0 && iy < go.h && ix >= 0 && ix < go.w) {
        double me = (double)((c * go.h + iy) * go.w + ix);
        int oy = offi[r].x, ox = offi[r].y;
        for_each_tap_to(cg, gi, oy, ox, iy, ix, [&](int, int, int gy, int gx, int wy, int wx) {
            double a = (double)alo[r * cols_i + (c * gi.wh + wy) * gi.ww + wx];
            if (a == 0.0) return;
            int o = (c * gi.h + gy) * gi.w + gx;
            double s = a > 0.0 ? (double)sel_lo[o] : (double)sel_up[o];
            if (s == me) {
                lo = __dadd_rd(lo, a);
                hi = __dadd_ru(hi, a);
            }
        });
    }
    store_rd(&olo[idx], lo);
    store_ru(&ohi[idx], hi);
}

// MaxPool constants per row: min(0, (a_hi - a_lo) * lo_y), plus a_lo * up_y
// where the upper bound is a constant. One block per row.
template <typename T>
__device__ void maxpool_const(const T* __restrict__ alo, const T* __restrict__ ahi, Geom g, const int2* __restrict__ off,
                              const T* __restrict__ sel_lo, const T* __restrict__ sel_up, const T* __restrict__ ylo,
                              const T* __restrict__ yup, double* __restrict__ cst) {
    int r = blockIdx.x;
    size_t cols = (size_t)g.c * g.wh * g.ww;
    int oy = off[r].x, ox = off[r].y;
    double s = 0.0;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        int i = neuron_of(g, oy, ox, j);
        if (i < 0) continue;
        double al = (double)alo[r * cols + j], ah = (double)ahi[r * cols + j];
        if (al == 0.0 && ah == 0.0) continue;
        s = __dadd_rd(s, fmin(0.0, __dmul_rd(__dadd_ru(ah, -al), (double)ylo[i])));
        double target = al >= 0.0 ? (double)sel_lo[i] : (double)sel_up[i];
        if (target < 0.0) s = __dadd_rd(s, __dmul_rd(al, (double)yup[i]));
    }
    s = block_sum_rd(s);
    if (threadIdx.x == 0) cst[r] = s;
}

// Row compaction: row i of the output is row keep[i] of the input.
template <typename T>
__device__ void compact(const T* __restrict__ lo, const T* __restrict__ hi, const unsigned* __restrict__ keep, int n,
                        size_t cols, T* __restrict__ olo, T* __restrict__ ohi) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * cols) return;
    size_t r = idx / cols, j = idx % cols;
    size_t src = (size_t)keep[r] * cols + j;
    olo[idx] = lo[src];
    ohi[idx] = hi[src];
}

__device__ __forceinline__ float add_rd(float a, float b) { return __fadd_rd(a, b); }
__device__ __forceinline__ double add_rd(double a, double b) { return __dadd_rd(a, b); }
__device__ __forceinline__ float add_ru(float a, float b) { return __fadd_ru(a, b); }
__device__ __forceinline__ double add_ru(double a, double b) { return __dadd_ru(a, b); }

// dst += src, each source window placed inside the destination window.
template <typename T>
__device__ void add_into(T* __restrict__ dlo, T* __restrict__ dhi, Geom gd, const int2* __restrict__ offd,
                         const T* __restrict__ slo, const T* __restrict__ shi, Geom gs, const int2* __restrict__ offs,
                         int rows) {
    size_t cols_s = (size_t)gs.c * gs.wh * gs.ww;
    size_t cols_d = (size_t)gd.c * gd.wh * gd.ww;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols_s) return;
    int r = idx / cols_s;
    int j = idx % cols_s;
    T l = slo[idx], h = shi[idx];
    if (l == (T)0 && h == (T)0) return;
    int sx = j % gs.ww, t = j / gs.ww, sy = t % gs.wh, c = t / gs.wh;
    int y = offs[r].x + sy, x = offs[r].y + sx;
    if (y < 0 || y >= gs.h || x < 0 || x >= gs.w) return;
    int ty = y - offd[r].x, tx = x - offd[r].y;
    if (ty < 0 || ty >= gd.wh || tx < 0 || tx >= gd.ww) return;  // cannot happen for valid windows
    size_t d = r * cols_d + ((size_t)c * gd.wh + ty) * gd.ww + tx;
    dlo[d] = add_rd(dlo[d], l);
    dhi[d] = add_ru(dhi[d], h);
}

template <typename T>
__device__ void slice_cols(const T* __restrict__ lo, const T* __restrict__ hi, int rows, size_t cols, size_t start,
                           size_t len, T* __restrict__ olo, T* __restrict__ ohi) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * len) return;
    size_t r = idx / len, j = idx % len;
    olo[idx] = lo[r * cols + start + j];
    ohi[idx] = hi[r * cols + start + j];
}

// ---------------------------------------------------------------------------
// Forward interval pass of an affine neuron: exact range of sum w*x + b,
// widened by the inference's rounding e = gamma * (sum |w||x| + |b|) + eta.
template <typename T>
__device__ void finish_affine(double lo, double hi, double mag, T b, double gamma, double eta, double thresh, int o,
                              T* flo, T* fhi, T* blo, T* bhi) {
    double bd = (double)b;
    lo = __dadd_rd(lo, bd);
    hi = __dadd_ru(hi, bd);
    mag = __dadd_ru(mag, fabs(bd));
    double e = __dadd_ru(__dmul_ru(gamma, mag), eta);
    // Past the network format's overflow threshold inference may give inf/NaN.
    if (!(__dadd_ru(mag, e) < thresh)) e = 1.0 / 0.0;
    store_rd(&flo[o], __dadd_rd(lo, -e));
    store_ru(&fhi[o], __dadd_ru(hi, e));
    store_rd(&blo[o], __dadd_rd(bd, -e));
    store_ru(&bhi[o], __dadd_ru(bd, e));
}

// One warp per output neuron; blockIdx.y is the batch slot.
template <typename T>
__device__ void forward_dense(const T* __restrict__ w, const T* __restrict__ b, int n_in, int n_out,
                              const T* __restrict__ xlo, const T* __restrict__ xhi, double gamma, double eta,
                              double thresh, T* flo, T* fhi, T* blo, T* bhi) {
    int o = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (o >= n_out) return;
    size_t si = (size_t)blockIdx.y * n_in, so = (size_t)blockIdx.y * n_out;
    xlo += si, xhi += si, flo += so, fhi += so, blo += so, bhi += so;
    double lo = 0.0, hi = 0.0, mag = 0.0;
    for (int j = lane; j < n_in; j += 32) {
        double x = (double)w[(size_t)o * n_in + j];
        double l = (double)xlo[j], h = (double)xhi[j];
        bool pos = x >= 0.0;
        lo = __fma_rd(pos ? l : h, x, lo);
        hi = __fma_ru(pos ? h : l, x, hi);
        mag = __fma_ru(fabs(x), fmax(fabs(l), fabs(h)), mag);
    }
    for (int s = 16; s > 0; s >>= 1) {
        lo = __dadd_rd(lo, __shfl_down_sync(0xffffffff, lo, s));
        hi = __dadd_ru(hi, __shfl_down_sync(0xffffffff, hi, s));
        mag = __dadd_ru(mag, __shfl_down_sync(0xffffffff, mag, s));
    }
    if (lane == 0) finish_affine(lo, hi, mag, b[o], gamma, eta, thresh, o, flo, fhi, blo, bhi);
}

// One thread per output neuron, or (lg > 0) a group of 2^lg lanes (up to 32)
// each summing every 2^lg-th tap; blockIdx.y the batch slot; gamma is a table
// indexed by the number of terms (1 + ci*kh*kw at most). Every partial sum is
// rounded outward, so any grouping encloses the exact sum.
template <typename T>
__device__ void forward_conv(const T* __restrict__ w, const T* __restrict__ b, Geom gi, ConvGeom cg, int c_out, int ho,
                             int wo, const T* __restrict__ xlo, const T* __restrict__ xhi, const double* __restrict__ gamma,
                             double eta_unit, double thresh, int lg, T* flo, T* fhi, T* blo, T* bhi) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int o = t >> lg, gs = 1 << lg, lane = t & (gs - 1);
    // Whole groups leave together; the shuffles below need every lane of a live group.
    bool live = o < c_out * ho * wo;
    if (!live && lg == 0) return;
    size_t si = (size_t)blockIdx.y * gi.c * gi.h * gi.w, so = (size_t)blockIdx.y * c_out * ho * wo;
    xlo += si, xhi += si, flo += so, fhi += so, blo += so, bhi += so;
    int co = live ? o / (ho * wo) : 0, oy = live ? (o / wo) % ho : 0, ox = live ? o % wo : 0;
    double lo = 0.0, hi = 0.0, mag = 0.0;
    auto tap = [&](int ci, int ky, int kx) {
        int iy = oy * cg.sh + ky - cg.pt, ix = ox * cg.sw + kx - cg.pl;
        if (iy < 0 || iy >= gi.h || ix < 0 || ix >= gi.w) return;
        int j = (ci * gi.h + iy) * gi.w + ix;
        double x = (double)w[((co * gi.c + ci) * cg.kh + ky) * cg.kw + kx];
        double l = (double)xlo[j], h = (double)xhi[j];
        bool pos = x >= 0.0;
        lo = __fma_rd(pos ? l : h, x, lo);
        hi = __fma_ru(pos ? h : l, x, hi);
        mag = __fma_ru(fabs(x), fmax(fabs(l), fabs(h)), mag);
    };
    if (lg == 0) {
        for (int ci = 0; ci < gi.c; ci++)
            for (int ky = 0; ky < cg.kh; ky++)
                for (int kx = 0; kx < cg.kw; kx++) tap(ci, ky, kx);
    } else {
        int taps = live ? gi.c * cg.kh * cg.kw : 0;
        for (int k = lane; k < taps; k += gs) tap(k / (cg.kh * cg.kw), (k / cg.kw) % cg.kh, k % cg.kw);
        for (int s = gs / 2; s > 0; s >>= 1) {
            lo = __dadd_rd(lo, __shfl_down_sync(0xffffffff, lo, s, gs));
            hi = __dadd_ru(hi, __shfl_down_sync(0xffffffff, hi, s, gs));
            mag = __dadd_ru(mag, __shfl_down_sync(0xffffffff, mag, s, gs));
        }
    }
    if (!live || lane != 0) return;
    // The products inside the input: per row and column of the window.
    int ny = 0, nx = 0;
    for (int ky = 0; ky < cg.kh; ky++) ny += (unsigned)(oy * cg.sh + ky - cg.pt) < (unsigned)gi.h;
    for (int kx = 0; kx < cg.kw; kx++) nx += (unsigned)(ox * cg.sw + kx - cg.pl) < (unsigned)gi.w;
    int n = gi.c * ny * nx;
    // n products plus the bias: gamma_{n+1}, and (n+2) * eta.
    finish_affine(lo, hi, mag, b[co], gamma[n + 1], __dmul_ru((double)(n + 2), eta_unit), thresh, o, flo, fhi, blo,
                  bhi);
}

// ---------------------------------------------------------------------------
#define INSTANTIATE(T, S)                                                                                         \
    extern "C" __global__ void __launch_bounds__(256) dense_backsub_##S(const T* a, const T* b, const T* w, T* ol, \
                                                                        T* oh, int rows, int n_out, int n_in) {   \
        dense_backsub<T>(a, b, w, ol, oh, rows, n_out, n_in);                                                    \
    }                                                                                                             \
    extern "C" __global__ void conv_backsub_##S(const T* al, const T* ah, Geom gi, const int2* offi, const T* w,  \
                                                ConvGeom cg, Geom go, const int2* offo, T* ol, T* oh, int rows) { \
        conv_backsub<T>(al, ah, gi, offi, w, cg, go, offo, ol, oh, rows);                                         \
    }                                                                                                             \
    extern "C" __global__ void concretize_##S(const T* al, const T* ah, Geom g, const int2* off, const T* xl,     \
                                              const T* xh, double* out) {                                         \
        concretize<T>(al, ah, g, off, xl, xh, out);                                                               \
    }                                                                                                             \
    extern "C" __global__ void relu_backsub_##S(const T* al, Geom g, const int2* off, const T* ll, const T* lu,   \
                                                const T* mu, int has_lo, const T* ml, T* ol, T* oh,               \
                                                double* cst) {                                                    \
        relu_backsub<T>(al, g, off, ll, lu, mu, has_lo, ml, ol, oh, cst);                                         \
    }                                                                                                             \
    extern "C" __global__ void diag_backsub_##S(const T* al, const T* ah, Geom g, const int2* off, const T* ml,   \
                                                const T* mh, const T* cl, const T* ch, T* ol, T* oh,              \
                                                double* cst) {                                                    \
        diag_backsub<T>(al, ah, g, off, ml, mh, cl, ch, ol, oh, cst);                                             \
    }                                                                                                             \
    extern "C" __global__ void maxpool_backsub_##S(const T* al, Geom gi, const int2* offi, const T* sl,          \
                                                   const T* su, ConvGeom cg, Geom go, const int2* offo, T* ol,     \
                                                   T* oh, int rows) {                                              \
        maxpool_backsub<T>(al, gi, offi, sl, su, cg, go, offo, ol, oh, rows);                                     \
    }                                                                                                             \
    extern "C" __global__ void maxpool_const_##S(const T* al, const T* ah, Geom g, const int2* off, const T* sl,  \
                                                 const T* su, const T* yl, const T* yu, double* cst) {           \
        maxpool_const<T>(al, ah, g, off, sl, su, yl, yu, cst);                                                    \
    }                                                                                                             \
    extern "C" __global__ void compact_##S(const T* l, const T* h, const unsigned* keep, int n, size_t cols,      \
                                           T* ol, T* oh) {                                                        \
        compact<T>(l, h, keep, n, cols, ol, oh);                                                                  \
    }                                                                                                             \
    extern "C" __global__ void add_into_##S(T* dl, T* dh, Geom gd, const int2* offd, const T* sl, const T* sh,    \
                                            Geom gs, const int2* offs, int rows) {                                \
        add_into<T>(dl, dh, gd, offd, sl, sh, gs, offs, rows);                                                    \
    }                                                                                                             \
    extern "C" __global__ void slice_cols_##S(const T* l, const T* h, int rows, size_t cols, size_t start,        \
                                              size_t len, T* ol, T* oh) {                                         \
        slice_cols<T>(l, h, rows, cols, start, len, ol, oh);                                                      \
    }                                                                                                             \
    extern "C" __global__ void forward_dense_##S(const T* w, const T* b, int n_in, int n_out, const T* xl,        \
                                                 const T* xh, double gamma, double eta, double th, T* fl, T* fh,  \
                                                 T* bl, T* bh) {                                                  \
        forward_dense<T>(w, b, n_in, n_out, xl, xh, gamma, eta, th, fl, fh, bl, bh);                              \
    }                                                                                                             \
    extern "C" __global__ void forward_conv_##S(const T* w, const T* b, Geom gi, ConvGeom cg, int c_out, int ho,  \
                                                int wo, const T* xl, const T* xh, const double* gamma,            \
                                                double eta, double th, int lg, T* fl, T* fh, T* bl, T* bh) {      \
        forward_conv<T>(w, b, gi, cg, c_out, ho, wo, xl, xh, gamma, eta, th, lg, fl, fh, bl, bh);                 \
    }

INSTANTIATE(float, f32)
INSTANTIATE(double, f64)
