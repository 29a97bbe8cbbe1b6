// CSR and COO SpMV, y = alpha*A*x + beta*y, on CUDA cores. Parameters: SpmvCsr<T>,
// SpmvSegments<T>, SpmvLongRows<T>, SpmvMerge<T>, SpmvMergeFixup<T>, MergePartition, SpmvCoo<T>,
// CooRows (src/spmv.rs), with SpmvDense<T> (src/operand.rs).
//
// - scalar: one thread per row; best when rows are very short.
// - vector<W>: W lanes per row (W = 2..32) with a shuffle reduction; W is chosen from the mean
//   row length so lanes are not idle.
// - merge: merge-path load balancing (Merrill & Garland): every thread consumes the same number
//   of row ends plus entries, so one huge row is shared by many threads. Rows a thread starts but
//   does not finish leave partial sums in a workspace; a second kernel adds each split row's
//   partials in thread order and writes the row once, so results are deterministic.
// - split: the vector kernel for rows up to a length limit; longer rows are cut into segments
//   of that length, one warp each, whose partial sums one warp per long row adds in order. Skewed
//   matrices keep the vector kernel's coalesced loads and long rows use the whole GPU.
// - coo: one thread per entry with atomic adds into y (after y = beta*y); the row of each entry
//   is written once per plan by coo_rows.

template <typename T>
__device__ __forceinline__ typename acc_of<T>::type
row_dot(const u32* col_idx, const T* values, const T* x, u32 incx, u32 from, u32 to) {
    typename acc_of<T>::type sum = 0;
    for (u32 k = from; k < to; ++k) sum += to_acc(load(values + k)) * to_acc(load(x + (u64)load(col_idx + k) * incx));
    return sum;
}

template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_csr_scalar(const SpmvCsr<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= p.rows) return;
    const typename acc_of<T>::type sum =
        row_dot(p.col_idx, p.values, o.x, o.incx, load(p.row_ptr + row), load(p.row_ptr + row + 1));
    update(o.y + row * o.incy, o.alpha, sum, o.beta);
}

// Sum of entries from..to of a row over the W lanes of a sub-warp (lane 0 holds the total).
template <typename T, int W>
__device__ __forceinline__ typename acc_of<T>::type
subwarp_row_dot(const u32* col_idx, const T* values, const T* x, u32 incx, u32 from, u32 to, u32 lane) {
    typename acc_of<T>::type sum = 0;
    for (u32 k = from + lane; k < to; k += W) sum += to_acc(load(values + k)) * to_acc(load(x + (u64)load(col_idx + k) * incx));
    return subwarp_sum<W>(sum);
}

// Rows longer than `long_row` are left to the segment kernels.
template <typename T, int W>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_csr_vector(const SpmvCsr<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 thread = (u64)blockIdx.x * blockDim.x + threadIdx.x;
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
        subwarp_row_dot<T, W>(p.col_idx, p.values, o.x, o.incx, live ? from : 0, live ? to : 0, lane);
    if (live && lane == 0) update(o.y + row * o.incy, o.alpha, sum, o.beta);
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
    const typename acc_of<T>::type sum = subwarp_row_dot<T, 32>(p.col_idx, p.values, o.x, o.incx, from, to, lane);
    if (lane == 0) p.partial[s] = sum;
}

// One warp per long row: adds the row's segment partials in a fixed order and writes the row.
template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_long_rows(const SpmvLongRows<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 r = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const u32 lane = threadIdx.x % 32;
    if (r >= p.long_rows) return;
    typename acc_of<T>::type sum = 0;
    for (u32 s = p.first_segment[r] + lane; s < p.first_segment[r + 1]; s += 32) sum += p.partial[s];
    sum = subwarp_sum<32>(sum);
    if (lane == 0) update(o.y + (u64)p.long_row[r] * o.incy, o.alpha, sum, o.beta);
}

// Where diagonal `d` of the merge path crosses: rows finished (first) and entries consumed.
__device__ __forceinline__ void merge_search(u32 rows, u32 nnz, const u32* row_ptr, u64 d, u32* row, u32* entry) {
    u64 lo = d > nnz ? d - nnz : 0;
    u64 hi = d < rows ? d : rows;
    while (lo < hi) {
        u64 mid = (lo + hi) / 2;
        if ((u64)load(row_ptr + mid + 1) < d - mid) lo = mid + 1; else hi = mid;
    }
    *row = (u32)lo;
    *entry = (u32)(d - lo);
}

// Path coordinates of every thread's start, computed once per plan: thread t starts at
// diagonal t * items. Templated over its parameter struct, as coo_rows, so that a module compiled
// for another kernel of this file holds neither.
template <typename P>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_merge_partition(const P p) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t > p.threads) return;
    const u64 total = (u64)p.rows + p.nnz;
    const u64 d = t * p.items;
    merge_search(p.rows, p.nnz, p.row_ptr, d < total ? d : total, p.start_row + t, p.start_entry + t);
}

// A slot's row, with this bit set when the slot holds the first partial of its row.
#define FIRST_PARTIAL 0x80000000u
#define NO_PARTIAL 0xffffffffu

template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_csr_merge(const SpmvMerge<T> m) {
    const SpmvCsr<T>& p = m.csr;
    const SpmvDense<T>& o = p.dense;
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m.threads) return;
    const u32 r0 = m.start_row[t], k0 = m.start_entry[t], r1 = m.start_row[t + 1], k1 = m.start_entry[t + 1];
    u32 head_row = NO_PARTIAL, tail_row = NO_PARTIAL;
    typename acc_of<T>::type head = 0, tail = 0;
    u32 k = k0;
    for (u32 row = r0; row < r1; ++row) {
        const u32 end = load(p.row_ptr + row + 1);
        const typename acc_of<T>::type sum = row_dot(p.col_idx, p.values, o.x, o.incx, k, end);
        if (row == r0 && load(p.row_ptr + row) < k0) {
            head_row = row;
            head = sum;
        } else {
            update(o.y + (u64)row * o.incy, o.alpha, sum, o.beta);
        }
        k = end;
    }
    if (r1 < p.rows && k1 > k) {
        tail = row_dot(p.col_idx, p.values, o.x, o.incx, k, k1);
        tail_row = r1 | (load(p.row_ptr + r1) >= k0 ? FIRST_PARTIAL : 0u);
    }
    m.partial_row[2 * t] = head_row;
    m.partial_sum[2 * t] = head;
    m.partial_row[2 * t + 1] = tail_row;
    m.partial_sum[2 * t + 1] = tail;
}

// One thread per slot; the slot holding a row's first partial adds the following partials of
// the same row in order and writes the row.
template <typename T>
__global__ void __launch_bounds__(SPMV_BLOCK) spmv_merge_fixup(const SpmvMergeFixup<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 s = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= p.slots || p.partial_row[s] == NO_PARTIAL || !(p.partial_row[s] & FIRST_PARTIAL)) return;
    const u32 row = p.partial_row[s] & ~FIRST_PARTIAL;
    typename acc_of<T>::type sum = p.partial_sum[s];
    for (u64 next = s + 1; next < p.slots; ++next) {
        const u32 r = p.partial_row[next];
        if (r == NO_PARTIAL) continue;
        if ((r & ~FIRST_PARTIAL) != row) break;
        sum += p.partial_sum[next];
    }
    update(o.y + (u64)row * o.incy, o.alpha, sum, o.beta);
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
