// BSR SpMV, y = alpha*A*x + beta*y, on CUDA cores. Parameters: BsrSpmv<T> (src/bsr.rs), with
// SpmvDense<T> (src/operand.rs).
//
// bsr_spmv<T, W>: W lanes per block row (`vector`). Blocks are r x c, row-major, one after the
// other along the block row. Lane l of a sub-warp owns row i = l / L % r of the block row and the
// block columns j = l % L, l % L + L, ... (L lanes per row, L dividing c); the W / (r*L) groups
// of r*L lanes take the block row's blocks in turn. With L = c a group reads whole blocks with
// consecutive lanes on consecutive values. Slots without an entry (the occupancy mask) are
// skipped, so fill is never multiplied and x is never read past its end at a ragged right edge;
// without a mask every slot holds an entry. Each lane keeps one sum; the sums of one row are
// added by a fixed shuffle tree (first over its L lanes, then over the groups), so results are
// bit-reproducible. A lane issues the loads of BSR_GROUP of its slots together (those past its
// last read that one again and add nothing), so that it waits on one chain of dependent loads
// (block column, then x) per group rather than per block.

#define BSR_GROUP 4

template <typename T, int W>
__global__ void __launch_bounds__(BSR_BLOCK) bsr_spmv(const BsrSpmv<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 br = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / W;
    if (br >= p.block_rows) return;  // whole sub-warps leave together
    const unsigned mask = subwarp_mask<W>();
    const u32 lane = threadIdx.x % W, L = p.row_lanes, group_lanes = p.r * L;
    const u32 groups = W / group_lanes, group = lane / group_lanes, i = lane % group_lanes / L;
    const u32 block_size = p.r * p.c, first_bit = i * p.c;
    // The lane's slots: per block b = first, first + groups, ... the columns j = lane % L,
    // lane % L + L, ...; k of them a block (c and L are powers of two), slot t at block t / k.
    const u32 k = p.c / L, k_shift = __ffs(k) - 1;
    const u32 first = load(p.block_row_ptr + br) + group, end = load(p.block_row_ptr + br + 1);
    const u32 slots = (first < end ? (end - first + groups - 1) / groups : 0) << k_shift;
    typedef typename acc_of<T>::type A;
    A sum = 0;
    for (u32 t = 0; t < slots; t += BSR_GROUP) {
        A value[BSR_GROUP], xv[BSR_GROUP];
        bool on[BSR_GROUP];
#pragma unroll
        for (u32 g = 0; g < BSR_GROUP; ++g) {
            const u32 u = min(t + g, slots - 1);
            const u32 b = first + (u >> k_shift) * groups, j = lane % L + (u & (k - 1)) * L;
            const u64 col = (u64)load(p.block_col + b) * p.c;
            // A block row's bits never straddle two words: c divides 32.
            const u32 bits = p.mask == nullptr
                                 ? 0xffffffffu
                                 : load(p.mask + (u64)b * p.mask_words + first_bit / 32) >> (first_bit % 32);
            on[g] = t + g < slots && (bits >> j & 1u);
            value[g] = to_acc(load(p.values + (u64)b * block_size + first_bit + j));
            xv[g] = on[g] ? to_acc(load(o.x + (col + j) * o.incx)) : A(0);
        }
#pragma unroll
        for (u32 g = 0; g < BSR_GROUP; ++g)
            if (on[g]) sum += value[g] * xv[g];
    }
    // Lane i*L of group 0 ends with row i's sum: first over its L lanes, then over the groups.
    for (u32 offset = L / 2; offset > 0; offset /= 2) sum += __shfl_down_sync(mask, sum, offset, W);
    for (u32 offset = W / 2; offset >= group_lanes; offset /= 2) sum += __shfl_down_sync(mask, sum, offset, W);
    const u64 row = br * p.r + i;
    if (group == 0 && lane % L == 0 && row < p.rows) update(o.y + row * o.incy, o.alpha, sum, o.beta);
}
