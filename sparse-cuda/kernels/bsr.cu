// BSR SpMV, y = alpha*A*x + beta*y, on CUDA cores. Parameters: BsrSpmv<T> (src/bsr.rs), with
// SpmvDense<T> (src/operand.rs).
//
// bsr_spmv<T, W, K>: W lanes per block row (`vector`). Blocks are r x c, row-major, one after the
// other along the block row; a row of a block is c / K chunks of K consecutive slots, which a lane
// reads with one vector load. Lane l of a sub-warp owns row i = l / L % r of the block row and the
// chunks j = l % L, l % L + L, ... of each of its blocks (L lanes per row, L dividing c / K); the
// W / (r*L) groups of r*L lanes take the block row's blocks in turn. Slots without an entry (the
// occupancy mask) are skipped, so fill is never multiplied and x is never read past its end at a
// ragged right edge; without a mask every slot holds an entry. Each lane keeps one sum; the sums
// of one row are added by a fixed shuffle tree (first over its L lanes, then over the groups), so
// results are bit-reproducible. A lane issues the loads of BSR_GROUP of its chunks together (those
// past its last read that one again and add nothing), so that it waits on one chain of dependent
// loads (block column, then x) per group rather than per block.

// The lane's chunks of one block row, BSR_GROUP at a time. With WHOLE (no mask: every slot holds
// an entry; x contiguous and aligned to a chunk) x's chunk is one vector load too; otherwise x
// is read slot by slot where the mask, if any, has a bit.
template <typename T, int K, bool WHOLE>
__device__ __forceinline__ typename acc_of<T>::type bsr_lane_sum(const BsrSpmv<T>& p, u32 first, u32 chunks, u32 groups,
                                                                   u32 i, u32 lane) {
    typedef typename acc_of<T>::type A;
    const SpmvDense<T>& o = p.dense;
    const u32 L = p.row_lanes, block_size = p.r * p.c, first_bit = i * p.c;
    // k chunks of the lane a block (c / K and L are powers of two): chunk t is at block t / k.
    const u32 k = p.c / K / L, k_shift = __ffs(k) - 1;
    A sum = 0;
    for (u32 t = 0; t < chunks; t += BSR_GROUP) {
        A value[BSR_GROUP][K], xv[BSR_GROUP][K];
        u32 on[BSR_GROUP];
        u64 col[BSR_GROUP], slot[BSR_GROUP];
        // The group's block columns and masks first, so that its x loads wait on one round trip.
#pragma unroll
        for (u32 g = 0; g < BSR_GROUP; ++g) {
            const u32 u = min(t + g, chunks - 1);
            const u32 b = first + (u >> k_shift) * groups, j = (lane % L + (u & (k - 1)) * L) * K;
            col[g] = (u64)load(p.block_col + b) * p.c + j;
            slot[g] = (u64)b * block_size + first_bit + j;
            // A block row's bits never straddle two words: c divides 32.
            const u32 bits = WHOLE || p.mask == nullptr
                                 ? 0xffffffffu
                                 : load(p.mask + (u64)b * p.mask_words + first_bit / 32) >> (first_bit % 32 + j);
            on[g] = t + g < chunks ? bits & ((1u << K) - 1u) : 0u;
        }
#pragma unroll
        for (u32 g = 0; g < BSR_GROUP; ++g) {
            if (K == 1) {
                // Plain loads of one slot: ptxas schedules them better than predicated ones.
                value[g][0] = to_acc(load(p.values + slot[g]));
                xv[g][0] = on[g] ? to_acc(load(o.x + col[g] * o.incx)) : A(0);
                continue;
            }
            load_whole<T, K>(p.values + slot[g], true, value[g]);
            if (WHOLE) {
                load_whole<T, K>(o.x + col[g], on[g] != 0, xv[g]);
            } else {
#pragma unroll
                for (int s = 0; s < K; ++s) {
                    A one[1];
                    load_whole<T, 1>(o.x + (col[g] + s) * o.incx, on[g] >> s & 1u, one);
                    xv[g][s] = one[0];
                }
            }
        }
#pragma unroll
        for (u32 g = 0; g < BSR_GROUP; ++g)
#pragma unroll
            for (int s = 0; s < K; ++s)
                if (on[g] >> s & 1u) sum += value[g][s] * xv[g][s];
    }
    return sum;
}

template <typename T, int W, int K>
__global__ void __launch_bounds__(BSR_BLOCK) bsr_spmv(const BsrSpmv<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 br = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / W;
    if (br >= p.block_rows) return;  // whole sub-warps leave together
    const unsigned mask = subwarp_mask<W>();
    const u32 lane = threadIdx.x % W, L = p.row_lanes, group_lanes = p.r * L;
    const u32 groups = W / group_lanes, group = lane / group_lanes, i = lane % group_lanes / L;
    const u32 first = load(p.block_row_ptr + br) + group, end = load(p.block_row_ptr + br + 1);
    const u32 chunks = (first < end ? (end - first + groups - 1) / groups : 0) * (p.c / K / L);
    // One slot a chunk reads x alike either way: one copy of the loop, fewer registers.
    const bool whole = K > 1 && p.mask == nullptr && o.incx == 1 && (u64)o.x % (K * sizeof(T)) == 0;
    typedef typename acc_of<T>::type A;
    A sum = whole ? bsr_lane_sum<T, K, true>(p, first, chunks, groups, i, lane)
                  : bsr_lane_sum<T, K, false>(p, first, chunks, groups, i, lane);
    // Lane i*L of group 0 ends with row i's sum: first over its L lanes, then over the groups.
    for (u32 offset = L / 2; offset > 0; offset /= 2) sum += __shfl_down_sync(mask, sum, offset, W);
    for (u32 offset = W / 2; offset >= group_lanes; offset /= 2) sum += __shfl_down_sync(mask, sum, offset, W);
    const u64 row = br * p.r + i;
    if (group == 0 && lane % L == 0 && row < p.rows) update(o.y + row * o.incy, o.alpha, sum, o.beta);
}
