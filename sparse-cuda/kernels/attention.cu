// Fused sparse attention on CUDA cores, O = softmax_row(scale*(Q*K^T) ∘ spy(A) [+ A]) * V, for
// H heads side by side in Q, K, V and O (head h in columns h*d .. of Q and K, h*dv .. of V and O).
// Parameters: AttentionFused<T> (src/attention.rs). Storage T (f32, f16, bf16); scores, softmax
// and sums in f32.
//
// attention_fused<T, CH, WPI>: WPI warps per item, an item being one (row, head) of the row list
// the plan made (rows of up to LONG_ROW entries take one warp, longer ones a whole block). A warp
// takes its item's entries in tiles of 32 (warp p of an item takes tiles p, p + WPI, ...): each
// entry's score is a dot product with lanes across d (Q's first 32*CH elements held in registers)
// summed by a butterfly, kept by the lane whose entry it is; the tile's maximum updates the running
// maximum (started at -inf) and the sum and the accumulators are rescaled once per tile; then the
// tile's weighted V rows are added, lanes across dv, CH columns each (lane + 32*c). grid.y cuts dv
// into slices of 32*CH columns (each slice recomputes the scores). The warps of a long row combine
// their (maximum, sum, accumulators) through shared memory in warp order, so every output is
// written once in a fixed order: runs are bit-reproducible. A row without entries gives zeros.

#define ATTN_NEG_INF __int_as_float(0xff800000)

template <typename A>
__device__ __forceinline__ A warp_allmax(A v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

template <typename T, int CH, int WPI>
__global__ void __launch_bounds__(ATTN_BLOCK) attention_fused(const AttentionFused<T> p) {
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const u32 part = warp % WPI;
    const u64 item = (u64)blockIdx.x * (ATTN_BLOCK / 32 / WPI) + warp / WPI;
    // The grid covers whole blocks of items: the warps past the last item skip the work but,
    // for WPI > 1, still meet at the barrier (an item's warps are all live or all not).
    const bool live = item < (u64)p.items * p.heads;
    u32 row = 0, head = 0, begin = 0, end = 0;
    if (live) {
        row = load(p.rows + item / p.heads);
        head = (u32)(item % p.heads);
        begin = load(p.row_ptr + row);
        end = load(p.row_ptr + row + 1);
    }
    const T* q_row = p.q + (u64)row * p.q_rs + (u64)head * p.d * p.q_cs;
    const u64 k_head = (u64)head * p.d * p.k_cs;
    const u32 v_first = blockIdx.y * 32 * CH;
    const u64 v_head = ((u64)head * p.dv + v_first) * p.v_cs;

    float q_reg[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const u32 t = lane + 32 * c;
        q_reg[c] = live && t < p.d ? to_acc(load(q_row + (u64)t * p.q_cs)) : 0.0f;
    }
    float acc[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) acc[c] = 0.0f;
    float run_max = ATTN_NEG_INF, run_sum = 0.0f;

    for (u32 base = begin + part * 32; base < end; base += 32 * WPI) {
        const u32 chunk = end - base < 32 ? end - base : 32;
        const u32 col = lane < chunk ? load(p.col_idx + base + lane) : 0;
        float score = ATTN_NEG_INF;
        // Unrolled so that several entries' loads are in flight before their reductions.
#pragma unroll 4
        for (u32 e = 0; e < chunk; ++e) {
            const T* k_row = p.k + (u64)__shfl_sync(0xffffffffu, col, e) * p.k_rs + k_head;
            float partial = 0.0f;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const u32 t = lane + 32 * c;
                if (t < p.d) partial += q_reg[c] * to_acc(load(k_row + (u64)t * p.k_cs));
            }
            for (u32 t = lane + 32 * CH; t < p.d; t += 32)
                partial += to_acc(load(q_row + (u64)t * p.q_cs)) * to_acc(load(k_row + (u64)t * p.k_cs));
            const float dot = subwarp_allsum<32>(0xffffffffu, partial);
            if (lane == e) score = dot * p.scale;
        }
        if (p.bias && lane < chunk) score += to_acc(load(p.values + base + lane));
        const float tile_max = fmaxf(run_max, warp_allmax(score));
        const float rescale = expf(run_max - tile_max);
        const float weight = lane < chunk ? expf(score - tile_max) : 0.0f;
        run_sum = run_sum * rescale + subwarp_allsum<32>(0xffffffffu, weight);
        run_max = tile_max;
#pragma unroll
        for (int c = 0; c < CH; ++c) acc[c] *= rescale;
#pragma unroll 4
        for (u32 e = 0; e < chunk; ++e) {
            const float w = __shfl_sync(0xffffffffu, weight, e);
            const T* v_row = p.v + (u64)__shfl_sync(0xffffffffu, col, e) * p.v_rs + v_head;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const u32 t = lane + 32 * c;
                if (v_first + t < p.dv) acc[c] += w * to_acc(load(v_row + (u64)t * p.v_cs));
            }
        }
    }

    if constexpr (WPI > 1) {
        __shared__ float part_max[ATTN_BLOCK / 32], part_sum[ATTN_BLOCK / 32];
        __shared__ float part_acc[ATTN_BLOCK / 32][32 * CH];
        if (lane == 0) {
            part_max[warp] = run_max;
            part_sum[warp] = run_sum;
        }
#pragma unroll
        for (int c = 0; c < CH; ++c) part_acc[warp][lane + 32 * c] = acc[c];
        __syncthreads();
        if (part != 0) return;
        const u32 first = warp;
        run_max = ATTN_NEG_INF;
        for (int w = 0; w < WPI; ++w) run_max = fmaxf(run_max, part_max[first + w]);
        run_sum = 0.0f;
#pragma unroll
        for (int c = 0; c < CH; ++c) acc[c] = 0.0f;
        for (int w = 0; w < WPI; ++w) {
            // A warp that saw no entry holds max -inf and sum 0: it adds nothing.
            const float f = part_max[first + w] == ATTN_NEG_INF ? 0.0f : expf(part_max[first + w] - run_max);
            run_sum += f * part_sum[first + w];
#pragma unroll
            for (int c = 0; c < CH; ++c) acc[c] += f * part_acc[first + w][lane + 32 * c];
        }
    }
    if (!live) return;
    const float inv = begin == end ? 0.0f : 1.0f / run_sum;
    T* o_row = p.o + (u64)row * p.o_rs + ((u64)head * p.dv + v_first) * p.o_cs;
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const u32 t = lane + 32 * c;
        if (v_first + t < p.dv) o_row[(u64)t * p.o_cs] = from_acc<T>(acc[c] * inv);
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
