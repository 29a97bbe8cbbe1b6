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
//     straight into the fragments' registers, all of a block's issued before the first MMA;
//     the slots' row numbers and bitmaps of the next block are loaded while a block is summed);
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
#define ATTN_TC_INF __int_as_float(0x7f800000)
// The shift of a row of attention_tc_gather before its first nonzero weight.
#define ATTN_TC_NO_SHIFT 0x7fffffff
// item_piece of an item that is a whole window.
#define ATTN_TC_WHOLE 0xffffffffu

template <typename T> struct tc_type;
// PARTS: the parts of a weight (their sum is the f32 weight to about 2^-22).
template <> struct tc_type<half_t> {
    static const int PARTS = 2;
};
template <> struct tc_type<bf16_t> {
    static const int PARTS = 3;
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

// found += w * 0 on both elements of a word of T: a finite element adds +0, an infinite or NaN
// one makes that half of `found` NaN for good. Started at 0, `found` stays 0 while every word
// added is finite: one instruction a word.
template <typename T>
__device__ __forceinline__ void tc_nonfinite_add(u32& found, u32 w);
#define ATTN_TC_NONFINITE_ADD(TYPE, NAME)                                                 \
    template <>                                                                            \
    __device__ __forceinline__ void tc_nonfinite_add<TYPE>(u32 & found, u32 w) {          \
        asm("fma.rn." NAME "x2 %0, %1, %2, %0;" : "+r"(found) : "r"(w), "r"(0u));         \
    }
ATTN_TC_NONFINITE_ADD(half_t, "f16")
ATTN_TC_NONFINITE_ADD(bf16_t, "bf16")

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

// The operand loads and the two products, shared by the forward and the backward. Lane (g, t);
// a head's operand is `head` (its first column) with row stride rs, column stride cs and `len`
// columns; `vec`: it takes 16-byte loads.

// Rows g (r = 0) and g + 8 (r = 1) of a window as the A operand of the scores' MMA: chunks
// k_first .. of 32 columns, in the permuted k order. Rows past `rows` read as zeros.
template <typename T, int KW>
__device__ __forceinline__ void tc_load_window(const T* head, u32 rs, u32 cs, u32 len, bool vec, u32 window, u32 rows,
                                               u32 k_first, u32 g, u32 t, u32 (&frag)[KW][2][4]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const u32 row = window * 16 + g + 8 * r;
        const bool live = row < rows;
        const T* at = head + (u64)(live ? row : 0) * rs;
#pragma unroll
        for (int c = 0; c < KW; ++c) load_run<T, 8>(at, 32 * (k_first + c) + 8 * t, live ? len : 0, cs, vec, frag[c][r]);
    }
}

// The rows of a block's slots g (h = 0) and 8 + g (h = 1), which lane (g, t) reads for the B
// operand of the scores' MMA.
__device__ __forceinline__ void tc_score_slots(const u32* cols, u32 g, u32 (&rows)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) rows[h] = load(cols + 8 * h + g);
}

// The rows of a block's slots (tc_score_slots) as the B operand of the scores' MMA.
template <typename T, int KW>
__device__ __forceinline__ void tc_load_slots(const T* head, u32 rs, u32 cs, u32 len, bool vec, const u32 (&rows)[2],
                                              u32 k_first, u32 t, u32 (&frag)[2][KW][4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int c = 0; c < KW; ++c) load_run<T, 8>(head + (u64)rows[h] * rs, 32 * (k_first + c) + 8 * t, len, cs, vec, frag[h][c]);
}

// s += A B^T (16 rows x 16 slots) over KW chunks of 32 columns; s[h][2r + e] is row g + 8r,
// slot 8h + 2t + e.
template <typename T, int KW>
__device__ __forceinline__ void tc_scores(float (&s)[2][4], const u32 (&a)[KW][2][4], const u32 (&b)[2][KW][4]) {
#pragma unroll
    for (int c = 0; c < KW; ++c)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const u32 frag[4] = {a[c][0][2 * half], a[c][1][2 * half], a[c][0][2 * half + 1], a[c][1][2 * half + 1]};
#pragma unroll
            for (int h = 0; h < 2; ++h) tc_mma<T>(s[h], frag, b[h][c][2 * half], b[h][c][2 * half + 1]);
        }
}

// The rows of a block's slots 2t, 2t+1, 2t+8, 2t+9 (i = 0..3), which lane (g, t) reads for the
// B operand of the weighted sum.
__device__ __forceinline__ void tc_sum_slots(const u32* cols, u32 t, u32 (&rows)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) rows[i] = load(cols + 2 * t + (i & 1) + 8 * (i >> 1));
}

// The rows of a block's slots (tc_sum_slots) as the B operand of the weighted sum: 8 columns at
// first + 64c + 8g of each.
template <typename T, int DVC>
__device__ __forceinline__ void tc_load_sum_rows(const T* head, u32 rs, u32 cs, u32 len, bool vec, const u32 (&rows)[4],
                                                 u32 first, u32 g, u32 (&run)[4][DVC][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < DVC; ++c) load_run<T, 8>(head + (u64)rows[i] * rs, first + 64 * c + 8 * g, len, cs, vec, run[i][c]);
}

// One block's runs of tc_load_sum_rows<T, DVC> in shared memory: run (i, c) of lane l at
// [i][c][l], so a warp's 16-byte reads of one (i, c) are consecutive. A lane reads back only the
// runs it copied.
template <int DVC>
using TcStage = uint4[4][DVC][32];

// Starts copying the runs of tc_load_sum_rows<T, DVC> of the slots' rows `rows` into `stage`: by
// cp.async where a run is whole and `vec`, else through registers (memcheck reports a cp.async
// of fewer bytes, zero-filled, as a read of all 16, past a row that ends its allocation).
template <typename T, int DVC>
__device__ __forceinline__ void tc_stage_sum_rows(TcStage<DVC>& stage, const T* head, u32 rs, u32 cs, u32 len, bool vec,
                                                  const u32 (&rows)[4], u32 first, u32 g, u32 lane) {
    const u32 at = first + 8 * g;
    // Every run whole (tested once for the warp): no branch a copy.
    if (vec && first + 64 * DVC <= len) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < DVC; ++c) cp_async<16>(&stage[i][c][lane], head + (u64)rows[i] * rs + (at + 64 * c), 16);
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const T* row = head + (u64)rows[i] * rs;
#pragma unroll
        for (int c = 0; c < DVC; ++c) {
            const u32 col = at + 64 * c;
            if (vec && col + 8 <= len) {
                cp_async<16>(&stage[i][c][lane], row + col, 16);
            } else {
                u32 w[4];
                load_run<T, 8>(row, col, len, cs, vec, w);
                stage[i][c][lane] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
    }
}

// Whether any of the words of `run` holds an infinite or NaN element, over the warp.
template <typename T, int DVC>
__device__ __forceinline__ bool tc_any_nonfinite(const u32 (&run)[4][DVC][4]) {
    // Four chains of additions, so that none waits long on the one before.
    u32 found[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < DVC; ++c)
#pragma unroll
            for (int w = 0; w < 4; ++w) tc_nonfinite_add<T>(found[i], run[i][c][w]);
    return __any_sync(0xffffffffu, (found[0] | found[1] | found[2] | found[3]) != 0);
}

// A block's weights W (16 rows x 16 slots, in the scores' C layout in s, 0 where a row lacks
// the slot) as the A fragments of their parts: a_q for q = 2h + r is row g + 8r, slots
// 8h + 2t, 8h + 2t + 1.
template <typename T>
__device__ __forceinline__ void tc_weight_frags(const float (&s)[2][4], u32 (&w_frag)[tc_type<T>::PARTS][4]) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        u32 lo[tc_type<T>::PARTS], hi[tc_type<T>::PARTS];
        tc_split<T>(s[q / 2][2 * (q % 2)], lo);
        tc_split<T>(s[q / 2][2 * (q % 2) + 1], hi);
#pragma unroll
        for (int part = 0; part < tc_type<T>::PARTS; ++part) w_frag[part][q] = lo[part] | hi[part] << 16;
    }
}

// acc (chunk c of 64 columns) += W X on the MMA, W's parts in w_frag, X the slots' rows in
// `run` (tc_load_sum_rows). acc[j][2r + e] is row g + 8r, column 64c + 8(2t + e) + j.
template <typename T, int DVC>
__device__ __forceinline__ void tc_mma_chunk(float (&acc)[8][4], const u32 (&w_frag)[tc_type<T>::PARTS][4],
                                             const u32 (&run)[4][DVC][4], int c) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const u32 select = j % 2 ? 0x7632 : 0x5410;
        const u32 b0 = __byte_perm(run[0][c][j / 2], run[1][c][j / 2], select);
        const u32 b1 = __byte_perm(run[2][c][j / 2], run[3][c][j / 2], select);
#pragma unroll
        for (int part = 0; part < tc_type<T>::PARTS; ++part) tc_mma<T>(acc[j], w_frag[part], b0, b1);
    }
}

// acc += W X for a block on CUDA cores (s as in tc_weight_frags, X's rows read element by
// element): what a block whose X rows hold a non-finite value takes (see the top of the file).
// Lane (g, t) adds, for rows g and g+8, the slots each row has times its columns 16t .. 16t+15
// of each chunk. A slot's weights are in lane (g, (slot % 8) / 2), in s[slot / 8][2r + slot % 2].
template <typename T, int DVC>
__device__ __forceinline__ void tc_cuda_core_sum(float (&acc)[DVC][8][4], const float (&s)[2][4], const u32 (&bits)[2],
                                                 const T* head, u32 rs, u32 cs, u32 len, const u32* cols, u32 first,
                                                 u32 g, u32 t) {
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
        const T* x_row = head + (u64)load(cols + slot) * rs;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            if (!(bits[r] >> slot & 1)) continue;
#pragma unroll
            for (int c = 0; c < DVC; ++c)
#pragma unroll
                for (int x = 0; x < 16; ++x) {
                    const u32 col = first + 64 * c + 16 * t + x;
                    if (col < len) acc[c][x % 8][2 * r + x / 8] += w[r] * to_acc(load(x_row + (u64)col * cs));
                }
        }
    }
}

// acc += W X for a block: W as in tc_weight_frags, X the slots' rows, columns first .. of the
// head, loaded into `run`. acc[c][j][2r + e] is row g + 8r, column first + 64c + 8(2t + e) + j.
// A block whose X rows hold a non-finite value is summed on CUDA cores; `finite`: the caller
// knows every X row to be finite, and the rows are not tested.
template <typename T, int DVC>
__device__ __forceinline__ void tc_weighted_sum(float (&acc)[DVC][8][4], const float (&s)[2][4], const u32 (&run)[4][DVC][4],
                                                const u32 (&bits)[2], const T* head, u32 rs, u32 cs, u32 len, const u32* cols,
                                                u32 first, u32 g, u32 t, bool finite) {
    if (finite || !tc_any_nonfinite<T, DVC>(run)) {
        u32 w_frag[tc_type<T>::PARTS][4];
        tc_weight_frags<T>(s, w_frag);
#pragma unroll
        for (int c = 0; c < DVC; ++c) tc_mma_chunk<T, DVC>(acc[c], w_frag, run, c);
        return;
    }
    tc_cuda_core_sum<T, DVC>(acc, s, bits, head, rs, cs, len, cols, first, g, t);
}

// Block b's bitmaps of rows g and g + 8 of its window.
__device__ __forceinline__ void tc_load_bits(const TcWindows& win, u32 b, u32 g, u32 (&bits)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) bits[r] = __ldg(win.blk_bits + (u64)b * 16 + g + 8 * r);
}

// Row g + 8r of acc times `inv` into out_row (columns first .. of a head of `len`); its
// columns 16t .. 16t+15 of each chunk of 64 are this lane's.
template <typename T, int DVC>
__device__ __forceinline__ void tc_store_row(const float (&acc)[DVC][8][4], int r, float inv, T* out_row, u32 first, u32 len,
                                             u32 cs, bool vec, u32 t) {
#pragma unroll
    for (int c = 0; c < DVC; ++c) {
        float x[16];
#pragma unroll
        for (int e = 0; e < 16; ++e) x[e] = acc[c][e % 8][2 * r + e / 8] * inv;
        tc_store16<T>(out_row, first + 64 * c + 16 * t, len, cs, vec, x);
    }
}

// Row g + 8r of acc, unnormalised, into a piece's scratch row `part` of `len` floats.
template <int DVC>
__device__ __forceinline__ void tc_store_piece(const float (&acc)[DVC][8][4], int r, float* part, u32 first, u32 len, u32 t) {
#pragma unroll
    for (int c = 0; c < DVC; ++c)
#pragma unroll
        for (int e = 0; e < 16; ++e) {
            const u32 col = first + 64 * c + 16 * t + e;
            if (col < len) part[col] = acc[c][e % 8][2 * r + e / 8];
        }
}

// attention_tc<T, KC, DVC, KS>: a warp per (item, head, slice of 64*DVC columns of dv);
// d <= 32*KC. The slices of an item are neighbouring warps of one block. With KS = 1 each slice
// computes all the scores (the K rows one loads are in L1 for the others). With KS = 2 there are
// exactly two slices, and slice w multiplies only chunks w*KC/2 .. of d: the pair adds its two
// partial scores through shared memory (slice 0's first, in both warps, so they agree bit for
// bit), which halves each warp's Q and K fragments and so its registers.
template <typename T, int KC, int DVC, int KS>
__global__ void __launch_bounds__(ATTN_TC_THREADS) attention_tc(const AttentionTc<T> p) {
    const int KW = KC / KS;  // chunks of d this warp multiplies
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u32 warp = threadIdx.x / 32;
    const u64 work = (u64)blockIdx.x * ATTN_TC_WARPS + warp;
    if (work >= (u64)p.win.items * p.ops.heads * p.slices) return;
    const u32 item = (u32)(work / p.slices / p.ops.heads), head = (u32)(work / p.slices % p.ops.heads);
    const u32 slice = (u32)(work % p.slices);
    const u32 window = load(p.win.item_window + item), begin = load(p.win.item_begin + item);
    const u32 end = load(p.win.item_end + item), piece = load(p.win.item_piece + item);
    const u32 v_first = slice * 64 * DVC;
    const u32 k_first = KS == 1 ? 0 : slice * KW;
    const T* k_head = p.ops.k + (u64)head * p.ops.d * p.ops.k_cs;
    const T* v_head = p.ops.v + (u64)head * p.ops.dv * p.ops.v_cs;

    u32 q_frag[KW][2][4];
    tc_load_window<T, KW>(p.ops.q + (u64)head * p.ops.d * p.ops.q_cs, p.ops.q_rs, p.ops.q_cs, p.ops.d, p.q_vec, window,
                          p.win.rows, k_first, g, t, q_frag);
    // Partial scores exchanged by a KS = 2 pair, two buffers used in turn: a warp writes one
    // while its partner may still read the other, and the barrier between keeps them one apart.
    __shared__ float exchange[KS == 1 ? 1 : 2][KS == 1 ? 1 : ATTN_TC_WARPS][32][8];
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
        for (int r = 0; r < 2; ++r) entry[r] = load(p.win.item_entry + (u64)item * 16 + g + 8 * r);

    // Block b + 1's rows of K and V and its bitmaps, loaded while block b is summed.
    u32 k_rows_next[2] = {0, 0}, v_rows_next[4] = {0, 0, 0, 0}, bits_next[2] = {0, 0};
    const auto load_ahead = [&](u32 b) {
        tc_score_slots(p.win.blk_col + (u64)b * 16, g, k_rows_next);
        tc_sum_slots(p.win.blk_col + (u64)b * 16, t, v_rows_next);
        tc_load_bits(p.win, b, g, bits_next);
    };
    if (begin < end) load_ahead(begin);
    for (u32 b = begin; b < end; ++b) {
        const u32* cols = p.win.blk_col + (u64)b * 16;
        const u32 k_rows[2] = {k_rows_next[0], k_rows_next[1]}, bits[2] = {bits_next[0], bits_next[1]};
        const u32 v_rows[4] = {v_rows_next[0], v_rows_next[1], v_rows_next[2], v_rows_next[3]};
        u32 k_frag[2][KW][4];
        tc_load_slots<T, KW>(k_head, p.ops.k_rs, p.ops.k_cs, p.ops.d, p.k_vec, k_rows, k_first, t, k_frag);
        u32 v_run[4][DVC][4];
        tc_load_sum_rows<T, DVC>(v_head, p.ops.v_rs, p.ops.v_cs, p.ops.dv, p.v_vec, v_rows, v_first, g, v_run);
        if (b + 1 < end) load_ahead(b + 1);

        float s[2][4] = {};
        tc_scores<T, KW>(s, q_frag, k_frag);
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
        tc_weighted_sum<T, DVC>(acc, s, v_run, bits, v_head, p.ops.v_rs, p.ops.v_cs, p.ops.dv, cols, v_first, g, t, false);
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        run_sum[r] += __shfl_xor_sync(0xffffffffu, run_sum[r], 1);
        run_sum[r] += __shfl_xor_sync(0xffffffffu, run_sum[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const u32 row = window * 16 + g + 8 * r;
        if (row >= p.win.rows) continue;
        if (piece == ATTN_TC_WHOLE) {
            if (slice == 0 && t == 0) {
                p.stats[2 * ((u64)row * p.ops.heads + head)] = run_max[r];
                p.stats[2 * ((u64)row * p.ops.heads + head) + 1] = run_sum[r];
            }
            const float inv = run_sum[r] == 0.0f ? 0.0f : 1.0f / run_sum[r];
            T* o_row = p.ops.o + (u64)row * p.ops.o_rs + (u64)head * p.ops.dv * p.ops.o_cs;
            tc_store_row<T, DVC>(acc, r, inv, o_row, v_first, p.ops.dv, p.ops.o_cs, p.o_vec, t);
        } else {
            // A piece: its maximum, sum and unnormalised sums, for attention_tc_combine.
            const u64 at = ((u64)piece * p.ops.heads + head) * 16 + g + 8 * r;
            if (slice == 0 && t == 0) {
                p.part_stats[2 * at] = run_max[r];
                p.part_stats[2 * at + 1] = run_sum[r];
            }
            tc_store_piece<DVC>(acc, r, p.part_acc + at * p.ops.dv, v_first, p.ops.dv, t);
        }
    }
}

// attention_tc_combine<T>: a warp per (split window, row, head) adds the window's pieces in
// piece order, each rescaled to the row's maximum, and writes O and the row's statistics.
template <typename T>
__global__ void __launch_bounds__(ATTN_TC_THREADS) attention_tc_combine(const AttentionTc<T> p) {
    const u32 lane = threadIdx.x % 32;
    const u64 work = (u64)blockIdx.x * ATTN_TC_WARPS + threadIdx.x / 32;
    if (work >= (u64)p.win.windows * 16 * p.ops.heads) return;
    const u32 split = (u32)(work / (16 * p.ops.heads)), r = (u32)(work / p.ops.heads % 16), head = (u32)(work % p.ops.heads);
    const u32 row = load(p.win.split_window + split) * 16 + r;
    if (row >= p.win.rows) return;
    const u32 first = load(p.win.split_piece + split), last = load(p.win.split_piece + split + 1);
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

// The backward on tensor cores, from the forward's row statistics (m, l) of each (row, head):
// P = exp(s - m) / l, dP_ij = dO_i . V_j, D_i = dO_i . O_i and dS = P (dP - D) give
// dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO and the bias gradient, dS summed over the
// heads. attention_tc_grad_scores forms P and dS of each (entry, head) from two score MMAs
// over A's windows and leaves them side by side in prob_grads ((entry, head), entry major);
// attention_tc_transpose_pairs copies them into A^T's order (t_prob_grads), so that each
// weighted sum reads its weights in its own layout's order. Both keep the largest magnitude of
// each (row, head) of the weights a sum reads (dS by A's rows, P and dS by A^T's) in row_max and
// t_row_max, as bits (the bits of floats of one sign order as the floats; NaN above infinity).
// attention_tc_gather then makes each gradient as a weighted sum over a window layout: dQ over
// A's windows (weights scale dS, rows of K), dK and dV over A^T's (scale dS with Q's rows, P
// with dO's), a long window's pieces added in piece order by attention_tc_gather_combine.
// Every output is written once, in a fixed order: runs are bit-reproducible.

// The dot product of two words of two elements of T each.
template <typename T>
__device__ __forceinline__ float tc_word_dot(u32 a, u32 b) {
    T a_lo, a_hi, b_lo, b_hi;
    a_lo.bits = (unsigned short)a;
    a_hi.bits = (unsigned short)(a >> 16);
    b_lo.bits = (unsigned short)b;
    b_hi.bits = (unsigned short)(b >> 16);
    return to_acc(a_lo) * to_acc(b_lo) + to_acc(a_hi) * to_acc(b_hi);
}

// attention_tc_grad_scores<T, KC>: a warp per (item, head) of A's windows; d, dv <= 32*KC.
// Q's and dO's fragments of the window stay in registers; per block S = Q K^T and
// dP = dO V^T on the MMA, then each entry's P and dS.
template <typename T, int KC>
__global__ void __launch_bounds__(ATTN_TC_THREADS) attention_tc_grad_scores(const AttentionTcScores<T> p) {
    const AttentionGrad<T>& a = p.grad;
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u64 work = (u64)blockIdx.x * ATTN_TC_WARPS + threadIdx.x / 32;
    if (work >= (u64)p.win.items * a.heads) return;
    const u32 item = (u32)(work / a.heads), head = (u32)(work % a.heads);
    const u32 window = load(p.win.item_window + item), begin = load(p.win.item_begin + item);
    const u32 end = load(p.win.item_end + item);
    const T* k_head = a.k + (u64)head * a.d * a.k_cs;
    const T* v_head = a.v + (u64)head * a.dv * a.v_cs;
    u32 q_frag[KC][2][4], do_frag[KC][2][4];
    tc_load_window<T, KC>(a.q + (u64)head * a.d * a.q_cs, a.q_rs, a.q_cs, a.d, p.q_vec, window, a.rows, 0, g, t, q_frag);
    tc_load_window<T, KC>(a.d_o + (u64)head * a.dv * a.do_cs, a.do_rs, a.do_cs, a.dv, p.do_vec, window, a.rows, 0, g, t,
                          do_frag);
    // D of rows g and g + 8: this lane's columns of dO times O's, then the row's four lanes.
    float mean[2] = {0.0f, 0.0f};
    {
        u32 o_frag[KC][2][4];
        tc_load_window<T, KC>(a.o + (u64)head * a.dv * a.o_cs, a.o_rs, a.o_cs, a.dv, p.o_vec, window, a.rows, 0, g, t,
                              o_frag);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int c = 0; c < KC; ++c)
#pragma unroll
                for (int w = 0; w < 4; ++w) mean[r] += tc_word_dot<T>(do_frag[c][r][w], o_frag[c][r][w]);
            mean[r] += __shfl_xor_sync(0xffffffffu, mean[r], 1);
            mean[r] += __shfl_xor_sync(0xffffffffu, mean[r], 2);
        }
    }
    float max[2], inv_sum[2];
    u32 entry[2], grad_max[2] = {0, 0};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const u32 row = window * 16 + g + 8 * r;
        // A row past A's rows has no entries: its statistics are never used.
        const u64 at = 2 * ((u64)(row < a.rows ? row : 0) * a.heads + head);
        max[r] = load(a.stats + at);
        inv_sum[r] = 1.0f / load(a.stats + at + 1);
        entry[r] = load(p.win.item_entry + (u64)item * 16 + g + 8 * r);
    }
    float2* prob_grads = reinterpret_cast<float2*>(a.prob_grads);
    // Whether every entry's S and dP so far is finite: then so is every element of the K, Q and dO
    // rows the weighted sums read (an infinite or NaN element makes each product with its row
    // infinite or NaN).
    bool finite = true;
    // Block b + 1's rows of K and V and its bitmaps, loaded while block b is scored.
    u32 rows_next[2] = {0, 0}, bits_next[2] = {0, 0};
    const auto load_ahead = [&](u32 b) {
        tc_score_slots(p.win.blk_col + (u64)b * 16, g, rows_next);
        tc_load_bits(p.win, b, g, bits_next);
    };
    if (begin < end) load_ahead(begin);
    for (u32 b = begin; b < end; ++b) {
        const u32 rows[2] = {rows_next[0], rows_next[1]}, bits[2] = {bits_next[0], bits_next[1]};
        u32 k_frag[2][KC][4], v_frag[2][KC][4];
        tc_load_slots<T, KC>(k_head, a.k_rs, a.k_cs, a.d, p.k_vec, rows, 0, t, k_frag);
        tc_load_slots<T, KC>(v_head, a.v_rs, a.v_cs, a.dv, p.v_vec, rows, 0, t, v_frag);
        if (b + 1 < end) load_ahead(b + 1);
        float s[2][4] = {}, dp[2][4] = {};
        tc_scores<T, KC>(s, q_frag, k_frag);
        tc_scores<T, KC>(dp, do_frag, v_frag);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const u32 slot = 8 * h + 2 * t + e;
                    if (!(bits[r] >> slot & 1)) continue;
                    const u32 pos = entry[r] + __popc(bits[r] & ((1u << slot) - 1));
                    finite &= isfinite(s[h][2 * r + e]) && isfinite(dp[h][2 * r + e]);
                    float x = s[h][2 * r + e] * a.scale;
                    if (a.bias) x += to_acc(load(a.values + pos));
                    const float prob = expf(x - max[r]) * inv_sum[r];
                    const float grad = prob * (dp[h][2 * r + e] - mean[r]);
                    prob_grads[(u64)pos * a.heads + head] = make_float2(prob, grad);
                    grad_max[r] = umax(grad_max[r], __float_as_uint(fabsf(grad)));
                }
            entry[r] += __popc(bits[r]);
        }
    }
    if (__any_sync(0xffffffffu, !finite) && lane == 0) atomicOr(p.nonfinite, 1u);
    // A long window's pieces each raise their rows' maxima.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        grad_max[r] = umax(grad_max[r], __shfl_xor_sync(0xffffffffu, grad_max[r], 1));
        grad_max[r] = umax(grad_max[r], __shfl_xor_sync(0xffffffffu, grad_max[r], 2));
        const u32 row = window * 16 + g + 8 * r;
        if (t == 0 && row < a.rows) atomicMax(p.row_max + 2 * ((u64)row * a.heads + head) + 1, grad_max[r]);
    }
}

// attention_tc_transpose_pairs<T>: a thread per (position of A^T, head) copies its pair from
// prob_grads (in A's order) into t_prob_grads: a gather, where the score kernel's stores in
// A^T's order would be scattered. The lanes of a warp with the same (row of A^T, head) take
// their maxima together, and one of them raises t_row_max.
template <typename T>
__global__ void __launch_bounds__(ATTN_TC_THREADS) attention_tc_transpose_pairs(const AttentionTcScores<T> p) {
    const u64 i = (u64)blockIdx.x * ATTN_TC_THREADS + threadIdx.x;
    const bool live = i < (u64)p.grad.nnz * p.grad.heads;
    // Every lane takes part in the warp's maxima: the grid is whole warps.
    float2 pair = make_float2(0.0f, 0.0f);
    u64 key = ~0ull;
    if (live) {
        const u64 slot = i / p.grad.heads, head = i % p.grad.heads;
        const u32 entry = load(p.t_entry + slot);
        pair = reinterpret_cast<const float2*>(p.grad.prob_grads)[(u64)entry * p.grad.heads + head];
        reinterpret_cast<float2*>(p.t_prob_grads)[i] = pair;
        key = (u64)load(p.t_col + slot) * p.grad.heads + head;
    }
    const u32 same = __match_any_sync(0xffffffffu, key);
    const u32 prob_max = __reduce_max_sync(same, __float_as_uint(fabsf(pair.x)));
    const u32 grad_max = __reduce_max_sync(same, __float_as_uint(fabsf(pair.y)));
    if (live && threadIdx.x % 32 == __ffs(same) - 1) {
        atomicMax(p.t_row_max + 2 * key, prob_max);
        atomicMax(p.t_row_max + 2 * key + 1, grad_max);
    }
}

// 2^n for -252 <= n <= 254 as two normal powers of two: multiplying by both is exact, as
// ldexpf(x, n) is, wherever the result is normal.
__device__ __forceinline__ void tc_pow2_parts(int n, float (&parts)[2]) {
    const int half = n / 2;
    parts[0] = __uint_as_float((u32)(127 + half) << 23);
    parts[1] = __uint_as_float((u32)(127 + n - half) << 23);
}

// The weights of a block of attention_tc_gather (0 where a row lacks the slot) in the scores'
// C layout, w[h][2r + e] for row g + 8r and slot 8h + 2t + e; entry[r], row g + 8r's next
// position, moves past the block. A slot's weight is an offset from its row's first one in the
// block (one wide multiply-add), loaded under a predicate so that no branch waits on it.
template <typename T>
__device__ __forceinline__ void tc_gather_weights(const AttentionTcGather<T>& p, u32 head, const u32 (&bits)[2], u32 t,
                                                  u32 (&entry)[2], float (&w)[2][4]) {
    // Bytes from one entry's weight to the next one's (the host keeps it below 2^32).
    const u32 stride = 2 * p.heads * sizeof(float);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const char* row = reinterpret_cast<const char*>(p.weights + 2 * ((u64)entry[r] * p.heads + head) + p.component);
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const u32 slot = 8 * h + 2 * t + e;
                u32 word = 0;
                ld_nc_pred(word, row + (u64)__popc(bits[r] & ((1u << slot) - 1)) * stride, bits[r] >> slot & 1);
                w[h][2 * r + e] = __uint_as_float(word);
            }
        entry[r] += __popc(bits[r]);
    }
}

// attention_tc_gather<T, DVC>: a warp per (item, head, slice of 64*DVC columns) of a window layout:
// out = W X, W the `component` (P or dS) of the pairs at `weights` in the layout's order times
// `factor`, X's rows by the slots. The chain of loads a block's weights wait on (bitmaps, then
// the weights at the positions they give) runs ahead of the sums: a block's bitmaps are loaded
// two blocks before its sum and its weights one block before. X's rows are copied into shared
// memory by cp.async one block ahead (their row numbers loaded two blocks ahead), so no register
// waits on them while the block before is summed. A slice of 128 columns (DVC = 2) loads,
// scales and splits each block's weights once for twice the MMAs; held to 128 registers, four
// blocks share a multiprocessor (unbounded, its 186 registers left two, and the saved
// instructions bought no time).
template <typename T, int DVC>
__global__ void __launch_bounds__(ATTN_TC_THREADS, DVC == 2 ? 4 : 0) attention_tc_gather(const AttentionTcGather<T> p) {
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u64 work = (u64)blockIdx.x * ATTN_TC_WARPS + threadIdx.x / 32;
    if (work >= (u64)p.win.items * p.heads * p.slices) return;
    const u32 item = (u32)(work / p.slices / p.heads), head = (u32)(work / p.slices % p.heads);
    const u32 first = (u32)(work % p.slices) * 64 * DVC;
    const u32 window = load(p.win.item_window + item), begin = load(p.win.item_begin + item);
    const u32 end = load(p.win.item_end + item), piece = load(p.win.item_piece + item);
    const T* x_head = p.x + (u64)head * p.width * p.x_cs;
    // The score kernel found every S and dP finite, so X's rows need no test.
    const bool x_finite = load(p.nonfinite) == 0;
    u32 entry[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) entry[r] = load(p.win.item_entry + (u64)item * 16 + g + 8 * r);
    float acc[DVC][8][4] = {};
    // Row g + 8r's weights enter the MMA times 2^shift[r] (the product of scale[r]), and its
    // sums are kept in units of 2^-shift[r]: f16 parts of a weight far below 1 (a gradient's
    // weights may all be) would be subnormal and lose its digits. The shift puts the row's
    // largest weight in [2^14, 2^15); a row whose largest is zero, infinite or NaN takes none.
    // The shifts are powers of two: runs stay bit-reproducible. `factor` multiplies the sums
    // once, at the end.
    int shift[2];
    float scale[2][2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const u32 row = window * 16 + g + 8 * r;
        const float largest =
            row < p.win.rows ? __uint_as_float(load(p.row_max + 2 * ((u64)row * p.heads + head) + p.component)) : 0.0f;
        shift[r] = largest > 0.0f && largest < ATTN_TC_INF ? 14 - ilogbf(largest) : ATTN_TC_NO_SHIFT;
        tc_pow2_parts(shift[r] == ATTN_TC_NO_SHIFT ? 0 : shift[r], scale[r]);
    }
    // Block b's bitmaps and weights, and block b + 1's bitmaps.
    u32 bits[2] = {0, 0}, bits_next[2] = {0, 0};
    float w[2][4] = {};
    // Two stages a warp, block b's in stages[b & 1]; rows_next: block b + 1's rows of X.
    __shared__ TcStage<DVC> staged[ATTN_TC_WARPS][2];
    TcStage<DVC>(&stages)[2] = staged[threadIdx.x / 32];
    u32 rows_next[4];
    if (begin < end) {
        tc_load_bits(p.win, begin, g, bits);
        if (begin + 1 < end) tc_load_bits(p.win, begin + 1, g, bits_next);
        tc_gather_weights<T>(p, head, bits, t, entry, w);
        u32 rows[4];
        tc_sum_slots(p.win.blk_col + (u64)begin * 16, t, rows);
        tc_stage_sum_rows<T, DVC>(stages[begin & 1], x_head, p.x_rs, p.x_cs, p.width, p.x_vec, rows, first, g, lane);
        if (begin + 1 < end) tc_sum_slots(p.win.blk_col + (u64)(begin + 1) * 16, t, rows_next);
    }
    cp_async_commit();
    for (u32 b = begin; b < end; ++b) {
        const u32* cols = p.win.blk_col + (u64)b * 16;
        // Block b - 1 read stages[(b + 1) & 1] into registers and used them before this copy.
        if (b + 1 < end)
            tc_stage_sum_rows<T, DVC>(stages[(b + 1) & 1], x_head, p.x_rs, p.x_cs, p.width, p.x_vec, rows_next, first, g, lane);
        cp_async_commit();
        if (b + 2 < end) tc_sum_slots(p.win.blk_col + (u64)(b + 2) * 16, t, rows_next);
        u32 bits_after[2] = {0, 0};
        float w_next[2][4] = {};
        if (b + 2 < end) tc_load_bits(p.win, b + 2, g, bits_after);
        if (b + 1 < end) tc_gather_weights<T>(p, head, bits_next, t, entry, w_next);
        float s[2][4];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int r = i % 4 / 2;
            s[i / 4][i % 4] = w[i / 4][i % 4] * scale[r][0] * scale[r][1];
        }
        cp_async_wait<1>();
        const auto chunk = [&](int c, u32 (&run)[4][1][4]) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint4 v = stages[b & 1][i][c][lane];
                run[i][0][0] = v.x;
                run[i][0][1] = v.y;
                run[i][0][2] = v.z;
                run[i][0][3] = v.w;
            }
        };
        if constexpr (DVC == 1) {
            // The runs are read before the weights are split, which hides the reads' latency.
            u32 x_run[4][1][4];
            chunk(0, x_run);
            tc_weighted_sum<T, 1>(acc, s, x_run, bits, x_head, p.x_rs, p.x_cs, p.width, cols, first, g, t, x_finite);
        } else {
            // X's chunks are read one at a time, so that only one chunk's runs are live in
            // registers beside the accumulators.
            bool on_mma = x_finite;
            if (!on_mma) {
                bool found = false;
#pragma unroll
                for (int c = 0; c < DVC; ++c) {
                    u32 run[4][1][4];
                    chunk(c, run);
                    found |= tc_any_nonfinite<T, 1>(run);
                }
                on_mma = !found;
            }
            if (on_mma) {
                u32 w_frag[tc_type<T>::PARTS][4];
                tc_weight_frags<T>(s, w_frag);
#pragma unroll
                for (int c = 0; c < DVC; ++c) {
                    u32 run[4][1][4];
                    chunk(c, run);
                    tc_mma_chunk<T, 1>(acc[c], w_frag, run, 0);
                }
            } else {
                tc_cuda_core_sum<T, DVC>(acc, s, bits, x_head, p.x_rs, p.x_cs, p.width, cols, first, g, t);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            bits[r] = bits_next[r];
            bits_next[r] = bits_after[r];
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i / 4][i % 4] = w_next[i / 4][i % 4];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int c = 0; c < DVC; ++c)
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                acc[c][j][2 * r] *= p.factor;
                acc[c][j][2 * r + 1] *= p.factor;
            }
        if (shift[r] != ATTN_TC_NO_SHIFT)
#pragma unroll
            for (int c = 0; c < DVC; ++c)
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    acc[c][j][2 * r] = ldexpf(acc[c][j][2 * r], -shift[r]);
                    acc[c][j][2 * r + 1] = ldexpf(acc[c][j][2 * r + 1], -shift[r]);
                }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const u32 row = window * 16 + g + 8 * r;
        if (row >= p.win.rows) continue;
        if (piece == ATTN_TC_WHOLE) {
            T* out_row = p.out + (u64)row * p.out_rs + (u64)head * p.width * p.out_cs;
            tc_store_row<T, DVC>(acc, r, 1.0f, out_row, first, p.width, p.out_cs, p.out_vec, t);
        } else {
            const u64 at = ((u64)piece * p.heads + head) * 16 + g + 8 * r;
            tc_store_piece<DVC>(acc, r, p.part_acc + at * p.width, first, p.width, t);
        }
    }
}

// attention_tc_gather_combine<T>: a warp per (split window, row, head) adds the window's pieces
// in piece order.
template <typename T>
__global__ void __launch_bounds__(ATTN_TC_THREADS) attention_tc_gather_combine(const AttentionTcGather<T> p) {
    const u32 lane = threadIdx.x % 32;
    const u64 work = (u64)blockIdx.x * ATTN_TC_WARPS + threadIdx.x / 32;
    if (work >= (u64)p.win.windows * 16 * p.heads) return;
    const u32 split = (u32)(work / (16 * p.heads)), r = (u32)(work / p.heads % 16), head = (u32)(work % p.heads);
    const u32 row = load(p.win.split_window + split) * 16 + r;
    if (row >= p.win.rows) return;
    const u32 first = load(p.win.split_piece + split), last = load(p.win.split_piece + split + 1);
    T* out_row = p.out + (u64)row * p.out_rs + (u64)head * p.width * p.out_cs;
    for (u32 col = lane; col < p.width; col += 32) {
        float x = 0.0f;
        for (u32 piece = first; piece < last; ++piece) x += p.part_acc[(((u64)piece * p.heads + head) * 16 + r) * p.width + col];
        out_row[(u64)col * p.out_cs] = from_acc<T>(x);
    }
}
