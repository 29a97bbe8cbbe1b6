// CSR and COO SpMV, y = alpha*A*x + beta*y, on CUDA cores. Parameters: SpmvCsr<T>,
// SpmvSegments<T>, SpmvSplit<T>, SpmvMerge<T>, SpmvMergeFixup<T>, MergePartition, SpmvCoo<T>,
// CooRows (src/spmv.rs), with SpmvDense<T> (src/operand.rs).
//
// - scalar: one thread per row; best when rows are very short.
// - vector<W, G>: W lanes per row (W = 2..32) with a shuffle reduction, each lane issuing the
//   loads of G steps together; W and G are chosen from the row statistics (src/spmv.rs,
//   vector_shape): W by the mean row length so lanes are not idle where chains of loads set
//   the time, fewer lanes with G = 4 where the stream does.
// - merge: merge-path load balancing (Merrill & Garland): every block consumes the same number
//   of row ends plus entries (a tile), and every thread the same share of its tile, so one huge
//   row is shared by many blocks and short rows stream through shared memory with coalesced
//   loads. Rows split between threads are joined by a keyed scan over the block; rows split
//   between blocks leave partial sums in a workspace that a second kernel adds in block order,
//   writing each row once, so results are deterministic.
// - split: one launch. Rows of up to a few iterations of the vector kernel's W lanes take those
//   lanes; longer rows are cut into segments of as many iterations of a whole warp, one warp
//   each, so that no warp walks a long chain of dependent loads. A row of one segment is written by its warp; the segments of a
//   longer row leave partial sums, and the warp that finishes last (a counter per row, reset by
//   that warp) adds them in segment order and writes the row. Skewed matrices keep coalesced
//   loads, long rows use the whole GPU, and results are deterministic.
// - coo: one thread per entry with atomic adds into y (after y = beta*y); the row of each entry
//   is written once per plan by coo_rows.

// Entries from, from + STEP, from + 2*STEP, ... below `to` of a row, dotted with x in that
// order. With GROUP > 1 the loads of GROUP steps are issued together (those of the last group
// past the row end read its last entry again and are not added), so that a thread waits on one
// chain of dependent loads (the column index, then x) per group instead of one per step: on the
// long rows whole warps walk, latency sets the time. Where a thread takes a step or two, the
// plain loop is faster.
template <typename T, u32 STEP, u32 GROUP>
__device__ __forceinline__ typename acc_of<T>::type
row_dot(const u32* col_idx, const T* values, const T* x, u32 incx, u32 from, u32 to) {
    typename acc_of<T>::type sum = 0;
    if constexpr (GROUP == 1) {
        for (u32 k = from; k < to; k += STEP) sum += to_acc(load(values + k)) * to_acc(load(x + (u64)load(col_idx + k) * incx));
    } else {
        // Steps counted from k, which stays below `to`, so that no index wraps.
        for (u32 k = from; k < to; k = to - k > GROUP * STEP ? k + GROUP * STEP : to) {
            T value[GROUP], xv[GROUP];
#pragma unroll
            for (u32 g = 0; g < GROUP; ++g) {
                const u32 e = g * STEP < to - k ? k + g * STEP : to - 1;
                value[g] = load(values + e);
                xv[g] = load(x + (u64)load(col_idx + e) * incx);
            }
#pragma unroll
            for (u32 g = 0; g < GROUP; ++g) {
                if (g * STEP < to - k) sum += to_acc(value[g]) * to_acc(xv[g]);
            }
        }
    }
    return sum;
}

template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_csr_scalar(const SpmvCsr<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= p.rows) return;
    const typename acc_of<T>::type sum =
        row_dot<T, 1, 1>(p.col_idx, p.values, o.x, o.incx, load(p.row_ptr + row), load(p.row_ptr + row + 1));
    update(o.y + row * o.incy, o.alpha, sum, o.beta);
}

// Sum of entries from..to of a row over the W lanes of a sub-warp (lane 0 holds the total), each
// lane's loads of G steps issued together (row_dot).
template <typename T, int W, u32 G>
__device__ __forceinline__ typename acc_of<T>::type
subwarp_row_dot(const u32* col_idx, const T* values, const T* x, u32 incx, u32 from, u32 to, u32 lane) {
    return subwarp_sum<W>(row_dot<T, W, G>(col_idx, values, x, incx, from + lane, to));
}

// Whole warps walk a row LONG_ROW_GROUP steps at a time (measured against 1, 2 and 8).
constexpr u32 LONG_ROW_GROUP = 4;

// The group of the rows W lanes take in `vector-split`: whole warps' on long rows, else a plain
// loop.
template <int W>
constexpr u32 split_group() { return W == 32 ? LONG_ROW_GROUP : 1; }

// The row of `thread` on W lanes, unless it is longer than `long_row` (left to whole warps).
template <typename T, int W, u32 G>
__device__ __forceinline__ void vector_row(const SpmvCsr<T>& p, u64 thread) {
    const SpmvDense<T>& o = p.dense;
    const u64 row = thread / W;
    const u32 lane = thread % W;
    // Lanes past the last row, or on a long row, stay to take part in the shuffles.
    u32 from = 0, to = 0;
    if (row < p.rows) {
        from = load(p.row_ptr + row);
        to = load(p.row_ptr + row + 1);
    }
    const bool live = row < p.rows && to - from <= p.long_row;
    const typename acc_of<T>::type sum =
        subwarp_row_dot<T, W, G>(p.col_idx, p.values, o.x, o.incx, live ? from : 0, live ? to : 0, lane);
    if (live && lane == 0) update(o.y + row * o.incy, o.alpha, sum, o.beta);
}

template <typename T, int W, u32 G>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_csr_vector(const SpmvCsr<T> p) {
    vector_row<T, W, G>(p, (u64)blockIdx.x * blockDim.x + threadIdx.x);
}

// One warp per segment of a long row: partial[s] = sum of the segment's products.
template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_long_segments(const SpmvSegments<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 s = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const u32 lane = threadIdx.x % 32;
    if (s >= p.segments) return;  // whole warps leave together
    const u32 from = p.segment_start[s];
    const u32 row_end = load(p.row_ptr + p.segment_row[s] + 1);
    const u32 to = row_end - from < p.segment_length ? row_end : from + p.segment_length;
    const typename acc_of<T>::type sum = subwarp_row_dot<T, 32, LONG_ROW_GROUP>(p.col_idx, p.values, o.x, o.incx, from, to, lane);
    if (lane == 0) p.partial[s] = sum;
}

// The first `segment_blocks` blocks take a warp per segment of the long rows, the others W lanes
// per row of the rest (rows longer than csr.long_row are skipped there).
template <typename T, int W>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_csr_split(const SpmvSplit<T> s) {
    typedef typename acc_of<T>::type A;
    const SpmvCsr<T>& p = s.csr;
    const SpmvDense<T>& o = p.dense;
    if (blockIdx.x >= s.segment_blocks) {
        vector_row<T, W, split_group<W>()>(p, (u64)(blockIdx.x - s.segment_blocks) * blockDim.x + threadIdx.x);
        return;
    }
    const u64 seg = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const u32 lane = threadIdx.x % 32;
    if (seg >= s.segments) return;  // whole warps leave together
    const u32 from = load(s.segment_start + seg), to = load(s.segment_end + seg);
    const u32 r = load(s.segment_row + seg);
    const A sum = subwarp_row_dot<T, 32, LONG_ROW_GROUP>(p.col_idx, p.values, o.x, o.incx, from, to, lane);
    const u32 first = load(s.first_segment + r), count = load(s.first_segment + r + 1) - first;
    const u64 out = (u64)load(s.matrix_row + r) * o.incy;
    if (count == 1) {
        if (lane == 0) update(o.y + out, o.alpha, sum, o.beta);
        return;
    }
    // The partial is made visible before the counter moves, so the warp that moves it last
    // reads every partial of the row from L2.
    u32 arrived = 0;
    if (lane == 0) {
        s.partial[seg] = sum;
        __threadfence();
        arrived = atomicAdd(s.arrived + r, 1u);
    }
    if (__shfl_sync(0xffffffffu, arrived, 0) != count - 1) return;
    __threadfence();
    A total = 0;
    for (u32 k = first + lane; k < first + count; k += 32) total += __ldcg(s.partial + k);
    total = subwarp_sum<32>(total);
    if (lane == 0) {
        update(o.y + out, o.alpha, total, o.beta);
        s.arrived[r] = 0;
    }
}

// Where diagonal `d` of the merge path of `rows` row ends (row_end(i)) and `entries` entries
// crosses: the row ends consumed before it; the entries consumed are d minus that.
template <typename RowEnd>
__device__ __forceinline__ u64 merge_search(u64 rows, u64 entries, RowEnd row_end, u64 d) {
    u64 lo = d > entries ? d - entries : 0;
    u64 hi = d < rows ? d : rows;
    while (lo < hi) {
        const u64 mid = (lo + hi) / 2;
        if (row_end(mid) < d - mid) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Path coordinates of every tile's start, computed once per plan: tile t starts at diagonal
// t * items. Templated over its parameter struct, as coo_rows, so that a module compiled for
// another kernel of this file holds neither.
template <typename P>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_merge_partition(const P p) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t > p.threads) return;
    const u64 total = (u64)p.rows + p.nnz;
    const u64 d = t * p.items < total ? t * p.items : total;
    const u32* row_ptr = p.row_ptr;
    const u64 row = merge_search(p.rows, p.nnz, [&](u64 i) { return (u64)load(row_ptr + i + 1); }, d);
    p.start_row[t] = (u32)row;
    p.start_entry[t] = (u32)(d - row);
}

// A slot's row, with these bits set when the slot holds the first or the last partial of its
// row (rows stay below 2^30: the plan checks).
#define FIRST_PARTIAL 0x80000000u
#define LAST_PARTIAL 0x40000000u
#define NO_PARTIAL 0xffffffffu
#define PARTIAL_ROW 0x3fffffffu
#define MERGE_TILE (MERGE_BLOCK * MERGE_ITEMS)

// A run of equal keys and the sum over it: the element of a segmented (by key) scan. Keys are
// path rows, non-decreasing over the threads of a block, so a sum never skips a key.
template <typename A>
struct KeyedSum {
    u32 key;
    A sum;
};

// a then b: b's sum extended by a's when a ends in b's key.
template <typename A>
__device__ __forceinline__ KeyedSum<A> keyed_add(KeyedSum<A> a, KeyedSum<A> b) {
    if (a.key == b.key) b.sum += a.sum;
    return b;
}

// The inclusive keyed scan over the threads of a block, in a fixed order.
template <typename A>
__device__ __forceinline__ KeyedSum<A> block_keyed_scan(KeyedSum<A> v, u32* warp_key, A* warp_sum) {
    const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
        KeyedSum<A> before;
        before.key = __shfl_up_sync(0xffffffffu, v.key, offset);
        before.sum = __shfl_up_sync(0xffffffffu, v.sum, offset);
        if (lane >= offset) v = keyed_add(before, v);
    }
    if (lane == 31) {
        warp_key[warp] = v.key;
        warp_sum[warp] = v.sum;
    }
    __syncthreads();
    if (warp > 0) {
        KeyedSum<A> prefix = {warp_key[0], warp_sum[0]};
        for (u32 w = 1; w < warp; ++w) prefix = keyed_add(prefix, KeyedSum<A>{warp_key[w], warp_sum[w]});
        v = keyed_add(prefix, v);
    }
    return v;
}

// One block per tile of MERGE_TILE path items (row ends plus entries). The tile's products and
// row ends are staged in shared memory by coalesced loads; each thread then walks MERGE_ITEMS
// items of the tile. A row that ends in a thread but started in an earlier one adds the earlier
// threads' sums from a keyed scan over the block. Rows that cross the tile's edges leave their
// sums in the tile's two slots (2t: the row the tile starts inside and ends, 2t + 1: the row it
// ends inside) for spmv_merge_fixup.
template <typename T>
__global__ void __launch_bounds__(MERGE_BLOCK) spmv_csr_merge(const SpmvMerge<T> m) {
    typedef typename acc_of<T>::type A;
    const SpmvCsr<T>& p = m.csr;
    const SpmvDense<T>& o = p.dense;
    // Row ends relative to the tile's first entry, and a sentinel past the last.
    __shared__ u32 row_end[MERGE_TILE + 1];
    __shared__ A product[MERGE_TILE];
    __shared__ u32 warp_key[MERGE_BLOCK / 32];
    __shared__ A warp_sum[MERGE_BLOCK / 32];
    const u32 tile = blockIdx.x, t = threadIdx.x;
    const u32 r0 = m.start_row[tile], k0 = m.start_entry[tile];
    const u32 rows = m.start_row[tile + 1] - r0, entries = m.start_entry[tile + 1] - k0;
    // Every load of the tile issued before the first use, so a thread has MERGE_ITEMS gathers of
    // x in flight rather than one at a time.
    u32 col[MERGE_ITEMS];
    T value[MERGE_ITEMS];
#pragma unroll
    for (int n = 0; n < MERGE_ITEMS; ++n) {
        const u32 e = t + n * MERGE_BLOCK;
        if (e < entries) {
            col[n] = load(p.col_idx + (u64)k0 + e);
            value[n] = load(p.values + (u64)k0 + e);
        }
    }
#pragma unroll
    for (int n = 0; n < MERGE_ITEMS; ++n) {
        const u32 e = t + n * MERGE_BLOCK;
        if (e < entries) product[e] = to_acc(value[n]) * to_acc(load(o.x + (u64)col[n] * o.incx));
    }
#pragma unroll
    for (int n = 0; n < MERGE_ITEMS; ++n) {
        const u32 i = t + n * MERGE_BLOCK;
        if (i < rows) row_end[i] = load(p.row_ptr + (u64)r0 + i + 1) - k0;
    }
    if (t == 0) row_end[rows] = NO_PARTIAL;
    // The tile's first row began in an earlier tile.
    const bool head_split = rows + entries > 0 && load(p.row_ptr + r0) < k0;
    __syncthreads();

    const u32 items = rows + entries;
    const u32 d = t * MERGE_ITEMS < items ? t * MERGE_ITEMS : items;
    u32 i = (u32)merge_search(rows, entries, [&](u64 r) { return (u64)row_end[r]; }, d);
    u32 j = d - i;
    const u32 start_row = i;
    bool ended_start_row = false;
    A run = 0, start_row_sum = 0;
#pragma unroll
    for (int n = 0; n < MERGE_ITEMS; ++n) {
        if (i + j < items) {
            if (j < row_end[i]) {
                run += product[j];
                ++j;
            } else {
                if (i == start_row) {
                    start_row_sum = run;
                    ended_start_row = true;
                } else {
                    update(o.y + (u64)(r0 + i) * o.incy, o.alpha, run, o.beta);
                }
                run = 0;
                ++i;
            }
        }
    }
    const KeyedSum<A> mine = {i, run};
    const KeyedSum<A> scanned = block_keyed_scan(mine, warp_key, warp_sum);
    // The sums of the earlier threads on this thread's first row: the scan of the thread before.
    KeyedSum<A> before;
    before.key = __shfl_up_sync(0xffffffffu, scanned.key, 1);
    before.sum = __shfl_up_sync(0xffffffffu, scanned.sum, 1);
    if (t % 32 == 0 && t > 0) {
        // The last thread of the previous warp: its inclusive scan is the prefix of the warps
        // before plus that warp's own total.
        KeyedSum<A> prefix = {warp_key[0], warp_sum[0]};
        for (u32 w = 1; w < t / 32; ++w) prefix = keyed_add(prefix, KeyedSum<A>{warp_key[w], warp_sum[w]});
        before = prefix;
    }
    if (ended_start_row) {
        const A total = start_row_sum + (t > 0 && before.key == start_row ? before.sum : A(0));
        if (start_row == 0 && head_split) {
            m.partial_row[2 * tile] = r0 | LAST_PARTIAL;
            m.partial_sum[2 * tile] = total;
        } else {
            update(o.y + (u64)(r0 + start_row) * o.incy, o.alpha, total, o.beta);
        }
    }
    if (t == 0 && !(rows > 0 && head_split)) m.partial_row[2 * tile] = NO_PARTIAL;
    if (t == MERGE_BLOCK - 1) {
        // The row the tile ends inside holds entries of this tile when they follow the last row
        // end (or, with no row end, when there are entries at all).
        const u32 last_end = rows > 0 ? row_end[rows - 1] : 0;
        const bool tail = entries > last_end;
        m.partial_row[2 * tile + 1] = tail ? (r0 + rows) | (rows > 0 || !head_split ? FIRST_PARTIAL : 0u) : NO_PARTIAL;
        m.partial_sum[2 * tile + 1] = scanned.sum;
    }
}

// One warp per slot; the warp of a slot holding a row's first partial adds the row's partials
// up to its last, in slot order, and writes the row.
template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_merge_fixup(const SpmvMergeFixup<T> p) {
    typedef typename acc_of<T>::type A;
    const SpmvDense<T>& o = p.dense;
    const u64 s = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const u32 lane = threadIdx.x % 32;
    if (s >= p.slots) return;  // whole warps leave together
    const u32 first = p.partial_row[s];
    if (first == NO_PARTIAL || !(first & FIRST_PARTIAL)) return;
    A sum = lane == 0 ? p.partial_sum[s] : A(0);
    for (u64 base = s + 1; base < p.slots; base += 32) {
        const u64 n = base + lane;
        const u32 r = n < p.slots ? p.partial_row[n] : NO_PARTIAL;
        const unsigned last = __ballot_sync(0xffffffffu, r != NO_PARTIAL && (r & LAST_PARTIAL));
        // Every partial between the first and the first last one belongs to this row.
        const u32 stop = last ? __ffs(last) - 1 : 31;
        if (lane <= stop && r != NO_PARTIAL) sum += p.partial_sum[n];
        if (last) break;
    }
    sum = subwarp_sum<32>(sum);
    if (lane == 0) update(o.y + (u64)(first & PARTIAL_ROW) * o.incy, o.alpha, sum, o.beta);
}

// One warp per row writes the row's index into its entries' slots: the COO view of the CSR,
// made on the device once per plan.
template <typename P>
__global__ void __launch_bounds__(SPMV_BLOCK) coo_rows(const P p) {
    const u64 row = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (row >= p.rows) return;
    const u32 end = p.row_ptr[row + 1];
    for (u32 k = p.row_ptr[row] + threadIdx.x % 32; k < end; k += 32) p.row_idx[k] = (u32)row;
}

// y has been scaled by beta (the plan's scale_dense): every entry adds alpha*a*x atomically.
template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_coo(const SpmvCoo<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.nnz) return;
    atomicAdd(o.y + (u64)load(p.row_idx + k) * o.incy,
              o.alpha * to_acc(load(p.values + k)) * to_acc(load(o.x + (u64)load(p.col_idx + k) * o.incx)));
}
