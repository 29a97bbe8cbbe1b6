// CSR SDDMM, C = alpha*(X*Y^T) ∘ spy(S) + beta*C, on CUDA cores; C holds one value per entry of S,
// in S's entry order, optionally multiplied by S's value there. X is rows x K, Y cols x K, any
// strides. Parameters: SddmmCsr<T> (src/sddmm.rs) with SddmmDense<T> (src/operand.rs).
//
// sddmm<W, V>: a sub-warp of W lanes per row segment (at most SEGMENT = 256 entries of one row,
// listed at plan time, so a long row is shared by many sub-warps without any atomics). Lanes run
// across K, V elements each (one vector load when X and Y rows are contiguous and V-aligned); the
// host picks W so that W*V covers K when it can (8 lanes for K = 32, 32 for K >= 128 in f32). The
// first W*V elements of the segment's X row stay in registers (longer rows re-read the rest for
// every entry, from L1 in practice). Entries are taken W at a time, their columns loaded one per
// lane and broadcast by shuffles; each entry's partial dot products are summed by a shuffle
// butterfly and kept by the lane whose entry it is, so the sub-warp writes W consecutive outputs
// at once.

// Grid: one sub-warp per segment; segment s covers entries seg_start[s] .. seg_start[s+1] of row
// seg_row[s].
template <typename T, int W, int V>
__global__ void __launch_bounds__(SDDMM_BLOCK) sddmm_csr(const SddmmCsr<T> p) {
    typedef typename acc_of<T>::type A;
    const SddmmDense<T>& o = p.dense;
    SubwarpItem<W> w;
    if (!subwarp_item<W>(p.segments, p.seg_start, &w)) return;
    const T* x_row = o.x + (u64)load(p.seg_row + w.item) * o.x_rs;
    // Lane l reads elements l*V .. l*V+V-1 of every W*V.
    const u64 first = w.lane * V;
    A x_first[V];
    load_span<T, V>(x_row + first * o.x_cs, first < o.k, x_first);
    for (u32 base = w.begin; base < w.end;) {
        const u32 chunk = w.end - base < W ? w.end - base : W;
        const u32 col = w.lane < chunk ? load(p.col_idx + base + w.lane) : 0;
        A mine = 0;
#pragma unroll 2
        for (u32 e = 0; e < chunk; ++e) {
            const T* y_row = o.y + (u64)__shfl_sync(w.mask, col, e, W) * o.y_rs;
            A y_first[V];
            load_span<T, V>(y_row + first * o.y_cs, first < o.k, y_first);
            A partial = 0;
#pragma unroll
            for (int v = 0; v < V; ++v) partial += x_first[v] * y_first[v];
#pragma unroll 1
            for (u64 kk = first + W * V; kk < o.k; kk += W * V) {
                A xv[V], yv[V];
                load_span<T, V>(x_row + kk * o.x_cs, true, xv);
                load_span<T, V>(y_row + kk * o.y_cs, true, yv);
#pragma unroll
                for (int v = 0; v < V; ++v) partial += xv[v] * yv[v];
            }
            const A dot = subwarp_allsum<W>(w.mask, partial);
            if (w.lane == e) mine = dot;
        }
        if (w.lane < chunk) {
            const u64 entry = base + w.lane;
            if (p.scale_by_values) mine *= to_acc(load(p.s_values + entry));
            update(o.c + entry * o.c_inc, o.alpha, mine, o.beta);
        }
        base += chunk;
    }
}
