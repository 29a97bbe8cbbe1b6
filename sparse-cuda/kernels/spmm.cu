// CSR SpMM, C = alpha*A*B + beta*C, on CUDA cores. B and C are dense with any strides.
// Parameters: SpmmCsr<T> (src/spmm.rs) with SpmmDense<T> (src/operand.rs).
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
//
// Rows are never split: one long row holds its sub-warp. Every C element is written once, in a
// fixed order, so results are deterministic.

// Grid: x covers rows (BLOCK / W rows per block), y strides over the column tiles of W*V columns.
template <typename T, int W, int V>
__global__ void __launch_bounds__(SPMM_BLOCK) spmm_csr_rowmajor(const SpmmCsr<T> p) {
    typedef typename acc_of<T>::type A;
    const SpmmDense<T>& o = p.dense;
    SubwarpItem<W> w;
    if (!subwarp_item<W>(p.rows, p.row_ptr, &w)) return;
    const u64 row = w.item;
    const u32 tiles = o.n / (W * V) + (o.n % (W * V) != 0);
    const bool c_vector = o.c_cs == 1 && o.c_rs % V == 0;
    for (u32 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        // Lanes past N load nothing but still take part in the shuffles.
        const u64 first = (u64)tile * (W * V) + w.lane * V;
        const bool in_range = first < o.n;
        A sum[V];
#pragma unroll
        for (int t = 0; t < V; ++t) sum[t] = 0;
        for (u32 base = w.begin; base < w.end;) {
            const u32 chunk = w.end - base < W ? w.end - base : W;
            u32 col = 0;
            A val = 0;
            if (w.lane < chunk) {
                col = load(p.col_idx + base + w.lane);
                val = to_acc(load(p.values + base + w.lane));
            }
#pragma unroll 2
            for (u32 e = 0; e < chunk; ++e) {
                const u32 k = __shfl_sync(w.mask, col, e, W);
                const A a = __shfl_sync(w.mask, val, e, W);
                A bk[V];
                load_span<T, V>(o.b + (u64)k * o.b_rs + first * o.b_cs, in_range, bk);
#pragma unroll
                for (int t = 0; t < V; ++t) sum[t] += a * bk[t];
            }
            base += chunk;
        }
        if (in_range) update_span<T, V>(o.c + row * o.c_rs + first * o.c_cs, o.c_cs, c_vector, V, o.alpha, sum, o.beta);
    }
}

// Grid: x covers rows (BLOCK / W rows per block), y strides over tiles of COLMAJOR_COLS columns.
template <typename T, int W>
__global__ void __launch_bounds__(SPMM_BLOCK) spmm_csr_colmajor(const SpmmCsr<T> p) {
    typedef typename acc_of<T>::type A;
    const SpmmDense<T>& o = p.dense;
    SubwarpItem<W> w;
    if (!subwarp_item<W>(p.rows, p.row_ptr, &w)) return;
    const u64 row = w.item;
    const u32 tiles = o.n / COLMAJOR_COLS + (o.n % COLMAJOR_COLS != 0);
    for (u32 tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
        const u64 first = (u64)tile * COLMAJOR_COLS;
        const u32 count = o.n - first < COLMAJOR_COLS ? (u32)(o.n - first) : COLMAJOR_COLS;
        A sum[COLMAJOR_COLS];
#pragma unroll
        for (int t = 0; t < COLMAJOR_COLS; ++t) sum[t] = 0;
        // 64-bit so the last stride cannot wrap past a u32 entry count. Not unrolled: the
        // COLMAJOR_COLS loads of one entry already overlap.
#pragma unroll 1
        for (u64 e = w.begin + w.lane; e < w.end; e += W) {
            const A a = to_acc(load(p.values + e));
            const T* bk = o.b + (u64)load(p.col_idx + e) * o.b_rs + first * o.b_cs;
#pragma unroll
            for (int t = 0; t < COLMAJOR_COLS; ++t)
                if (t < count) sum[t] += a * to_acc(load(bk + (u64)t * o.b_cs));
        }
#pragma unroll
        for (int t = 0; t < COLMAJOR_COLS; ++t) {
            const A total = subwarp_allsum<W>(w.mask, sum[t]);
            if (t % W == w.lane && t < count) update(o.c + row * o.c_rs + (first + t) * o.c_cs, o.alpha, total, o.beta);
        }
    }
}
