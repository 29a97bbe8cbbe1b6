// ELL and HYB SpMV, y = alpha*A*x + beta*y, on CUDA cores. Parameters: EllSpmv<T>, HybRows<T>
// (src/ell.rs), with SpmvDense<T> (src/operand.rs); HYB's overflow segments are summed by
// spmv_long_segments of spmv.cu.
//
// - ell_spmv: one thread per row. Slot (row, k) sits at k*rows + row, so a warp's threads read
//   32 consecutive slots at each k: coalesced. A thread stops at its row's first padded slot
//   (padding only ends a row), so padding is never multiplied and x is read only at real
//   columns. Rows marked in `skip` (HYB rows with overflow) are left to hyb_overflow_rows.
// - HYB: the overflow entries are a CSR over the rows that have any, cut into segments of at
//   most LONG_ROW entries, one warp each (spmv_long_segments), so a long overflow row is spread
//   over many warps; then one warp per overflow row adds its ELL slots and its segments'
//   partial sums in a fixed order and writes the row once. Results are bit-reproducible.

// The sum over slots first, first + step, ... of `row`, up to its first padded slot.
template <typename T>
__device__ __forceinline__ typename acc_of<T>::type ell_row_dot(const EllSpmv<T>& p, u64 row, u32 first, u32 step) {
    const SpmvDense<T>& o = p.dense;
    typename acc_of<T>::type sum = 0;
    for (u32 k = first; k < p.width; k += step) {
        const u64 slot = (u64)k * p.rows + row;
        const u32 col = load(p.col_idx + slot);
        if (col == ELL_PADDING) break;
        sum += to_acc(load(p.values + slot)) * to_acc(load(o.x + (u64)col * o.incx));
    }
    return sum;
}

template <typename T>
__global__ void __launch_bounds__(ELL_BLOCK) ell_spmv(const EllSpmv<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= p.rows) return;
    if (p.skip != nullptr && (load(p.skip + row / 32) >> (row % 32) & 1u)) return;
    update(o.y + row * o.incy, o.alpha, ell_row_dot(p, row, 0, 1), o.beta);
}

// One warp per overflow row: its ELL slots, then its segments' partials (in segment order),
// reduced by the same shuffle tree on every run.
template <typename T>
__global__ void __launch_bounds__(ELL_BLOCK) hyb_overflow_rows(const HybRows<T> p) {
    const SpmvDense<T>& o = p.ell.dense;
    const u64 r = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const u32 lane = threadIdx.x % 32;
    if (r >= p.overflow_rows) return;  // whole warps leave together
    const u64 row = load(p.row + r);
    typename acc_of<T>::type sum = ell_row_dot(p.ell, row, lane, 32);
    const u32 end = load(p.first_segment + r + 1);
    for (u32 s = load(p.first_segment + r) + lane; s < end; s += 32) sum += load(p.partial + s);
    sum = subwarp_sum<32>(sum);
    if (lane == 0) update(o.y + row * o.incy, o.alpha, sum, o.beta);
}
