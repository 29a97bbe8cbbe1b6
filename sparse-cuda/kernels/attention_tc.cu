// Fused sparse attention on tensor cores (after Fused3S and FlashSparse), f16 and bf16 storage:
// O = softmax_row(scale*(Q*K^T) ∘ spy(A) [+ A]) * V for H heads side by side (head h in columns
// h*d .. of Q and K, h*dv .. of V and O); scores, softmax and sums in f32. Parameters:
// AttentionTc<T> (src/attention/tensor_core.rs, which builds the layout below).
//
// A is held as row windows of 16 rows. A window's distinct columns, ascending, fill blocks of 16
// slots (the last block padded with a column of its own and no entries), and per (block, row of
// the window) a 16-bit bitmap says which slots the row has. A warp takes one item (a window, or a
// piece of a long one) and one head, and per block:
//   S (16 rows x 16 slots) = Q_w K_slots^T, two mma.m16n8k16 per 16 of d; Q's fragments stay in
//     registers for the whole item, K's and V's are loaded from the slots' rows (16-byte loads
//     straight into the fragments' registers, all of a block's issued before the first MMA);
//   the bitmap masks S (a slot a row lacks scores -inf), and each row's running maximum (started
//     at -inf) and sum are updated and its accumulators rescaled (the online softmax);
//   O (16 x dv) += P V_slots: the C fragment of m16n8k16 is laid out as its A fragment, so P goes
//     from the score registers to the MMA, split into two f16 parts (three bf16 parts) whose sum
//     is the f32 weight, so the weights enter the sum with f32 accuracy.
// A block whose V rows hold a non-finite value takes its weighted sum on CUDA cores instead:
// the MMA would multiply that value by the zero weight of every row without the entry (0 * inf
// is NaN), where only the rows with the entry may see it.
//
// Lane l = 4g + t. Fragments of m16n8k16 (PTX ISA), two elements per register, the lower first:
//   A (16 x 16): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16 x 8):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16 x 8):  c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
// S: the k of d is taken in a permuted order shared by Q and K, so that each lane's operands are
// 8 consecutive elements of a row (one 16-byte load): lane t's elements 32c + 8t .. +7 are, in
// words w0..w3, the runs (2t, 2t+8) of k-step 2c (w0, w1) and of k-step 2c + 1 (w2, w3). Lane
// (g, t) loads rows g and g+8 of Q and the K rows of slots g and 8 + g.
// PV: n (the columns of V) is permuted instead: fragment column g of MMA j is column 8g + j of a
// chunk of 64, so lane (g, t) loads 8 consecutive elements at 8g of the V rows of slots 2t,
// 2t+1, 2t+8, 2t+9, and ends with columns 16t .. 16t+15 of the chunk for rows g and g+8.
// Every output is written once; a long window's pieces are combined in piece order
// (attention_tc_combine): runs are bit-reproducible.

#define ATTN_TC_NEG_INF __int_as_float(0xff800000)
// item_piece of an item that is a whole window.
#define ATTN_TC_WHOLE 0xffffffffu

template <typename T> struct tc_type;
// PARTS: the parts of a weight (their sum is the f32 weight to about 2^-22); EXP: the exponent
// bits of one element.
template <> struct tc_type<half_t> {
    static const int PARTS = 2;
    static const u32 EXP = 0x7c00u;
};
template <> struct tc_type<bf16_t> {
    static const int PARTS = 3;
    static const u32 EXP = 0x7f80u;
};

// d += A B: 16 x 8 f32 += (16 x 16) (16 x 8) in T.
template <typename T>
__device__ __forceinline__ void tc_mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1);
#define ATTN_TC_MMA(TYPE, NAME)                                                                                      \
    template <>                                                                                                      \
    __device__ __forceinline__ void tc_mma<TYPE>(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {                \
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." NAME "." NAME ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
                     "{%8,%9}, {%0,%1,%2,%3};"                                                                       \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                                \
    }
ATTN_TC_MMA(half_t, "f16")
ATTN_TC_MMA(bf16_t, "bf16")

// x as PARTS values of T, each the rounding of what the ones before it left.
template <typename T>
__device__ __forceinline__ void tc_split(float x, u32 (&bits)[tc_type<T>::PARTS]) {
#pragma unroll
    for (int i = 0; i < tc_type<T>::PARTS; ++i) {
        const T part = from_acc<T>(x);
        bits[i] = part.bits;
        x -= to_acc(part);
    }
}

// Bit 15 of either half of the result is set when that element of the word is infinite or NaN:
// its exponent bits, all ones, carry into bit 15 when (0x8000 - EXP) is added, and no other
// exponent reaches it. OR the results of many words and test them once with
// tc_nonfinite_found.
template <typename T>
__device__ __forceinline__ u32 tc_nonfinite_bits(u32 w) {
    const u32 e = tc_type<T>::EXP * 0x10001u;
    return (w & e) + (0x8000u - tc_type<T>::EXP) * 0x10001u;
}

__device__ __forceinline__ bool tc_nonfinite_found(u32 bits) { return (bits & 0x80008000u) != 0; }

// out[e*cs] = x[e] for e < 16 and first + e < len (columns of a head); one pair of 16-byte stores
// when `vec` (contiguous and aligned: the host checks) and the run is whole.
template <typename T>
__device__ __forceinline__ void tc_store16(T* out, u32 first, u32 len, u32 cs, bool vec, const float (&x)[16]) {
    if (vec && first + 16 <= len) {
        u32 w[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = (u32)from_acc<T>(x[2 * i]).bits | (u32)from_acc<T>(x[2 * i + 1]).bits << 16;
        uint4* dst = reinterpret_cast<uint4*>(out + first);
        dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
        dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
        return;
    }
#pragma unroll
    for (int e = 0; e < 16; ++e)
        if (first + e < len) out[(u64)(first + e) * cs] = from_acc<T>(x[e]);
}

// attention_tc<T, KC, DVC, KS>: a warp per (item, head, slice of 64*DVC columns of dv);
// d <= 32*KC. The slices of an item are neighbouring warps of one block. With KS = 1 each slice
// computes all the scores (the K rows one loads are in L1 for the others). With KS = 2 there are
// exactly two slices, and slice w multiplies only chunks w*KC/2 .. of d: the pair adds its two
// partial scores through shared memory (slice 0's first, in both warps, so they agree bit for
// bit), which halves each warp's Q and K fragments and so its registers.
template <typename T, int KC, int DVC, int KS>
__global__ void __launch_bounds__(ATTN_TC_THREADS) attention_tc(const AttentionTc<T> p) {
    const int PARTS = tc_type<T>::PARTS;
    const int KW = KC / KS;  // chunks of d this warp multiplies
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u32 warp = threadIdx.x / 32;
    const u64 work = (u64)blockIdx.x * ATTN_TC_WARPS + warp;
    if (work >= (u64)p.items * p.ops.heads * p.slices) return;
    const u32 item = (u32)(work / p.slices / p.ops.heads), head = (u32)(work / p.slices % p.ops.heads);
    const u32 slice = (u32)(work % p.slices);
    const u32 window = load(p.item_window + item), begin = load(p.item_begin + item);
    const u32 end = load(p.item_end + item), piece = load(p.item_piece + item);
    const u32 v_first = slice * 64 * DVC;
    const u32 k_first = KS == 1 ? 0 : slice * KW;
    const T* k_head = p.ops.k + (u64)head * p.ops.d * p.ops.k_cs;
    const T* v_head = p.ops.v + (u64)head * p.ops.dv * p.ops.v_cs;

    // Rows g (r = 0) and g+8 (r = 1) of the window.
    u32 q_frag[KW][2][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const u32 row = window * 16 + g + 8 * r;
        const bool live = row < p.rows;
        const T* q_row = p.ops.q + (u64)(live ? row : 0) * p.ops.q_rs + (u64)head * p.ops.d * p.ops.q_cs;
#pragma unroll
        for (int c = 0; c < KW; ++c)
            load_run<T, 8>(q_row, 32 * (k_first + c) + 8 * t, live ? p.ops.d : 0, p.ops.q_cs, p.q_vec, q_frag[c][r]);
    }
    // Partial scores exchanged by a KS = 2 pair, two buffers used in turn: a warp writes one
    // while its partner may still read the other, and the barrier between keeps them one apart.
    __shared__ float exchange[KS == 1 ? 1 : 2][KS == 1 ? 1 : ATTN_TC_WARPS][32][8];
    // acc[c][j][2r + e]: row g + 8r, column 64c + 8(2t + e) + j of the slice.
    float acc[DVC][8][4];
#pragma unroll
    for (int c = 0; c < DVC; ++c)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[c][j][i] = 0.0f;
    float run_max[2] = {ATTN_TC_NEG_INF, ATTN_TC_NEG_INF}, run_sum[2] = {0.0f, 0.0f};
    // The CSR position of each row's next entry (read for the bias only).
    u32 entry[2] = {0, 0};
    if (p.ops.bias)
#pragma unroll
        for (int r = 0; r < 2; ++r) entry[r] = load(p.item_entry + (u64)item * 16 + g + 8 * r);

    for (u32 b = begin; b < end; ++b) {
        const u32* cols = p.blk_col + (u64)b * 16;
        u32 k_frag[2][KW][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c = 0; c < KW; ++c)
                load_run<T, 8>(k_head + (u64)load(cols + 8 * h + g) * p.ops.k_rs, 32 * (k_first + c) + 8 * t, p.ops.d,
                               p.ops.k_cs, p.k_vec, k_frag[h][c]);
        // Slots 2t, 2t+1, 2t+8, 2t+9.
        u32 v_run[4][DVC][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < DVC; ++c)
                load_run<T, 8>(v_head + (u64)load(cols + 2 * t + (i & 1) + 8 * (i >> 1)) * p.ops.v_rs, v_first + 64 * c + 8 * g, p.ops.dv,
                               p.ops.v_cs, p.v_vec, v_run[i][c]);
        u32 bits[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) bits[r] = __ldg(p.blk_bits + (u64)b * 16 + g + 8 * r);

        // s[h][2r + e]: row g + 8r, slot 8h + 2t + e.
        float s[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int i = 0; i < 4; ++i) s[h][i] = 0.0f;
#pragma unroll
        for (int c = 0; c < KW; ++c)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const u32 a[4] = {q_frag[c][0][2 * half], q_frag[c][1][2 * half], q_frag[c][0][2 * half + 1],
                                  q_frag[c][1][2 * half + 1]};
#pragma unroll
                for (int h = 0; h < 2; ++h) tc_mma<T>(s[h], a, k_frag[h][c][2 * half], k_frag[h][c][2 * half + 1]);
            }
        if (KS == 2) {
            float* mine = exchange[b & 1][warp][lane];
#pragma unroll
            for (int i = 0; i < 8; ++i) mine[i] = s[i / 4][i % 4];
            // Named barrier 1 + warp / 2 joins the pair's 64 threads.
            asm volatile("bar.sync %0, 64;" ::"r"(1 + warp / 2) : "memory");
            const float* other = exchange[b & 1][warp ^ 1][lane];
#pragma unroll
            for (int i = 0; i < 8; ++i) s[i / 4][i % 4] = slice == 0 ? s[i / 4][i % 4] + other[i] : other[i] + s[i / 4][i % 4];
        }

        // The online softmax; s becomes the weights exp(score - running maximum), 0 off the pattern.
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float block_max = ATTN_TC_NEG_INF;
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const u32 slot = 8 * h + 2 * t + e;
                    float x = ATTN_TC_NEG_INF;
                    if (bits[r] >> slot & 1) {
                        x = s[h][2 * r + e] * p.ops.scale;
                        if (p.ops.bias) x += to_acc(load(p.values + entry[r] + __popc(bits[r] & ((1u << slot) - 1))));
                    }
                    s[h][2 * r + e] = x;
                    block_max = fmaxf(block_max, x);
                }
            block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
            block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 2));
            const float new_max = fmaxf(run_max[r], block_max);
            // __expf (ex2.approx): off by at most about 2^-18 relative for the weights above 2^-23
            // of the row's largest, far below the f16 or bf16 rounding of O; 8% faster than expf
            // at d = 64.
            const float rescale = new_max == ATTN_TC_NEG_INF ? 1.0f : __expf(run_max[r] - new_max);
            float sum = 0.0f;
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float x = s[h][2 * r + e];
                    const float w = x == ATTN_TC_NEG_INF ? 0.0f : __expf(x - new_max);
                    s[h][2 * r + e] = w;
                    sum += w;
                }
            run_sum[r] = run_sum[r] * rescale + sum;
            run_max[r] = new_max;
            // Most blocks past a row's first few leave every maximum of the warp where it was.
            if (__any_sync(0xffffffffu, rescale != 1.0f)) {
#pragma unroll
                for (int c = 0; c < DVC; ++c)
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        acc[c][j][2 * r] *= rescale;
                        acc[c][j][2 * r + 1] *= rescale;
                    }
            }
            if (p.ops.bias) entry[r] += __popc(bits[r]);
        }

        u32 nonfinite = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < DVC; ++c)
#pragma unroll
                for (int w = 0; w < 4; ++w) nonfinite |= tc_nonfinite_bits<T>(v_run[i][c][w]);
        if (!__any_sync(0xffffffffu, tc_nonfinite_found(nonfinite))) {
            // a_q for q = 2h + r: row g + 8r, slots 8h + 2t, 8h + 2t + 1.
            u32 p_frag[PARTS][4];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                u32 lo[PARTS], hi[PARTS];
                tc_split<T>(s[q / 2][2 * (q % 2)], lo);
                tc_split<T>(s[q / 2][2 * (q % 2) + 1], hi);
#pragma unroll
                for (int part = 0; part < PARTS; ++part) p_frag[part][q] = lo[part] | hi[part] << 16;
            }
#pragma unroll
            for (int c = 0; c < DVC; ++c)
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const u32 select = j % 2 ? 0x7632 : 0x5410;
                    const u32 b0 = __byte_perm(v_run[0][c][j / 2], v_run[1][c][j / 2], select);
                    const u32 b1 = __byte_perm(v_run[2][c][j / 2], v_run[3][c][j / 2], select);
#pragma unroll
                    for (int part = 0; part < PARTS; ++part) tc_mma<T>(acc[c][j], p_frag[part], b0, b1);
                }
        } else {
            // Lane (g, t) adds, for rows g and g+8, the slots each row has times its columns
            // 16t .. 16t+15 of each chunk, read element by element. A slot's weights are in lane
            // (g, (slot % 8) / 2), in s[slot / 8][2r + slot % 2].
#pragma unroll 1
            for (u32 slot = 0; slot < 16; ++slot) {
                const u32 from = 4 * g + slot % 8 / 2;
                float w[2];
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const float lo = slot < 8 ? s[0][2 * r] : s[1][2 * r];
                    const float hi = slot < 8 ? s[0][2 * r + 1] : s[1][2 * r + 1];
                    w[r] = __shfl_sync(0xffffffffu, slot % 2 ? hi : lo, from);
                }
                const T* v_row = v_head + (u64)load(cols + slot) * p.ops.v_rs;
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    if (!(bits[r] >> slot & 1)) continue;
#pragma unroll
                    for (int c = 0; c < DVC; ++c)
#pragma unroll
                        for (int x = 0; x < 16; ++x) {
                            const u32 col = v_first + 64 * c + 16 * t + x;
                            if (col < p.ops.dv) acc[c][x % 8][2 * r + x / 8] += w[r] * to_acc(load(v_row + (u64)col * p.ops.v_cs));
                        }
                }
            }
        }
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        run_sum[r] += __shfl_xor_sync(0xffffffffu, run_sum[r], 1);
        run_sum[r] += __shfl_xor_sync(0xffffffffu, run_sum[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const u32 row = window * 16 + g + 8 * r;
        if (row >= p.rows) continue;
        if (piece == ATTN_TC_WHOLE) {
            if (slice == 0 && t == 0) {
                p.stats[2 * ((u64)row * p.ops.heads + head)] = run_max[r];
                p.stats[2 * ((u64)row * p.ops.heads + head) + 1] = run_sum[r];
            }
            const float inv = run_sum[r] == 0.0f ? 0.0f : 1.0f / run_sum[r];
            T* o_row = p.ops.o + (u64)row * p.ops.o_rs + (u64)head * p.ops.dv * p.ops.o_cs;
#pragma unroll
            for (int c = 0; c < DVC; ++c) {
                float x[16];
#pragma unroll
                for (int e = 0; e < 16; ++e) x[e] = acc[c][e % 8][2 * r + e / 8] * inv;
                tc_store16<T>(o_row, v_first + 64 * c + 16 * t, p.ops.dv, p.ops.o_cs, p.o_vec, x);
            }
        } else {
            // A piece: its maximum, sum and unnormalised sums, for attention_tc_combine.
            const u64 at = ((u64)piece * p.ops.heads + head) * 16 + g + 8 * r;
            if (slice == 0 && t == 0) {
                p.part_stats[2 * at] = run_max[r];
                p.part_stats[2 * at + 1] = run_sum[r];
            }
#pragma unroll
            for (int c = 0; c < DVC; ++c)
#pragma unroll
                for (int e = 0; e < 16; ++e) {
                    const u32 col = v_first + 64 * c + 16 * t + e;
                    if (col < p.ops.dv) p.part_acc[at * p.ops.dv + col] = acc[c][e % 8][2 * r + e / 8];
                }
        }
    }
}

// attention_tc_combine<T>: a warp per (split window, row, head) adds the window's pieces in
// piece order, each rescaled to the row's maximum, and writes O and the row's statistics.
template <typename T>
__global__ void __launch_bounds__(ATTN_TC_THREADS) attention_tc_combine(const AttentionTc<T> p) {
    const u32 lane = threadIdx.x % 32;
    const u64 work = (u64)blockIdx.x * ATTN_TC_WARPS + threadIdx.x / 32;
    if (work >= (u64)p.windows * 16 * p.ops.heads) return;
    const u32 split = (u32)(work / (16 * p.ops.heads)), r = (u32)(work / p.ops.heads % 16), head = (u32)(work % p.ops.heads);
    const u32 row = load(p.split_window + split) * 16 + r;
    if (row >= p.rows) return;
    const u32 first = load(p.split_piece + split), last = load(p.split_piece + split + 1);
    const auto at = [&](u32 piece) { return ((u64)piece * p.ops.heads + head) * 16 + r; };
    float max = ATTN_TC_NEG_INF;
    for (u32 piece = first; piece < last; ++piece) max = fmaxf(max, p.part_stats[2 * at(piece)]);
    // A piece without entries of this row holds maximum -inf and sum 0: it adds nothing.
    const auto factor = [&](u32 piece) {
        const float m = p.part_stats[2 * at(piece)];
        return m == ATTN_TC_NEG_INF ? 0.0f : expf(m - max);
    };
    float sum = 0.0f;
    for (u32 piece = first; piece < last; ++piece) sum += factor(piece) * p.part_stats[2 * at(piece) + 1];
    if (lane == 0) {
        p.stats[2 * ((u64)row * p.ops.heads + head)] = max;
        p.stats[2 * ((u64)row * p.ops.heads + head) + 1] = sum;
    }
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    T* o_row = p.ops.o + (u64)row * p.ops.o_rs + (u64)head * p.ops.dv * p.ops.o_cs;
    for (u32 col = lane; col < p.ops.dv; col += 32) {
        float x = 0.0f;
        for (u32 piece = first; piece < last; ++piece) x += factor(piece) * p.part_acc[at(piece) * p.ops.dv + col];
        o_row[(u64)col * p.ops.o_cs] = from_acc<T>(x * inv);
    }
}
