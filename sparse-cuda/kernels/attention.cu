// Fused sparse attention on CUDA cores, O = softmax_row(scale*(Q*K^T) ∘ spy(A) [+ A]) * V, for
// H heads side by side in Q, K, V and O (head h in columns h*d .. of Q and K, h*dv .. of V and O).
// Parameters: AttentionFused<T> (src/attention.rs). Storage T (f32, f16, bf16); scores, softmax
// and sums in f32.
//
// attention_fused<T, CH, G>: a warp per item and head, an item being a piece of ATTN_PIECE
// entries of a longer row (the pieces first) or a row of up to ATTN_PIECE entries, so that a hub
// row spreads over many warps and no warp walks more than ATTN_PIECE entries. A warp takes its
// item's entries in tiles of 32:
// - the scores: groups of G lanes take an entry each, 32 / G entries a step, the steps in blocks
//   of 16 entries, as many blocks as the tile needs; each lane takes ATTN_HELD_RUNS 16-byte runs
//   of the Q and K rows (Q's held in registers for the item; runs past those of a row are read
//   in a loop), the group's sum by a butterfly; the step's scores then move to the lanes of
//   their entries;
// - the tile's maximum updates the running maximum (started at -inf) and the sum and the
//   accumulators are rescaled once per tile;
// - the tile's weighted V rows are added, lanes across dv, CH consecutive columns each.
// K and V rows that allow it take predicated vector loads (k_vec, v_vec), chosen once per
// tile, so that a tile's loads are in flight together.
// grid.y cuts dv into slices of 32*CH columns (each slice recomputes the scores). A whole row
// writes O and its statistics; a piece writes its maximum, sum and unnormalised sums to scratch,
// and attention_fused_combine adds a row's pieces in piece order, so every output is written once
// in a fixed order: runs are bit-reproducible. A row without entries gives zeros. Each (row,
// head)'s final maximum and normaliser go to `stats`, for the backward.

#define ATTN_NEG_INF __int_as_float(0xff800000)
// Elements of T in a 16-byte run. A lane of a score group holds ATTN_HELD_RUNS of them of Q.
#define ATTN_RUN(T) (16 / (int)sizeof(T))

template <typename A>
__device__ __forceinline__ A warp_allmax(A v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Element i of a run of T packed in words, as f32.
template <typename T>
__device__ __forceinline__ float attn_elem(const u32 (&w)[4], int i) {
    if constexpr (sizeof(T) == 4) {
        return __uint_as_float(w[i]);
    } else {
        T x;
        x.bits = (unsigned short)(w[i / 2] >> (16 * (i % 2)));
        return to_acc(x);
    }
}

// The sum of the products of two runs of T.
template <typename T>
__device__ __forceinline__ float attn_run_dot(const u32 (&a)[4], const u32 (&b)[4]) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < ATTN_RUN(T); ++i) s += attn_elem<T>(a, i) * attn_elem<T>(b, i);
    return s;
}

// Where a piece's (slot's) results for `head` start in the scratch: dv sums, then the maximum
// and the sum.
__device__ __forceinline__ u64 attn_slot(u32 slot, u32 head, u32 heads, u32 dv) {
    return ((u64)slot * heads + head) * (dv + 2);
}

// The scores of a tile's entries (`col`: entry `lane`'s column, `chunk` entries), scaled: lane e
// gets entry e's. VEC: K's rows take predicated 16-byte loads (contiguous, aligned, d a multiple
// of the run: the host checks), so that every step's loads are in flight together; otherwise
// element by element.
template <typename T, int G, bool VEC>
__device__ __forceinline__ float attn_tile_scores(const AttentionFused<T>& p, const u32 (&q_run)[ATTN_HELD_RUNS][4],
                                                  const T* q_row, u64 k_head, u32 col, u32 chunk, u32 lane) {
    // Steps in blocks of 16 entries, unrolled so that a block's loads are in flight together; a
    // tile of few entries (a short row) takes one block, not all 32 / E steps.
    constexpr int R = ATTN_RUN(T), E = 32 / G, BLOCK = G / 2 > 0 ? G / 2 : 1;
    const u32 sub = lane % G, group = lane / G, d = p.ops.d;
    float score = ATTN_NEG_INF;
#pragma unroll 1
    for (int s0 = 0; s0 < G && (u32)(s0 * E) < chunk; s0 += BLOCK) {
#pragma unroll
        for (int j = 0; j < BLOCK; ++j) {
            const int s = s0 + j;
            const u32 e = s * E + group;
            const T* k_row = p.ops.k + (u64)__shfl_sync(0xffffffffu, col, e) * p.ops.k_rs + k_head;
            float partial = 0.0f;
#pragma unroll
            for (int i = 0; i < ATTN_HELD_RUNS; ++i) {
                const u32 first = R * (sub + G * i);
                u32 k_run[4] = {0, 0, 0, 0};
                if constexpr (VEC) ld_nc_pred(k_run, k_row + first, e < chunk && first < d);
                else if (e < chunk) load_run<T, ATTN_RUN(T)>(k_row, first, d, p.ops.k_cs, false, k_run);
                partial += attn_run_dot<T>(q_run[i], k_run);
            }
            // The runs of a head wider than the groups hold.
            for (u32 first = R * (sub + G * ATTN_HELD_RUNS); e < chunk && first < d; first += R * G) {
                u32 q_more[4], k_run[4];
                load_run<T, ATTN_RUN(T)>(q_row, first, d, p.ops.q_cs, p.q_vec, q_more);
                load_run<T, ATTN_RUN(T)>(k_row, first, d, p.ops.k_cs, VEC, k_run);
                partial += attn_run_dot<T>(q_more, k_run);
            }
            const float dot = subwarp_allsum<G>(0xffffffffu, partial);
            // Entry s*E + g is summed by group g: lane s*E + g takes it.
            const float mine = __shfl_sync(0xffffffffu, dot, (lane % E) * G);
            if (lane / E == (u32)s) score = mine * p.ops.scale;
        }
    }
    return lane < chunk ? score : ATTN_NEG_INF;
}

// acc[c] += weight of entry e * V[first + c] over a tile's entries e (lanes' weights in `weight`,
// columns in `col`), for the CH columns first .. of this lane below dv. VEC: one predicated
// access of the lane's CH columns (contiguous, aligned rows, dv a multiple of CH: the host
// checks); otherwise element by element.
template <typename T, int CH, bool VEC>
__device__ __forceinline__ void attn_tile_sum(float (&acc)[CH], const T* v_head, u32 v_rs, u32 v_cs, u32 first, u32 dv,
                                              u32 col, float weight, u32 chunk) {
#pragma unroll 8
    for (u32 e = 0; e < chunk; ++e) {
        const float w = __shfl_sync(0xffffffffu, weight, e);
        const T* v_row = v_head + (u64)__shfl_sync(0xffffffffu, col, e) * v_rs;
        float x[CH];
        if constexpr (VEC) {
            load_whole<T, CH>(v_row + first, first < dv, x);
        } else {
#pragma unroll
            for (int c = 0; c < CH; ++c) x[c] = first + c < dv ? to_acc(load(v_row + (u64)(first + c) * v_cs)) : 0.0f;
        }
#pragma unroll
        for (int c = 0; c < CH; ++c) acc[c] += w * x[c];
    }
}

template <typename T, int CH, int G>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_fused(const AttentionFused<T> p) {
    constexpr int R = ATTN_RUN(T);
    const u32 lane = threadIdx.x % 32, sub = lane % G;
    const u64 item = (u64)blockIdx.x * (ATTN_BLOCK / 32) + threadIdx.x / 32;
    if (item >= (u64)p.items * p.ops.heads) return;
    const u32 listed = (u32)(item / p.ops.heads), head = (u32)(item % p.ops.heads);
    const bool piece = listed < p.pieces;
    const u32 row = piece ? load(p.piece_row + listed) : load(p.rows + (listed - p.pieces));
    const u32 begin = piece ? load(p.piece_begin + listed) : load(p.row_ptr + row);
    const u32 row_end = load(p.row_ptr + row + 1);
    const u32 end = row_end - begin < ATTN_PIECE ? row_end : begin + ATTN_PIECE;
    const T* q_row = p.ops.q + (u64)row * p.ops.q_rs + (u64)head * p.ops.d * p.ops.q_cs;
    const u64 k_head = (u64)head * p.ops.d * p.ops.k_cs;
    const T* v_head = p.ops.v + (u64)head * p.ops.dv * p.ops.v_cs;
    // This lane's CH columns of V and O.
    const u32 first = blockIdx.y * 32 * CH + CH * lane, dv = p.ops.dv;

    u32 q_run[ATTN_HELD_RUNS][4];
#pragma unroll
    for (int i = 0; i < ATTN_HELD_RUNS; ++i) load_run<T, ATTN_RUN(T)>(q_row, R * (sub + G * i), p.ops.d, p.ops.q_cs, p.q_vec, q_run[i]);
    float acc[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) acc[c] = 0.0f;
    float run_max = ATTN_NEG_INF, run_sum = 0.0f;

    for (u32 base = begin; base < end; base += 32) {
        const u32 chunk = end - base < 32 ? end - base : 32;
        const u32 col = lane < chunk ? load(p.col_idx + base + lane) : 0;
        float score = p.k_vec ? attn_tile_scores<T, G, true>(p, q_run, q_row, k_head, col, chunk, lane)
                              : attn_tile_scores<T, G, false>(p, q_run, q_row, k_head, col, chunk, lane);
        if (p.ops.bias && lane < chunk) score += to_acc(load(p.values + base + lane));
        const float tile_max = fmaxf(run_max, warp_allmax(score));
        const float rescale = expf(run_max - tile_max);
        const float weight = lane < chunk ? expf(score - tile_max) : 0.0f;
        run_sum = run_sum * rescale + subwarp_allsum<32>(0xffffffffu, weight);
        run_max = tile_max;
#pragma unroll
        for (int c = 0; c < CH; ++c) acc[c] *= rescale;
        if (p.v_vec) attn_tile_sum<T, CH, true>(acc, v_head, p.ops.v_rs, p.ops.v_cs, first, dv, col, weight, chunk);
        else attn_tile_sum<T, CH, false>(acc, v_head, p.ops.v_rs, p.ops.v_cs, first, dv, col, weight, chunk);
    }

    if (piece) {
        // A piece of a long row: its maximum, sum and unnormalised sums, for the combine.
        float* slot = p.scratch + attn_slot(listed, head, p.ops.heads, dv);
        if (blockIdx.y == 0 && lane == 0) {
            slot[dv] = run_max;
            slot[dv + 1] = run_sum;
        }
#pragma unroll
        for (int c = 0; c < CH; ++c)
            if (first + c < dv) slot[first + c] = acc[c];
        return;
    }
    if (blockIdx.y == 0 && lane == 0) {
        // The backward's row statistics: the maximum and the normaliser of (row, head).
        p.stats[2 * ((u64)row * p.ops.heads + head)] = run_max;
        p.stats[2 * ((u64)row * p.ops.heads + head) + 1] = run_sum;
    }
    const float inv = begin == end ? 0.0f : 1.0f / run_sum;
    T* o_row = p.ops.o + (u64)row * p.ops.o_rs + (u64)head * dv * p.ops.o_cs;
#pragma unroll
    for (int c = 0; c < CH; ++c)
        if (first + c < dv) o_row[(u64)(first + c) * p.ops.o_cs] = from_acc<T>(acc[c] * inv);
}

// attention_fused_combine<T>: a warp per (long row, head) adds the row's pieces (for row
// long_rows[i], slots piece_first[i] .. piece_first[i + 1]) in piece order, each rescaled to the
// row's maximum, and writes O and the row's statistics.
template <typename T>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_fused_combine(const AttentionFused<T> p) {
    const u32 lane = threadIdx.x % 32;
    const u64 item = (u64)blockIdx.x * (ATTN_BLOCK / 32) + threadIdx.x / 32;
    if (item >= (u64)p.long_count * p.ops.heads) return;
    const u32 listed = (u32)(item / p.ops.heads), head = (u32)(item % p.ops.heads);
    const u32 row = load(p.long_rows + listed);
    const u32 first = load(p.piece_first + listed), last = load(p.piece_first + listed + 1);
    const u32 dv = p.ops.dv, heads = p.ops.heads;
    const auto slot = [&](u32 s) { return p.scratch + attn_slot(s, head, heads, dv); };
    float run_max = ATTN_NEG_INF;
    for (u32 s = first; s < last; ++s) run_max = fmaxf(run_max, slot(s)[dv]);
    // A piece whose scores were all -inf adds nothing.
    const auto factor = [&](u32 s) { return slot(s)[dv] == ATTN_NEG_INF ? 0.0f : expf(slot(s)[dv] - run_max); };
    float run_sum = 0.0f;
    for (u32 s = first; s < last; ++s) run_sum += factor(s) * slot(s)[dv + 1];
    if (lane == 0) {
        p.stats[2 * ((u64)row * heads + head)] = run_max;
        p.stats[2 * ((u64)row * heads + head) + 1] = run_sum;
    }
    const float inv = 1.0f / run_sum;
    T* o_row = p.ops.o + (u64)row * p.ops.o_rs + (u64)head * dv * p.ops.o_cs;
    for (u32 t = lane; t < dv; t += 32) {
        float sum = 0.0f;
        for (u32 s = first; s < last; ++s) sum += factor(s) * slot(s)[t];
        o_row[(u64)t * p.ops.o_cs] = from_acc<T>(sum * inv);
    }
}

// attention_softmax<T>: the middle step of the unfused pipeline. A warp per row turns the row's
// scores (already scaled by the SDDMM before it) plus the bias into softmax weights: the maximum,
// then the sum of exp(s - max), then each weight, written where the SpMM after it reads A's
// values. Three passes over the row's scores, each in a fixed order per lane and a butterfly
// across lanes: bit-reproducible.
template <typename T>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_softmax(const AttentionSoftmax<T> p) {
    const u64 row = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (row >= p.rows) return;
    const u32 lane = threadIdx.x % 32;
    const u32 begin = load(p.row_ptr + row), end = load(p.row_ptr + row + 1);
    const auto score = [&](u32 e) {
        const float s = to_acc(load(p.scores + e));
        return p.bias ? s + to_acc(load(p.values + e)) : s;
    };
    float max = ATTN_NEG_INF;
    for (u32 e = begin + lane; e < end; e += 32) max = fmaxf(max, score(e));
    max = warp_allmax(max);
    float sum = 0.0f;
    for (u32 e = begin + lane; e < end; e += 32) sum += expf(score(e) - max);
    const float inv = 1.0f / subwarp_allsum<32>(0xffffffffu, sum);
    for (u32 e = begin + lane; e < end; e += 32) p.weights[e] = from_acc<T>(expf(score(e) - max) * inv);
}

// attention_widen<T> / attention_narrow<T>: the unfused pipeline's steps run in f32 whatever the
// storage (scores and weights rounded to 16 bits would lose more than the f32 softmax the
// precision promises), so a 16-bit operand's columns are copied, `cols` at a time, into or out
// of a row-major f32 staging copy (leading dimension `cols`). Conversions are exact one way and
// round to nearest the other. Grid-stride over the elements.
template <typename T>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_widen(const AttentionWiden<T> p) {
    const u64 total = (u64)p.rows * p.cols;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (u64)gridDim.x * blockDim.x)
        p.wide[i] = to_acc(load(p.t + i / p.cols * p.t_rs + i % p.cols * p.t_cs));
}

template <typename T>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_narrow(const AttentionWiden<T> p) {
    const u64 total = (u64)p.rows * p.cols;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (u64)gridDim.x * blockDim.x)
        p.t[i / p.cols * p.t_rs + i % p.cols * p.t_cs] = from_acc<T>(p.wide[i]);
}

// attention_unfused_grad<T>: the middle step of the unfused backward, for head `head` of
// `heads`. A warp per row forms D = <dO_i, O_i> over the head's dv columns (lanes across them,
// a butterfly sum), then turns each entry's P (`probs`) and dP (`dprobs`) into dS = P (dP - D),
// written over P. With a bias, dS is summed over the heads in f32 (`bias_sum`) and the sum is
// written to dbias by the last head; without one, a dbias given is zero (the values do not enter
// the scores). Fixed orders throughout: bit-reproducible.
template <typename T>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_unfused_grad(const AttentionUnfusedGrad<T> p) {
    const u64 row = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (row >= p.rows) return;
    const u32 lane = threadIdx.x % 32;
    const u64 first = (u64)p.head * p.dv;
    float dot = 0.0f;
    for (u32 t = lane; t < p.dv; t += 32)
        dot += to_acc(load(p.d_o + row * p.do_rs + (first + t) * p.do_cs)) * to_acc(load(p.o + row * p.o_rs + (first + t) * p.o_cs));
    const float d = subwarp_allsum<32>(0xffffffffu, dot);
    const u32 begin = load(p.row_ptr + row), end = load(p.row_ptr + row + 1);
    for (u32 e = begin + lane; e < end; e += 32) {
        const float ds = p.probs[e] * (load(p.dprobs + e) - d);
        p.probs[e] = ds;
        if (!p.dbias) continue;
        if (!p.bias) {
            if (p.head == 0) p.dbias[(u64)e * p.dbias_inc] = from_acc<T>(0.0f);
        } else {
            const float sum = p.head == 0 ? ds : p.bias_sum[e] + ds;
            if (p.head + 1 == p.heads) p.dbias[(u64)e * p.dbias_inc] = from_acc<T>(sum);
            else p.bias_sum[e] = sum;
        }
    }
}

// The backward, from the forward's row statistics (m, l) of each (row, head): with
// P = exp(s - m) / l, dP = <dO_i, V_j>, D = <dO_i, O_i> and dS = P (dP - D),
// dQ_i = scale sum_j dS_ij K_j, dK_j = scale sum_i dS_ij Q_i, dV_j = sum_i P_ij dO_i and the
// bias gradient sum over heads of dS. Three kernels, each output element written once by one
// warp or thread in a fixed order (no atomics): bit-reproducible. Lanes hold 32*CH columns of a
// head (the host refuses heads wider than the widest CH). The row and column passes take the
// items (rows, then columns, each with every head) of a list the plan made by length: WPI warps
// per item, warp p of an item taking its tiles p, p + WPI, ..., so that a hub row or column of a
// power-law graph does not hold one warp while the rest of the device idles.

// The WPI warps of each item add their partial sums in warp order (bit-reproducible); the
// item's first warp ends with the total. Every warp of the block calls it: it holds barriers.
template <int CH, int WPI>
__device__ __forceinline__ void attn_sum_parts(float (&acc)[CH], u32 warp, u32 lane) {
    __shared__ float parts[ATTN_BLOCK / 32][32 * CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) parts[warp][lane + 32 * c] = acc[c];
    __syncthreads();
    if (warp % WPI == 0) {
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            acc[c] = 0.0f;
            for (int w = 0; w < WPI; ++w) acc[c] += parts[warp + w][lane + 32 * c];
        }
    }
    __syncthreads();
}

// attention_backward_rows<T, CH, WPI>: WPI warps per (row, head). The row statistics give each
// entry's P as soon as its score is known, so one gather of an entry's K and V rows serves it
// all: the score and dP (lanes across the head, a butterfly each, the totals in every lane), then
// P and dS, and dQ accumulated from the K row still in registers. P and dS go side by side to
// `prob_grads` ((entry, head), entry major) for the column pass, stored by the entry's lane.
template <typename T, int CH, int WPI>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_backward_rows(const AttentionGrad<T> p) {
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const u64 listed = (u64)blockIdx.x * (ATTN_BLOCK / 32 / WPI) + warp / WPI;
    // An item's warps are all live or all not; the dead ones still meet at the barriers.
    const bool live = listed < (u64)p.items * p.heads;
    const u32 row = live ? load(p.list + listed / p.heads) : 0, head = (u32)(listed % p.heads);
    const u64 item = (u64)row * p.heads + head;
    u32 begin = 0, end = 0;
    if (live) {
        begin = load(p.row_ptr + row);
        end = load(p.row_ptr + row + 1);
    }
    const T* q_row = p.q + (u64)row * p.q_rs + (u64)head * p.d * p.q_cs;
    const T* do_row = p.d_o + (u64)row * p.do_rs + (u64)head * p.dv * p.do_cs;
    const T* o_row = p.o + (u64)row * p.o_rs + (u64)head * p.dv * p.o_cs;
    const u64 k_head = (u64)head * p.d * p.k_cs, v_head = (u64)head * p.dv * p.v_cs;
    float q_reg[CH], do_reg[CH], acc[CH];
    float mean = 0.0f;
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const u32 t = lane + 32 * c;
        q_reg[c] = live && t < p.d ? to_acc(load(q_row + (u64)t * p.q_cs)) : 0.0f;
        do_reg[c] = live && t < p.dv ? to_acc(load(do_row + (u64)t * p.do_cs)) : 0.0f;
        if (live && t < p.dv) mean += do_reg[c] * to_acc(load(o_row + (u64)t * p.o_cs));
        acc[c] = 0.0f;
    }
    mean = subwarp_allsum<32>(0xffffffffu, mean);
    const float max = live ? p.stats[2 * item] : 0.0f;
    const float inv_sum = live ? 1.0f / p.stats[2 * item + 1] : 0.0f;
    for (u32 base = begin + warp % WPI * 32; base < end; base += 32 * WPI) {
        const u32 chunk = end - base < 32 ? end - base : 32;
        const u32 col = lane < chunk ? load(p.col_idx + base + lane) : 0;
        const float bias = p.bias && lane < chunk ? to_acc(load(p.values + base + lane)) : 0.0f;
        float prob = 0.0f, ds = 0.0f;
        // Unrolled so that several entries' gathers are in flight before their reductions: 8
        // deep for heads of up to 128 columns (faster than 4 at d = 128), 4 for wider ones,
        // whose eight entries' rows would crowd the registers.
#pragma unroll(CH <= 4 ? 8 : 4)
        for (u32 e = 0; e < chunk; ++e) {
            const u64 j = __shfl_sync(0xffffffffu, col, e);
            const T* k_row = p.k + j * p.k_rs + k_head;
            const T* v_row = p.v + j * p.v_rs + v_head;
            float k_reg[CH];
            float qk = 0.0f, dov = 0.0f;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const u32 t = lane + 32 * c;
                k_reg[c] = t < p.d ? to_acc(load(k_row + (u64)t * p.k_cs)) : 0.0f;
                qk += q_reg[c] * k_reg[c];
                if (t < p.dv) dov += do_reg[c] * to_acc(load(v_row + (u64)t * p.v_cs));
            }
            qk = subwarp_allsum<32>(0xffffffffu, qk);
            dov = subwarp_allsum<32>(0xffffffffu, dov);
            const float score = qk * p.scale + __shfl_sync(0xffffffffu, bias, e);
            const float pe = expf(score - max) * inv_sum;
            const float dse = pe * (dov - mean);
            if (lane == e) {
                prob = pe;
                ds = dse;
            }
            const float w = dse * p.scale;
#pragma unroll
            for (int c = 0; c < CH; ++c) acc[c] += w * k_reg[c];
        }
        if (lane < chunk) {
            const u64 slot = (u64)(base + lane) * p.heads + head;
            reinterpret_cast<float2*>(p.prob_grads)[slot] = make_float2(prob, ds);
        }
    }
    if constexpr (WPI > 1) attn_sum_parts<CH, WPI>(acc, warp, lane);
    if (!live || warp % WPI != 0) return;
    T* dq_row = p.gq + (u64)row * p.gq_rs + (u64)head * p.d * p.gq_cs;
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const u32 t = lane + 32 * c;
        if (t < p.d) dq_row[(u64)t * p.gq_cs] = from_acc<T>(acc[c]);
    }
}

// attention_backward_cols<T, CH, WPI>: WPI warps per (column, head) over the transposed pattern (each
// column's entries with their rows and CSR positions, rows ascending): dK_j and dV_j from the
// P and dS the row pass left (one 8-byte load per entry).
template <typename T, int CH, int WPI>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_backward_cols(const AttentionGrad<T> p) {
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const u64 listed = (u64)blockIdx.x * (ATTN_BLOCK / 32 / WPI) + warp / WPI;
    const bool live = listed < (u64)p.items * p.heads;
    const u32 col = live ? load(p.list + listed / p.heads) : 0, head = (u32)(listed % p.heads);
    u32 begin = 0, end = 0;
    if (live) {
        begin = load(p.t_ptr + col);
        end = load(p.t_ptr + col + 1);
    }
    const u64 q_head = (u64)head * p.d * p.q_cs, do_head = (u64)head * p.dv * p.do_cs;
    float acc_k[CH], acc_v[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) acc_k[c] = acc_v[c] = 0.0f;
    for (u32 base = begin + warp % WPI * 32; base < end; base += 32 * WPI) {
        const u32 chunk = end - base < 32 ? end - base : 32;
        u32 row = 0;
        float ds = 0.0f, prob = 0.0f;
        if (lane < chunk) {
            row = load(p.t_row + base + lane);
            const u64 slot = (u64)load(p.t_entry + base + lane) * p.heads + head;
            const float2 pd = reinterpret_cast<const float2*>(p.prob_grads)[slot];
            prob = pd.x;
            ds = pd.y * p.scale;
        }
#pragma unroll 4
        for (u32 e = 0; e < chunk; ++e) {
            const u64 i = __shfl_sync(0xffffffffu, row, e);
            const float wk = __shfl_sync(0xffffffffu, ds, e), wv = __shfl_sync(0xffffffffu, prob, e);
            const T* q_row = p.q + i * p.q_rs + q_head;
            const T* do_row = p.d_o + i * p.do_rs + do_head;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const u32 t = lane + 32 * c;
                if (t < p.d) acc_k[c] += wk * to_acc(load(q_row + (u64)t * p.q_cs));
                if (t < p.dv) acc_v[c] += wv * to_acc(load(do_row + (u64)t * p.do_cs));
            }
        }
    }
    if constexpr (WPI > 1) {
        attn_sum_parts<CH, WPI>(acc_k, warp, lane);
        attn_sum_parts<CH, WPI>(acc_v, warp, lane);
    }
    if (!live || warp % WPI != 0) return;
    T* dk_row = p.gk + (u64)col * p.gk_rs + (u64)head * p.d * p.gk_cs;
    T* dv_row = p.gv + (u64)col * p.gv_rs + (u64)head * p.dv * p.gv_cs;
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const u32 t = lane + 32 * c;
        if (t < p.d) dk_row[(u64)t * p.gk_cs] = from_acc<T>(acc_k[c]);
        if (t < p.dv) dv_row[(u64)t * p.gv_cs] = from_acc<T>(acc_v[c]);
    }
}

// attention_backward_bias<T>: a thread per entry, the bias gradient: dS summed over the heads in
// head order (zeros without a bias, whose values do not enter the scores).
template <typename T>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_backward_bias(const AttentionGrad<T> p) {
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= p.nnz) return;
    float sum = 0.0f;
    if (p.bias)
        for (u32 h = 0; h < p.heads; ++h) sum += p.prob_grads[2 * (e * p.heads + h) + 1];
    p.gb[e * p.gb_inc] = from_acc<T>(sum);
}
