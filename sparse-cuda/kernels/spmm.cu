// CSR SpMM, C = alpha*A*B + beta*C, on CUDA cores. B and C are dense with any strides.
//
// - rowmajor<W, V>: for row-major B. A sub-warp of W lanes owns one row of A and a tile of W*V
//   columns of C; lane l holds columns l*V .. l*V+V-1 in registers. The row's (column, value)
//   pairs are loaded W at a time, one per lane (a coalesced load), and broadcast with shuffles, so
//   each entry costs the sub-warp one contiguous read of a B row (GE-SpMM's coalesced row
//   caching): one float4/double2/... per lane. The host picks V (4, 2 or 1) as the widest that
//   divides both B's ld and N, and W (4 to 32) so that a tile spans N where it can.
// - colmajor<W>: for column-major B, where lanes across N would each touch a different column
//   (a separate memory sector per lane). Lanes walk the row's entries instead, as SpMV's vector
//   kernel does, each keeping COLMAJOR_COLS columns of partial sums, reduced by shuffles at the
//   end. Its B reads are gathers down columns, one per entry and column: like COLMAJOR_COLS SpMVs
//   sharing the index loads, so expect SpMV-like bandwidth, well below the row-major kernel.
// - scale_matrix: C = beta*C for alpha == 0 (A and B are not read).
//
// Rows are never split: one long row holds its sub-warp. Every C element is written once, in a
// fixed order, so results are deterministic.

#define SPMM_PARAMS(T)                                                                                                  \
    u32 rows, u32 n, const u32 *row_ptr, const u32 *col_idx, const T *values, const T *b, u32 b_rs, u32 b_cs, T *c,     \
        u32 c_rs, u32 c_cs, typename acc_of<T>::type alpha, typename acc_of<T>::type beta
#define SPMM_PASS rows, n, row_ptr, col_idx, values, b, b_rs, b_cs, c, c_rs, c_cs, alpha, beta

// Grid: x covers rows (BLOCK / W rows per block), y strides over the column tiles of W*V columns.
template <typename T, int W, int V>
__device__ void spmm_csr_rowmajor(SPMM_PARAMS(T)) {
    typedef typename acc_of<T>::type A;
    u64 row = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / W;
    // The whole sub-warp leaves together, and its shuffles name only its own lanes.
    if (row >= rows) return;
    const unsigned mask = subwarp_mask<W>();
    const u32 lane = threadIdx.x % W;
    const u32 begin = load(row_ptr + row), end = load(row_ptr + row + 1);
    const u32 tiles = n / (W * V) + (n % (W * V) != 0);
    const bool c_vector = c_cs == 1 && c_rs % V == 0;
    for (u32 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        // Lanes past N load nothing but still take part in the shuffles.
        const u64 first = (u64)tile * (W * V) + lane * V;
        const bool in_range = first < n;
        A sum[V];
#pragma unroll
        for (int t = 0; t < V; ++t) sum[t] = 0;
        for (u32 base = begin; base < end;) {
            const u32 chunk = end - base < W ? end - base : W;
            u32 col = 0;
            A val = 0;
            if (lane < chunk) {
                col = load(col_idx + base + lane);
                val = to_acc(load(values + base + lane));
            }
#pragma unroll 2
            for (u32 e = 0; e < chunk; ++e) {
                const u32 k = __shfl_sync(mask, col, e, W);
                const A a = __shfl_sync(mask, val, e, W);
                A bk[V];
                load_span<T, V>(b + (u64)k * b_rs + first * b_cs, in_range, bk);
#pragma unroll
                for (int t = 0; t < V; ++t) sum[t] += a * bk[t];
            }
            base += chunk;
        }
        if (in_range) update_span<T, V>(c + row * c_rs + first * c_cs, c_cs, c_vector, V, alpha, sum, beta);
    }
}

#define COLMAJOR_COLS 8

// Grid: x covers rows (BLOCK / W rows per block), y strides over tiles of COLMAJOR_COLS columns.
template <typename T, int W>
__device__ void spmm_csr_colmajor(SPMM_PARAMS(T)) {
    typedef typename acc_of<T>::type A;
    u64 row = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / W;
    if (row >= rows) return;
    const unsigned mask = subwarp_mask<W>();
    const u32 lane = threadIdx.x % W;
    const u32 begin = load(row_ptr + row), end = load(row_ptr + row + 1);
    const u32 tiles = n / COLMAJOR_COLS + (n % COLMAJOR_COLS != 0);
    for (u32 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        const u64 first = (u64)tile * COLMAJOR_COLS;
        const u32 count = n - first < COLMAJOR_COLS ? (u32)(n - first) : COLMAJOR_COLS;
        A sum[COLMAJOR_COLS];
#pragma unroll
        for (int t = 0; t < COLMAJOR_COLS; ++t) sum[t] = 0;
        // 64-bit so the last stride cannot wrap past a u32 entry count. Not unrolled: the
        // COLMAJOR_COLS loads of one entry already overlap.
#pragma unroll 1
        for (u64 e = begin + lane; e < end; e += W) {
            const A a = to_acc(load(values + e));
            const T* bk = b + (u64)load(col_idx + e) * b_rs + first * b_cs;
#pragma unroll
            for (int t = 0; t < COLMAJOR_COLS; ++t)
                if (t < count) sum[t] += a * to_acc(load(bk + (u64)t * b_cs));
        }
#pragma unroll
        for (int t = 0; t < COLMAJOR_COLS; ++t) {
            const A total = subwarp_allsum<W>(mask, sum[t]);
            if (t % W == lane && t < count) update(c + row * c_rs + (first + t) * c_cs, alpha, total, beta);
        }
    }
}

// out = beta*out over an outer x inner matrix whose element (o, i) is at o*ld + i (the
// contiguous dimension inner, whatever the layout); zeros without reading when beta == 0.
// Grid: x covers inner, y strides over outer.
template <typename T>
__device__ void scale_matrix(u32 inner, u32 outer, T* out, u32 ld, typename acc_of<T>::type beta) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= inner) return;
    for (u64 o = blockIdx.y; o < outer; o += gridDim.y)
        update(out + o * ld + i, typename acc_of<T>::type(0), typename acc_of<T>::type(0), beta);
}

#define ROWMAJOR(NAME, T, W, V)                                                                                         \
    extern "C" __global__ void spmm_csr_rowmajor_##NAME##_w##W##_v##V(SPMM_PARAMS(T)) {                                 \
        spmm_csr_rowmajor<T, W, V>(SPMM_PASS);                                                                          \
    }
#define ROWMAJOR_VECTORS(NAME, T, W) ROWMAJOR(NAME, T, W, 1) ROWMAJOR(NAME, T, W, 2) ROWMAJOR(NAME, T, W, 4)
#define COLMAJOR(NAME, T, W)                                                                                            \
    extern "C" __global__ void spmm_csr_colmajor_##NAME##_w##W(SPMM_PARAMS(T)) { spmm_csr_colmajor<T, W>(SPMM_PASS); }
#define FOR_EACH_SUBWARP(M, NAME, T) M(NAME, T, 4) M(NAME, T, 8) M(NAME, T, 16) M(NAME, T, 32)

#define INSTANTIATE(NAME, T)                                                                                            \
    FOR_EACH_SUBWARP(ROWMAJOR_VECTORS, NAME, T)                                                                         \
    FOR_EACH_SUBWARP(COLMAJOR, NAME, T)                                                                                 \
    extern "C" __global__ void scale_matrix_##NAME(u32 inner, u32 outer, T *out, u32 ld, acc_of<T>::type beta) {        \
        scale_matrix<T>(inner, outer, out, ld, beta);                                                                   \
    }

FOR_EACH_FLOAT(INSTANTIATE)
