// CSR and COO SpMV, y = alpha*A*x + beta*y, on CUDA cores.
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
// - coo: one thread per entry with atomic adds into y (after y = beta*y).

template <typename T>
__device__ __forceinline__ typename acc_of<T>::type
row_dot(const u32* col_idx, const T* values, const T* x, u32 incx, u32 from, u32 to) {
    typename acc_of<T>::type sum = 0;
    for (u32 k = from; k < to; ++k) sum += to_acc(load(values + k)) * to_acc(load(x + (u64)load(col_idx + k) * incx));
    return sum;
}

template <typename T>
__device__ void spmv_csr_scalar(u32 rows, const u32* row_ptr, const u32* col_idx, const T* values, const T* x, u32 incx,
                                T* y, u32 incy, typename acc_of<T>::type alpha, typename acc_of<T>::type beta) {
    u32 row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    typename acc_of<T>::type sum = row_dot(col_idx, values, x, incx, load(row_ptr + row), load(row_ptr + row + 1));
    update(y + (u64)row * incy, alpha, sum, beta);
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
__device__ void spmv_csr_vector(u32 rows, const u32* row_ptr, const u32* col_idx, const T* values, const T* x, u32 incx,
                                T* y, u32 incy, typename acc_of<T>::type alpha, typename acc_of<T>::type beta,
                                u32 long_row) {
    u64 thread = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 row = thread / W;
    u32 lane = thread % W;
    // Lanes past the last row, or on a long row, stay to take part in the shuffles.
    u32 from = 0, to = 0;
    if (row < rows) {
        from = load(row_ptr + row);
        to = load(row_ptr + row + 1);
    }
    bool live = row < rows && to - from <= long_row;
    typename acc_of<T>::type sum = subwarp_row_dot<T, W>(col_idx, values, x, incx, live ? from : 0, live ? to : 0, lane);
    if (live && lane == 0) update(y + row * incy, alpha, sum, beta);
}

// One warp per segment of a long row: partial[s] = sum of the segment's products.
template <typename T>
__device__ void spmv_long_segments(u32 segments, u32 segment_length, const u32* segment_row, const u32* segment_start,
                                   const u32* row_ptr, const u32* col_idx, const T* values, const T* x, u32 incx,
                                   typename acc_of<T>::type* partial) {
    u64 s = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    u32 lane = threadIdx.x % 32;
    if (s >= segments) return;  // whole warps leave together
    u32 from = segment_start[s];
    u32 row_end = load(row_ptr + segment_row[s] + 1);
    u32 to = row_end - from < segment_length ? row_end : from + segment_length;
    typename acc_of<T>::type sum = subwarp_row_dot<T, 32>(col_idx, values, x, incx, from, to, lane);
    if (lane == 0) partial[s] = sum;
}

// One warp per long row: adds the row's segment partials in a fixed order and writes the row.
template <typename T>
__device__ void spmv_long_rows(u32 long_rows, const u32* long_row, const u32* first_segment,
                               const typename acc_of<T>::type* partial, T* y, u32 incy, typename acc_of<T>::type alpha,
                               typename acc_of<T>::type beta) {
    u64 r = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    u32 lane = threadIdx.x % 32;
    if (r >= long_rows) return;
    typename acc_of<T>::type sum = 0;
    for (u32 s = first_segment[r] + lane; s < first_segment[r + 1]; s += 32) sum += partial[s];
    sum = subwarp_sum<32>(sum);
    if (lane == 0) update(y + (u64)long_row[r] * incy, alpha, sum, beta);
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
// diagonal t * items.
extern "C" __global__ void spmv_merge_partition(u32 rows, u32 nnz, const u32* row_ptr, u32 items, u32 threads,
                                                u32* start_row, u32* start_entry) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t > threads) return;
    u64 total = (u64)rows + nnz;
    u64 d = (u64)t * items;
    merge_search(rows, nnz, row_ptr, d < total ? d : total, start_row + t, start_entry + t);
}

// A slot's row, with this bit set when the slot holds the first partial of its row.
#define FIRST_PARTIAL 0x80000000u
#define NO_PARTIAL 0xffffffffu

template <typename T>
__device__ void spmv_csr_merge(u32 rows, const u32* row_ptr, const u32* col_idx, const T* values, const T* x, u32 incx,
                               T* y, u32 incy, typename acc_of<T>::type alpha, typename acc_of<T>::type beta,
                               u32 threads, const u32* start_row, const u32* start_entry, u32* partial_row,
                               typename acc_of<T>::type* partial_sum) {
    u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads) return;
    u32 r0 = start_row[t], k0 = start_entry[t], r1 = start_row[t + 1], k1 = start_entry[t + 1];
    u32 head_row = NO_PARTIAL, tail_row = NO_PARTIAL;
    typename acc_of<T>::type head = 0, tail = 0;
    u32 k = k0;
    for (u32 row = r0; row < r1; ++row) {
        u32 end = load(row_ptr + row + 1);
        typename acc_of<T>::type sum = row_dot(col_idx, values, x, incx, k, end);
        if (row == r0 && load(row_ptr + row) < k0) {
            head_row = row;
            head = sum;
        } else {
            update(y + (u64)row * incy, alpha, sum, beta);
        }
        k = end;
    }
    if (r1 < rows && k1 > k) {
        tail = row_dot(col_idx, values, x, incx, k, k1);
        tail_row = r1 | (load(row_ptr + r1) >= k0 ? FIRST_PARTIAL : 0u);
    }
    partial_row[2 * t] = head_row;
    partial_sum[2 * t] = head;
    partial_row[2 * t + 1] = tail_row;
    partial_sum[2 * t + 1] = tail;
}

// One thread per slot; the slot holding a row's first partial adds the following partials of
// the same row in order and writes the row.
template <typename T>
__device__ void spmv_merge_fixup(u32 slots, const u32* partial_row, const typename acc_of<T>::type* partial_sum, T* y,
                                 u32 incy, typename acc_of<T>::type alpha, typename acc_of<T>::type beta) {
    u32 s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= slots || partial_row[s] == NO_PARTIAL || !(partial_row[s] & FIRST_PARTIAL)) return;
    u32 row = partial_row[s] & ~FIRST_PARTIAL;
    typename acc_of<T>::type sum = partial_sum[s];
    for (u32 next = s + 1; next < slots; ++next) {
        u32 r = partial_row[next];
        if (r == NO_PARTIAL) continue;
        if ((r & ~FIRST_PARTIAL) != row) break;
        sum += partial_sum[next];
    }
    update(y + (u64)row * incy, alpha, sum, beta);
}

// y = beta*y (zero when beta == 0, without reading y): the first step of atomic kernels.
template <typename T>
__device__ void scale_vector(u32 n, T* y, u32 incy, typename acc_of<T>::type beta) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    update(y + (u64)i * incy, typename acc_of<T>::type(0), typename acc_of<T>::type(0), beta);
}

template <typename T>
__device__ void spmv_coo(u32 nnz, const u32* row_idx, const u32* col_idx, const T* values, const T* x, u32 incx, T* y,
                         u32 incy, T alpha) {
    u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nnz) return;
    atomicAdd(y + (u64)load(row_idx + k) * incy, alpha * load(values + k) * load(x + (u64)load(col_idx + k) * incx));
}

#define CSR_ARGS(T)                                                                                                      \
    u32 rows, const u32 *row_ptr, const u32 *col_idx, const T *values, const T *x, u32 incx, T *y, u32 incy,            \
        acc_of<T>::type alpha, acc_of<T>::type beta
#define CSR_PASS rows, row_ptr, col_idx, values, x, incx, y, incy, alpha, beta

#define VECTOR(NAME, T, W)                                                                                               \
    extern "C" __global__ void spmv_csr_vector_##NAME##_w##W(CSR_ARGS(T), u32 long_row) {                               \
        spmv_csr_vector<T, W>(CSR_PASS, long_row);                                                                       \
    }

#define INSTANTIATE(NAME, T)                                                                                             \
    extern "C" __global__ void spmv_csr_scalar_##NAME(CSR_ARGS(T)) { spmv_csr_scalar<T>(CSR_PASS); }                  \
    VECTOR(NAME, T, 2) VECTOR(NAME, T, 4) VECTOR(NAME, T, 8) VECTOR(NAME, T, 16) VECTOR(NAME, T, 32)                   \
    extern "C" __global__ void spmv_csr_merge_##NAME(CSR_ARGS(T), u32 threads, const u32 *start_row,                    \
                                                     const u32 *start_entry, u32 *partial_row,                          \
                                                     acc_of<T>::type *partial_sum) {                                    \
        spmv_csr_merge<T>(CSR_PASS, threads, start_row, start_entry, partial_row, partial_sum);                         \
    }                                                                                                                    \
    extern "C" __global__ void spmv_merge_fixup_##NAME(u32 slots, const u32 *partial_row,                               \
                                                       const acc_of<T>::type *partial_sum, T *y, u32 incy,              \
                                                       acc_of<T>::type alpha, acc_of<T>::type beta) {                   \
        spmv_merge_fixup<T>(slots, partial_row, partial_sum, y, incy, alpha, beta);                                     \
    }                                                                                                                    \
    extern "C" __global__ void scale_vector_##NAME(u32 n, T *y, u32 incy, acc_of<T>::type beta) {                      \
        scale_vector<T>(n, y, incy, beta);                                                                             \
    }                                                                                                                    \
    extern "C" __global__ void spmv_long_segments_##NAME(u32 segments, u32 segment_length, const u32 *segment_row,      \
                                                         const u32 *segment_start, const u32 *row_ptr,                  \
                                                         const u32 *col_idx, const T *values, const T *x, u32 incx,     \
                                                         acc_of<T>::type *partial) {                                    \
        spmv_long_segments<T>(segments, segment_length, segment_row, segment_start, row_ptr, col_idx, values, x, incx, \
                              partial);                                                                                  \
    }                                                                                                                    \
    extern "C" __global__ void spmv_long_rows_##NAME(u32 long_rows, const u32 *long_row, const u32 *first_segment,      \
                                                     const acc_of<T>::type *partial, T *y, u32 incy,                    \
                                                     acc_of<T>::type alpha, acc_of<T>::type beta) {                     \
        spmv_long_rows<T>(long_rows, long_row, first_segment, partial, y, incy, alpha, beta);                           \
    }

FOR_EACH_FLOAT(INSTANTIATE)

#define COO(NAME, T)                                                                                                     \
    extern "C" __global__ void spmv_coo_##NAME(u32 nnz, const u32 *row_idx, const u32 *col_idx, const T *values,        \
                                               const T *x, u32 incx, T *y, u32 incy, T alpha) {                         \
        spmv_coo<T>(nnz, row_idx, col_idx, values, x, incx, y, incy, alpha);                                            \
    }
COO(f32, float)
COO(f64, double)
