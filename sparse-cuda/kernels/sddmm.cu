// CSR SDDMM, C = alpha*(X*Y^T) ∘ spy(S) + beta*C, on CUDA cores; C holds one value per entry of S,
// in S's entry order, optionally multiplied by S's value there. X is rows x K, Y cols x K, any
// strides.
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
__device__ void sddmm_csr(u32 segments, const u32* seg_row, const u32* seg_start, const u32* col_idx, const T* s_values,
                          u32 scale_by_values, u32 k, const T* x, u32 x_rs, u32 x_cs, const T* y, u32 y_rs, u32 y_cs,
                          T* c, u32 c_inc, typename acc_of<T>::type alpha, typename acc_of<T>::type beta) {
    typedef typename acc_of<T>::type A;
    u64 segment = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / W;
    // The whole sub-warp leaves together, and its shuffles name only its own lanes.
    if (segment >= segments) return;
    const unsigned mask = subwarp_mask<W>();
    const u32 lane = threadIdx.x % W;
    const u32 begin = load(seg_start + segment), end = load(seg_start + segment + 1);
    const T* x_row = x + (u64)load(seg_row + segment) * x_rs;
    // Lane l reads elements l*V .. l*V+V-1 of every W*V.
    const u64 first = lane * V;
    A x_first[V];
    load_span<T, V>(x_row + first * x_cs, first < k, x_first);
    for (u32 base = begin; base < end;) {
        const u32 chunk = end - base < W ? end - base : W;
        const u32 col = lane < chunk ? load(col_idx + base + lane) : 0;
        A mine = 0;
#pragma unroll 2
        for (u32 e = 0; e < chunk; ++e) {
            const T* y_row = y + (u64)__shfl_sync(mask, col, e, W) * y_rs;
            A y_first[V];
            load_span<T, V>(y_row + first * y_cs, first < k, y_first);
            A partial = 0;
#pragma unroll
            for (int v = 0; v < V; ++v) partial += x_first[v] * y_first[v];
#pragma unroll 1
            for (u64 kk = first + W * V; kk < k; kk += W * V) {
                A xv[V], yv[V];
                load_span<T, V>(x_row + kk * x_cs, true, xv);
                load_span<T, V>(y_row + kk * y_cs, true, yv);
#pragma unroll
                for (int v = 0; v < V; ++v) partial += xv[v] * yv[v];
            }
            const A dot = subwarp_allsum<W>(mask, partial);
            if (lane == e) mine = dot;
        }
        if (lane < chunk) {
            const u64 entry = base + lane;
            if (scale_by_values) mine *= to_acc(load(s_values + entry));
            update(c + entry * c_inc, alpha, mine, beta);
        }
        base += chunk;
    }
}

#define SDDMM(NAME, T, W, V)                                                                                            \
    extern "C" __global__ void sddmm_csr_##NAME##_w##W##_v##V(                                                          \
        u32 segments, const u32 *seg_row, const u32 *seg_start, const u32 *col_idx, const T *s_values,                  \
        u32 scale_by_values, u32 k, const T *x, u32 x_rs, u32 x_cs, const T *y, u32 y_rs, u32 y_cs, T *c, u32 c_inc,    \
        acc_of<T>::type alpha, acc_of<T>::type beta) {                                                                  \
        sddmm_csr<T, W, V>(segments, seg_row, seg_start, col_idx, s_values, scale_by_values, k, x, x_rs, x_cs, y, y_rs, \
                           y_cs, c, c_inc, alpha, beta);                                                                \
    }
#define SDDMM_VECTORS(NAME, T, W) SDDMM(NAME, T, W, 1) SDDMM(NAME, T, W, 2) SDDMM(NAME, T, W, 4)
#define INSTANTIATE(NAME, T)                                                                                            \
    SDDMM_VECTORS(NAME, T, 4) SDDMM_VECTORS(NAME, T, 8) SDDMM_VECTORS(NAME, T, 16) SDDMM_VECTORS(NAME, T, 32)

FOR_EACH_FLOAT(INSTANTIATE)
