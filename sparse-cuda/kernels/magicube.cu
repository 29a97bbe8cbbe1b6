// Magicube (Li, Osawa, Hoefler, SC'22) on SR-BCRS: SpMM and SDDMM of i8 matrices on integer
// tensor cores, mma.m16n8k32 with s8 inputs and exact s32 accumulation (wrapping on overflow,
// as the oracle's i32 sums do), the mixed modes from 8-bit planes of wider operands, and the
// 4-bit path (magicube-s4): mma.m16n8k64 on s4/u4 operands packed two to a byte. Parameters:
// McSpmm<T>, McSddmm<T>, McSpmmPlanes<T>, McSplit<T> (src/magicube.rs) with SpmmDense<T>,
// SddmmDense<T> (src/operand.rs). docs/integer.md draws the layouts.
//
// The matrix is SR-BCRS with stride 32 (the k of the s8 MMA; 64 for the s4 SpMM): a vector-row
// of V rows (V = 2, 4, 8) holds its V x 1 vectors in groups of the stride, each group a V x
// stride row-major tile, 32 bytes a row in both widths. Padding vectors have value 0 and, on the
// device, column 0 (so their dense rows are read, in bounds, and multiplied by zero: integers
// hold no NaN to leak).
//
// Both kernels use the swapped product (C^T = B^T A^T): the sparse tile is the MMA's B operand
// (k = 32 vectors, n = 8 rows, rows past V zero), so row r of a group is read as two words per
// lane, exactly the B fragment, and the dense side fills the 16-row A operand.
//
// Lane l: g = l / 4, t = l % 4. Fragments of m16n8k32 (PTX ISA):
//   A (16 x 32, row): a0 = A[g][4t..4t+3], a1 = A[g+8][4t..], a2 = A[g][16+4t..], a3 = A[g+8][16+4t..]
//   B (32 x 8, col):  b0 = B[4t..4t+3][g], b1 = B[16+4t..][g]
//   C (16 x 8):       c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]

// D += A B of BITS-bit operands: 16 x 8 s32 += (16 x K) (K x 8) with K = 256 / BITS (8 bits:
// m16n8k32, 4 bits: m16n8k64, the same registers), A and B each signed or unsigned: the low
// parts of split operands are unsigned.
#define MC_MMA(SHAPE, TYPES)                                                                                  \
    asm volatile("mma.sync.aligned." SHAPE ".row.col.s32." TYPES ".s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                         \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
#define MC_MMA_SIGNS(SHAPE, S, U)                                   \
    if constexpr (!A_UNSIGNED && !B_UNSIGNED) MC_MMA(SHAPE, S "." S); \
    else if constexpr (!A_UNSIGNED) MC_MMA(SHAPE, S "." U);          \
    else if constexpr (!B_UNSIGNED) MC_MMA(SHAPE, U "." S);          \
    else MC_MMA(SHAPE, U "." U)
template <int BITS, bool A_UNSIGNED = false, bool B_UNSIGNED = false>
__device__ __forceinline__ void mma_int(int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    if constexpr (BITS == 8) {
        MC_MMA_SIGNS("m16n8k32", "s8", "u8");
    } else {
        MC_MMA_SIGNS("m16n8k64", "s4", "u4");
    }
}
// The same with the signedness chosen by (unrolled, so constant) loop indices.
template <int BITS>
__device__ __forceinline__ void mma_int(bool a_unsigned, bool b_unsigned, int (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    if (a_unsigned) {
        if (b_unsigned) mma_int<BITS, true, true>(d, a, b0, b1);
        else mma_int<BITS, true, false>(d, a, b0, b1);
    } else {
        if (b_unsigned) mma_int<BITS, false, true>(d, a, b0, b1);
        else mma_int<BITS, false, false>(d, a, b0, b1);
    }
}

// The lane mapping of an SpMM of BITS-bit operands: a fragment word holds a k-run of RUN
// values (lane (g, t) the runs RUN*t and GROUP/2 + RUN*t), and a group is the MMA's k.
template <int BITS>
struct McWidth {
    static constexpr int RUN = 32 / BITS;
    static constexpr int GROUP = 8 * RUN;
};

// The 4 x 4 byte transpose: word p of the result holds byte p of r0, r1, r2, r3 (in that
// order), so four rows of B read along N become four k-runs of 4, one per column.
__device__ __forceinline__ void transpose4(u32& r0, u32& r1, u32& r2, u32& r3) {
    const u32 x0 = __byte_perm(r0, r1, 0x5140), x1 = __byte_perm(r0, r1, 0x7362);
    const u32 y0 = __byte_perm(r2, r3, 0x5140), y1 = __byte_perm(r2, r3, 0x7362);
    r0 = __byte_perm(x0, y0, 0x5410);
    r1 = __byte_perm(x0, y0, 0x7632);
    r2 = __byte_perm(x1, y1, 0x5410);
    r3 = __byte_perm(x1, y1, 0x7632);
}

// Two words of a sparse tile row: the B fragment of lane (g, t) for row g of the group at
// vector `p` (zero for rows past V). A tile row is 32 bytes in both widths.
template <int V, int BITS>
__device__ __forceinline__ void load_tile_row(const signed char* values, u32 p, u32 g, u32 t, u32& b0, u32& b1) {
    b0 = 0;
    b1 = 0;
    if (g < V) {
        const u32* row = reinterpret_cast<const u32*>(values + (u64)p * V * BITS / 8 + g * 32);
        b0 = __ldg(row + t);
        b1 = __ldg(row + 4 + t);
    }
}

// The sparse matrix of an SpMM and the B it multiplies, as the accumulation reads them: LP
// planes of the sparse values and RP planes of B, BITS bits a value. One plane is the operand
// itself; two are the split of a wider one, a signed high part (plane 0) and an unsigned low
// part (plane 1): v = hi * 2^shift + lo. 4-bit planes are packed two values to a byte (the
// lower first), and `len` counts bytes of a B row (n for 8 bits).
template <int LP, int RP>
struct McOperands {
    const u32* vec_col;
    const signed char* values[LP];
    const signed char* b[RP];
    u32 b_rs, b_cs, len;
};

// One SpMM step's operands held by a lane: W columns (W*BITS/8 bytes) of each B plane's rows of
// its 2*RUN vectors (RUN*t.. and GROUP/2 + RUN*t.. of the group), and each sparse plane's tile
// row words.
template <int W, int LP, int RP, int BITS>
struct McStep {
    u32 rows[RP][2][McWidth<BITS>::RUN][W * BITS / 32];
    u32 tile[LP][2];
};

// The columns of a lane's 2*RUN vectors of the group at `at`.
template <int BITS>
struct McCols {
    uint4 c[2][McWidth<BITS>::RUN / 4];
};

template <int LP, int RP, int BITS>
__device__ __forceinline__ void load_cols(const McOperands<LP, RP>& m, u32 at, u32 t, McCols<BITS>& cols) {
    using Wd = McWidth<BITS>;
#pragma unroll
    for (int kh = 0; kh < 2; ++kh)
#pragma unroll
        for (int i = 0; i < Wd::RUN / 4; ++i)
            cols.c[kh][i] = __ldg(reinterpret_cast<const uint4*>(m.vec_col + at + Wd::GROUP / 2 * kh + Wd::RUN * t + 4 * i));
}

template <int V, int W, int LP, int RP, int BITS>
__device__ __forceinline__ void load_step(const McOperands<LP, RP>& m, const McCols<BITS>& cols, u32 at, u32 g, u32 t,
                                          u32 first, bool vec, McStep<W, LP, RP, BITS>& s) {
#pragma unroll
    for (int kh = 0; kh < 2; ++kh)
#pragma unroll
        for (int i = 0; i < McWidth<BITS>::RUN / 4; ++i) {
            const uint4 q4 = cols.c[kh][i];
            const u32 c[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int r = 0; r < RP; ++r)
                    load_run<signed char, W * BITS / 8>(m.b[r] + (u64)c[q] * m.b_rs, first * BITS / 8, m.len, m.b_cs, vec,
                                                        s.rows[r][kh][4 * i + q]);
        }
#pragma unroll
    for (int l = 0; l < LP; ++l) load_tile_row<V, BITS>(m.values[l], at, g, t, s.tile[l][0], s.tile[l][1]);
}

// The fragment words of one MMA column run from a lane's B rows of one half (kh) of a group:
// rows[q][wi] holds W*BITS/32 words of the row of vector RUN*t + q (in load order); out[b] is
// the k-run of column first + b. 8 bits: the 4 x 4 byte transpose. 4 bits: two byte transposes
// give, in word p, bytes p of rows 0..3 and of rows 4..7 (columns 2p and 2p+1 of the word's 8),
// and the masks interleave their nibbles: nibble n holds row n/2 (n even) or 4 + n/2 (n odd).
// The SR-BCRS column indices of the 4-bit plans are shuffled to match (row (j%2)*4 + j/2 holds
// vector j of the run), so nibble n ends as vector n: k order, with 8 logic operations per 8
// columns past the byte transposes (the paper's column-index shuffle).
template <int W, int BITS>
__device__ __forceinline__ void transpose_run(const u32 (&rows)[McWidth<BITS>::RUN][W * BITS / 32], u32 (&out)[W]) {
#pragma unroll
    for (int wi = 0; wi < W * BITS / 32; ++wi) {
        u32 x[4] = {rows[0][wi], rows[1][wi], rows[2][wi], rows[3][wi]};
        transpose4(x[0], x[1], x[2], x[3]);
        if constexpr (BITS == 8) {
#pragma unroll
            for (int q = 0; q < 4; ++q) out[4 * wi + q] = x[q];
        } else {
            u32 y[4] = {rows[4][wi], rows[5][wi], rows[6][wi], rows[7][wi]};
            transpose4(y[0], y[1], y[2], y[3]);
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                out[8 * wi + 2 * p] = (x[p] & 0x0f0f0f0fu) | ((y[p] & 0x0f0f0f0fu) << 4);
                out[8 * wi + 2 * p + 1] = ((x[p] >> 4) & 0x0f0f0f0fu) | (y[p] & 0xf0f0f0f0u);
            }
        }
    }
}

// The sums of one SpMM warp: the vectors `begin..end` (whole groups) of one vector-row times
// B's columns from `first` (this lane's, = tile*8W + g*W). A warp owns one chunk of a
// vector-row and 8W columns of C (J = W/2 MMAs of 16 columns): lane (g, t) reads W
// consecutive columns at `first` of each of its 2*RUN B rows (coalesced runs of 8W columns
// per row), and transpose_run turns them into the k-runs of A fragments: column b of the run
// is fragment row g (b < W/2) or g+8 of MMA b % (W/2). So MMA j's fragment row g is column
// first + j and row g+8 column first + W/2 + j, and lane (g, t) ends with rows 2t, 2t+1 of the
// vector-row over its W consecutive columns: sum[e][c] is row 2t+e, column first+c.
//
// With split operands every pair of planes is one MMA into its own sums, combined at the end
// shifted by the planes' weights (`left_shift` for the sparse high plane, BITS for B's), in
// wrapping i32 arithmetic: the products of the parts add up to the product modulo 2^32, which
// is what the i32 sums of the whole values wrap to.
//
// The next group's B rows and tile words are loaded before the current group's MMAs (the
// paper's prefetch into registers), and the columns of the group after it: a B row's address
// waits on its column, so prefetching both one group ahead would still leave two dependent
// round trips to memory in every step.
template <int V, int W, int LP, int RP, int BITS>
__device__ __forceinline__ void spmm_sums(const McOperands<LP, RP>& m, u32 begin, u32 end, u32 g, u32 t, u32 first,
                                          u32 left_shift, int (&sum)[2][W]) {
    constexpr u32 GROUP = McWidth<BITS>::GROUP;
    const bool vec = m.b_cs == 1 && m.b_rs % (W * BITS / 8) == 0;
    int acc[LP][RP][W / 2][4];
#pragma unroll
    for (int l = 0; l < LP; ++l)
#pragma unroll
        for (int r = 0; r < RP; ++r)
#pragma unroll
            for (int j = 0; j < W / 2; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[l][r][j][i] = 0;

    McStep<W, LP, RP, BITS> cur, next;
    McCols<BITS> cols;
    if (begin < end) {
        load_cols(m, begin, t, cols);
        load_step<V, W>(m, cols, begin, g, t, first, vec, cur);
    }
    if (begin + GROUP < end) load_cols(m, begin + GROUP, t, cols);
    for (u32 at = begin; at < end; at += GROUP) {
        if (at + GROUP < end) load_step<V, W>(m, cols, at + GROUP, g, t, first, vec, next);
        if (at + 2 * GROUP < end) load_cols(m, at + 2 * GROUP, t, cols);
        u32 a[RP][W / 2][4];
#pragma unroll
        for (int r = 0; r < RP; ++r)
#pragma unroll
            for (int kh = 0; kh < 2; ++kh) {
                u32 run[W];
                transpose_run<W, BITS>(cur.rows[r][kh], run);
#pragma unroll
                for (int b = 0; b < W; ++b) a[r][b % (W / 2)][b / (W / 2) + 2 * kh] = run[b];
            }
#pragma unroll
        for (int l = 0; l < LP; ++l)
#pragma unroll
            for (int r = 0; r < RP; ++r)
#pragma unroll
                for (int j = 0; j < W / 2; ++j)
                    mma_int<BITS>(r == 1, l == 1, acc[l][r][j], a[r][j], cur.tile[l][0], cur.tile[l][1]);
        cur = next;
    }
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int c = 0; c < W; ++c) {
            u32 total = 0;
#pragma unroll
            for (int l = 0; l < LP; ++l)
#pragma unroll
                for (int r = 0; r < RP; ++r) {
                    const u32 shift = (l == 0 && LP == 2 ? left_shift : 0) + (r == 0 && RP == 2 ? BITS : 0);
                    total += (u32)(c < W / 2 ? acc[l][r][c][e] : acc[l][r][c - W / 2][2 + e]) << shift;
                }
            sum[e][c] = (int)total;
        }
}

// Blocks per multiprocessor the i8 SpMM kernels are compiled to fit. Runs of 4 bytes are
// capped at 64 registers, so that 8 blocks (32 warps) stay resident: a launch of 4096 warps on
// 132 multiprocessors then runs in one wave, not two. The wider runs would spill under a cap.
__host__ __device__ constexpr int mc_spmm_blocks(int w) { return w == 4 ? 8 : 1; }

// This warp's chunk (a vector-row, or a run of whole groups of a long one) and column tile of
// an SpMM of `chunks` chunks and N = n, or false past them. Warps are numbered chunk major,
// column tiles minor, so the warps reading one tile row are neighbours and share it through L1.
template <int W>
__device__ __forceinline__ bool spmm_item(u32 chunks, u32 n, u32* chunk, u32* tile) {
    const u32 tiles = (n + 8 * W - 1) / (8 * W);
    const u64 item = (u64)blockIdx.x * MC_WARPS + threadIdx.x / 32;
    if (item >= (u64)chunks * tiles) return false;
    *chunk = (u32)(item / tiles);
    *tile = (u32)(item % tiles);
    return true;
}

// out[c*cs] = f(c, prior) for c < count <= W, the prior value read only when `read` (beta != 0:
// otherwise the output is write-only); as vector accesses of 4 elements when `whole`
// (contiguous, 16-byte aligned, count == W).
template <int W, typename O, typename F>
__device__ __forceinline__ void store_run(O* out, u32 cs, u32 count, bool whole, bool read, F f) {
    if (whole) {
#pragma unroll
        for (int c = 0; c < W; c += 4) {
            union {
                int4 raw;
                O v[4];
            } s;
            s.raw = read ? *reinterpret_cast<const int4*>(out + c) : make_int4(0, 0, 0, 0);
#pragma unroll
            for (int i = 0; i < 4; ++i) s.v[i] = f(c + i, s.v[i]);
            *reinterpret_cast<int4*>(out + c) = s.raw;
        }
    } else {
#pragma unroll
        for (int c = 0; c < W; ++c)
            if (c < (int)count) out[(u64)c * cs] = f(c, read ? out[(u64)c * cs] : O(0));
    }
}

// C = alpha*sum + beta*C for the sums of spmm_sums, rows 2t, 2t+1 of vector-row `vrow` over
// the lane's W columns from `first`. With `split` the chunks of a long vector-row share its
// rows of C: C already holds beta*C (the plan's scale), and each chunk adds alpha times its
// sums with an atomic. Integer addition is associative (wrapping), so the result is the same
// whatever order the chunks land in.
template <int V, int W>
__device__ __forceinline__ void store_sums(const int (&sum)[2][W], u32 vrow, u32 t, u32 first, u32 rows, u32 n, int* c,
                                           u32 c_rs, u32 c_cs, int alpha, int beta, bool split) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const u32 r = 2 * t + e;
        const u64 row = (u64)vrow * V + r;
        if (r >= V || row >= rows || first >= n) continue;
        const u32 count = n - first < W ? n - first : W;
        int* out = c + row * c_rs + (u64)first * c_cs;
        if (split) {
#pragma unroll
            for (int k = 0; k < W; ++k)
                if (k < (int)count) atomicAdd(out + (u64)k * c_cs, (int)((u32)alpha * (u32)sum[e][k]));
            continue;
        }
        const bool whole = c_cs == 1 && c_rs % 4 == 0 && count == W;
        store_run<W>(out, c_cs, count, whole, beta != 0, [&](int k, int prior) {
            update(&prior, alpha, sum[e][k], beta);
            return prior;
        });
    }
}

// C = alpha*A*B + beta*C for A in SR-BCRS of V-row vectors, B and C i8 and i32 (spmm_sums).
template <int V, int W>
__global__ void __launch_bounds__(MC_THREADS, mc_spmm_blocks(W)) mc_spmm(const McSpmm<signed char> p) {
    const SpmmDense<signed char>& o = p.dense;
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    u32 chunk, tile;
    if (!spmm_item<W>(p.chunks, o.n, &chunk, &tile)) return;
    const u32 vrow = __ldg(p.chunk_vrow + chunk);
    const u32 first = tile * 8 * W + g * W;
    const McOperands<1, 1> m = {p.vec_col, {p.values}, {o.b}, o.b_rs, o.b_cs, o.n};
    int sum[2][W];
    spmm_sums<V, W, 1, 1, 8>(m, __ldg(p.chunk_start + chunk), __ldg(p.chunk_end + chunk), g, t, first, 0, sum);
    store_sums<V, W>(sum, vrow, t, first, p.rows, o.n, o.c, o.c_rs, o.c_cs, o.alpha, o.beta, p.split);
}

// An SpMM from planes of BITS bits (C = alpha*A*B + beta*C): 16-bit storage (the modes
// l12-r4 .. l16-r16) as two 8-bit planes of A's values (hi * 2^8 + lo), and the 4-bit path
// (magicube-s4, i8 storage) as LP nibble planes of them, packed in SR-BCRS slot order: one when
// every value fits 4 bits (the values themselves), else two (hi * 2^4 + lo). B comes as the
// planes mc_split_dense made, row-major with b_ld bytes a row. When every value of B fits BITS
// bits (`*b_wide` == 0, what the modes of R <= BITS promise) B's low plane read as signed is B
// itself, and each step takes LP MMAs; otherwise B = hi * 2^BITS + lo, and 2*LP. alpha, beta
// and C are i32 (as bits). The 4-bit SR-BCRS has stride 64 and its column indices shuffled
// (transpose_run).
template <int V, int W, int BITS, int LP>
__global__ void __launch_bounds__(MC_THREADS) mc_spmm_planes(const McSpmmPlanes p) {
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    u32 chunk, tile;
    if (!spmm_item<W>(p.chunks, p.n, &chunk, &tile)) return;
    const u32 vrow = __ldg(p.chunk_vrow + chunk);
    const u32 first = tile * 8 * W + g * W;
    const u32 begin = __ldg(p.chunk_start + chunk), end = __ldg(p.chunk_end + chunk);
    const signed char* hi = reinterpret_cast<const signed char*>(p.values_hi);
    const signed char* lo = reinterpret_cast<const signed char*>(p.values_lo);
    const signed char* b_hi = reinterpret_cast<const signed char*>(p.b_hi);
    const signed char* b_lo = reinterpret_cast<const signed char*>(p.b_lo);
    const u32 len = (p.n * BITS + 7) / 8;
    McOperands<LP, 1> narrow = {p.vec_col, {}, {b_lo}, p.b_ld, 1, len};
    McOperands<LP, 2> wide = {p.vec_col, {}, {b_hi, b_lo}, p.b_ld, 1, len};
    if constexpr (LP == 2) {
        narrow.values[0] = wide.values[0] = hi;
        narrow.values[1] = wide.values[1] = lo;
    } else {
        narrow.values[0] = wide.values[0] = lo;
    }
    int sum[2][W];
    if (__ldg(p.b_wide) != 0) spmm_sums<V, W, LP, 2, BITS>(wide, begin, end, g, t, first, BITS, sum);
    else spmm_sums<V, W, LP, 1, BITS>(narrow, begin, end, g, t, first, BITS, sum);
    store_sums<V, W>(sum, vrow, t, first, p.rows, p.n, reinterpret_cast<int*>(p.c), p.c_rs, p.c_cs, (int)p.alpha,
                     (int)p.beta, p.split);
}

// A dense operand (rows x n at its strides) as two planes of BITS bits, row-major with `ld`
// bytes a row: its signed high part (v >> BITS) in `hi` and unsigned low part in `lo`, 4-bit
// parts packed two to a byte, the lower column first (an odd row's last high nibble 0). A
// value outside the signed range of BITS bits sets `wide`. A thread per byte of a row.
template <typename P, int BITS>
__global__ void __launch_bounds__(MC_THREADS) mc_split_dense(const P p) {
    constexpr u32 PER_BYTE = 8 / BITS, MASK = (1u << BITS) - 1;
    constexpr int HALF = 1 << (BITS - 1);
    const u32 bytes = (p.n + PER_BYTE - 1) / PER_BYTE;
    const u64 total = (u64)p.rows * bytes;
    for (u64 e = (u64)blockIdx.x * MC_THREADS + threadIdx.x; e < total; e += (u64)gridDim.x * MC_THREADS) {
        const u64 i = e / bytes, jb = e % bytes;
        u32 hi = 0, lo = 0;
        bool wide = false;
#pragma unroll
        for (u32 s = 0; s < PER_BYTE; ++s) {
            const u64 j = jb * PER_BYTE + s;
            const int v = j < p.n ? to_acc(p.b[i * p.b_rs + j * p.b_cs]) : 0;
            wide |= v < -HALF || v >= HALF;
            hi |= ((u32)(v >> BITS) & MASK) << (s * BITS);
            lo |= ((u32)v & MASK) << (s * BITS);
        }
        if (wide) atomicOr(p.wide, 1u);
        p.hi[i * p.ld + jb] = (unsigned char)hi;
        p.lo[i * p.ld + jb] = (unsigned char)lo;
    }
}

// C = alpha * dequantized(A_q * B_q) + beta*C in f32: the i32 sums of spmm_sums scaled by A's
// row scale and B's column scale (symmetric quantization: no zero points, so the scales
// factor out of the sums). C is not read when beta == 0. Chunks are whole vector-rows: f32 sums
// of split rows would depend on the order their atomics land in.
template <int V, int W>
__global__ void __launch_bounds__(MC_THREADS, mc_spmm_blocks(W)) mc_spmm_dequant(const McSpmmDequant<float> p) {
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    u32 chunk, tile;
    if (!spmm_item<W>(p.chunks, p.n, &chunk, &tile)) return;
    const u32 vrow = __ldg(p.chunk_vrow + chunk);
    const u32 first = tile * 8 * W + g * W;
    const McOperands<1, 1> m = {p.vec_col, {reinterpret_cast<const signed char*>(p.values)},
                                {reinterpret_cast<const signed char*>(p.b)}, p.b_ld, 1, p.n};
    int sum[2][W];
    spmm_sums<V, W, 1, 1, 8>(m, __ldg(p.chunk_start + chunk), __ldg(p.chunk_end + chunk), g, t, first, 0, sum);
    float col_scale[W];
#pragma unroll
    for (int c = 0; c < W; ++c) col_scale[c] = first + c < p.n ? __ldg(p.col_scale + first + c) : 0.f;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const u32 r = 2 * t + e;
        const u64 row = (u64)vrow * V + r;
        if (r >= V || row >= p.rows || first >= p.n) continue;
        const float row_scale = __ldg(p.row_scale + row);
        const u32 count = p.n - first < W ? p.n - first : W;
        const bool whole = p.c_cs == 1 && p.c_rs % 4 == 0 && count == W;
        store_run<W>(p.c + row * p.c_rs + (u64)first * p.c_cs, p.c_cs, count, whole, p.beta != 0.f, [&](int c, float prior) {
            const float v = p.alpha * (row_scale * col_scale[c] * (float)sum[e][c]);
            return p.beta != 0.f ? v + p.beta * prior : v;
        });
    }
}

// The scale of each column of B (rows x n, f32 at its strides): max |B[:, j]| / 127, or 1 for
// a column of zeros (sparse-formats' quantize, per column). A block per column.
template <typename P>
__global__ void __launch_bounds__(MC_THREADS) mc_column_scales(const P p) {
    __shared__ float warp_max[MC_WARPS];
    for (u32 j = blockIdx.x; j < p.n; j += gridDim.x) {
        float m = 0.f;
        for (u32 i = threadIdx.x; i < p.rows; i += MC_THREADS) m = fmaxf(m, fabsf(__ldg(p.b + (u64)i * p.b_rs + (u64)j * p.b_cs)));
#pragma unroll
        for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
            float all = 0.f;
#pragma unroll
            for (int w = 0; w < MC_WARPS; ++w) all = fmaxf(all, warp_max[w]);
            p.scale[j] = all == 0.f ? 1.f : all / 127.f;
        }
        __syncthreads();
    }
}

// B quantized with its column scales into q (rows x n, row-major, q_ld apart): round(x / s) to
// nearest even in f64, as the host does, saturated to [-127, 127].
template <typename P>
__global__ void __launch_bounds__(MC_THREADS) mc_quantize(const P p) {
    const u64 total = (u64)p.rows * p.n;
    for (u64 e = (u64)blockIdx.x * MC_THREADS + threadIdx.x; e < total; e += (u64)gridDim.x * MC_THREADS) {
        const u64 i = e / p.n, j = e % p.n;
        const double x = (double)__ldg(p.b + i * p.b_rs + j * p.b_cs) / (double)__ldg(p.scale + j);
        p.q[i * p.q_ld + j] = (unsigned char)(signed char)fmin(fmax(rint(x), -127.0), 127.0);
    }
}

// C = alpha*(X*Y^T) ∘ spy(S) + beta*C in SR-BCRS slot order. A warp owns one tile: 32 vectors
// of a vector-row, two MMAs of 16 vectors (the m side) by the V rows (the n side), over K in
// steps of 64. Lane (g, t) reads 16 consecutive bytes at k = step + 16t of X row g and of the Y
// rows of vectors g, g+8, 16+g, 24+g: words 0, 1 are the k-runs 4t and 16+4t of the first MMA
// of the step, words 2, 3 of the second. Any permutation of k taken alike by both operands
// leaves the dot products unchanged, and this one makes every load a contiguous 16 bytes.
// Rows, X and Y row-major or not, need no transpose. Slots without an entry (padding vectors,
// rows past V or M, rows a vector does not hold) are written 0.
//
// sddmm_dots: the tile's dot products from LX planes of X's row (`x`, `x_len` bytes, 0 for a
// row past V or M) and LY planes of the Y rows (`y`), BITS bits a value (4-bit ones packed two
// to a byte, `k` counting bytes): one plane is the operand itself, two are its signed high and
// unsigned low parts, whose pair sums are combined shifted (as in spmm_sums). A 16-byte run
// holds 32 nibbles in 4 words of 8, the same permutation of k on both sides.
// dot[h][2i + e] is vector 16h + 8i + g, row 2t + e.
template <int LX, int LY, int BITS>
__device__ __forceinline__ void sddmm_dots(const signed char* const (&x)[LX], const signed char* const (&y)[LY][4], u32 k,
                                           u32 x_len, u32 x_cs, u32 y_cs, bool x_vec, bool y_vec, u32 t,
                                           int (&dot)[2][4]) {
    int acc[LX][LY][2][4];
#pragma unroll
    for (int lx = 0; lx < LX; ++lx)
#pragma unroll
        for (int ly = 0; ly < LY; ++ly)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[lx][ly][h][i] = 0;
    // Steps unrolled so that their loads are in flight together: an SDDMM of K <= 256 waits on
    // one round trip to memory, not one per step (fewer with more planes, for registers).
    constexpr int unroll = 4 / (LX * LY) > 1 ? 4 / (LX * LY) : 1;
#pragma unroll unroll
    for (u32 k0 = 0; k0 < k; k0 += 64) {
        const u32 first = k0 + 16 * t;
        u32 xw[LX][4], yw[LY][4][4];
#pragma unroll
        for (int lx = 0; lx < LX; ++lx) load_run<signed char, 16>(x[lx], first, x_len, x_cs, x_vec, xw[lx]);
#pragma unroll
        for (int ly = 0; ly < LY; ++ly)
#pragma unroll
            for (int m = 0; m < 4; ++m) load_run<signed char, 16>(y[ly][m], first, k, y_cs, y_vec, yw[ly][m]);
#pragma unroll
        for (int lx = 0; lx < LX; ++lx)
#pragma unroll
            for (int ly = 0; ly < LY; ++ly)
#pragma unroll
                for (int s = 0; s < 2; ++s)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const u32 a[4] = {yw[ly][2 * h][2 * s], yw[ly][2 * h + 1][2 * s], yw[ly][2 * h][2 * s + 1],
                                          yw[ly][2 * h + 1][2 * s + 1]};
                        mma_int<BITS>(ly == 1, lx == 1, acc[lx][ly][h], a, xw[lx][2 * s], xw[lx][2 * s + 1]);
                    }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            u32 total = 0;
#pragma unroll
            for (int lx = 0; lx < LX; ++lx)
#pragma unroll
                for (int ly = 0; ly < LY; ++ly) {
                    const u32 shift = (lx == 0 && LX == 2 ? BITS : 0) + (ly == 0 && LY == 2 ? BITS : 0);
                    total += (u32)acc[lx][ly][h][i] << shift;
                }
            dot[h][i] = (int)total;
        }
}

// The row masks of the lane's vectors of the tile at `at`, in sddmm_store's order. Loaded
// before the dot products, so that the store does not wait on one more round trip to memory.
template <typename P>
__device__ __forceinline__ void sddmm_masks(const P& p, u32 at, u32 g, u32 (&mask)[4]) {
#pragma unroll
    for (int m = 0; m < 4; ++m) mask[m] = __ldg(p.vec_mask + at + 8 * m + g);
}

// The tile's slots of C from its dot products (sddmm_dots) and row masks (sddmm_masks), scaled
// by S's values when asked.
template <int V, typename P, typename T>
__device__ __forceinline__ void sddmm_store(const P& p, const SddmmDense<T>& o, u32 at, u32 g, u32 t, const int (&dot)[2][4],
                                            const u32 (&masks)[4]) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const u32 v = 16 * h + 8 * i + g;
            const u32 mask = masks[2 * h + i];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const u32 r = 2 * t + e;
                if (r >= V) continue;
                const u64 slot = (u64)at * V + r * MC_STRIDE + v;
                int* out = o.c + slot * o.c_inc;
                if ((mask >> r) & 1) {
                    int d = dot[h][2 * i + e];
                    if (p.scale_by_values) d = (int)((u32)d * (u32)to_acc(p.values[slot]));
                    update(out, o.alpha, d, o.beta);
                } else {
                    *out = 0;
                }
            }
        }
}

template <int V>
__global__ void __launch_bounds__(MC_THREADS) mc_sddmm(const McSddmm<signed char> p) {
    const SddmmDense<signed char>& o = p.dense;
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u64 tile = (u64)blockIdx.x * MC_WARPS + threadIdx.x / 32;
    if (tile >= p.tiles) return;
    const u32 vrow = __ldg(p.tile_vrow + tile), at = __ldg(p.tile_start + tile);
    const bool x_vec = o.x_cs == 1 && o.x_rs % 16 == 0, y_vec = o.y_cs == 1 && o.y_rs % 16 == 0;
    const u64 x_row = (u64)vrow * V + g;
    const bool x_live = g < V && x_row < p.rows;
    const signed char* const x[1] = {o.x + (x_live ? x_row : 0) * o.x_rs};
    const signed char* y[1][4];
#pragma unroll
    for (int m = 0; m < 4; ++m) y[0][m] = o.y + (u64)__ldg(p.vec_col + at + 8 * m + g) * o.y_rs;
    // alpha == 0 (the plan's scale) reads neither X nor Y.
    const u32 k = o.alpha == 0 ? 0 : o.k;
    u32 masks[4];
    sddmm_masks(p, at, g, masks);
    int dot[2][4];
    sddmm_dots<1, 1, 8>(x, y, k, x_live ? k : 0, o.x_cs, o.y_cs, x_vec, y_vec, t, dot);
    sddmm_store<V>(p, o, at, g, t, dot, masks);
}

// The SDDMM from planes of BITS bits (16-bit storage as 8-bit planes, the 4-bit path of i8
// storage as nibble planes): X and Y as the planes mc_split_dense made (row-major, x_ld and
// y_ld bytes a row), each read as one plane (its low part as signed) when its values fit BITS
// bits (wide[0] for X, wide[1] for Y, 0) and as two otherwise: 1, 2 or 4 MMAs per step.
template <int V, int BITS, typename P>
__device__ __forceinline__ void sddmm_planes(const P& p) {
    const auto& o = p.dense;
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u64 tile = (u64)blockIdx.x * MC_WARPS + threadIdx.x / 32;
    if (tile >= p.tiles) return;
    const u32 vrow = __ldg(p.tile_vrow + tile), at = __ldg(p.tile_start + tile);
    const u64 x_row = (u64)vrow * V + g;
    const bool x_live = g < V && x_row < p.rows;
    const u64 x_at = (x_live ? x_row : 0) * p.x_ld;
    const signed char* x_hi = reinterpret_cast<const signed char*>(p.x_hi) + x_at;
    const signed char* x_lo = reinterpret_cast<const signed char*>(p.x_lo) + x_at;
    const signed char* y_hi[4];
    const signed char* y_lo[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
        const u64 y_at = (u64)__ldg(p.vec_col + at + 8 * m + g) * p.y_ld;
        y_hi[m] = reinterpret_cast<const signed char*>(p.y_hi) + y_at;
        y_lo[m] = reinterpret_cast<const signed char*>(p.y_lo) + y_at;
    }
    const u32 k = o.alpha == 0 ? 0 : (o.k * BITS + 7) / 8, x_len = x_live ? k : 0;
    const bool x_wide = __ldg(p.wide) != 0, y_wide = __ldg(p.wide + 1) != 0;
    const signed char* const x1[1] = {x_lo};
    const signed char* const x2[2] = {x_hi, x_lo};
    const signed char* const y1[1][4] = {{y_lo[0], y_lo[1], y_lo[2], y_lo[3]}};
    const signed char* const y2[2][4] = {{y_hi[0], y_hi[1], y_hi[2], y_hi[3]}, {y_lo[0], y_lo[1], y_lo[2], y_lo[3]}};
    u32 masks[4];
    sddmm_masks(p, at, g, masks);
    int dot[2][4];
    if (x_wide && y_wide) sddmm_dots<2, 2, BITS>(x2, y2, k, x_len, 1, 1, true, true, t, dot);
    else if (x_wide) sddmm_dots<2, 1, BITS>(x2, y1, k, x_len, 1, 1, true, true, t, dot);
    else if (y_wide) sddmm_dots<1, 2, BITS>(x1, y2, k, x_len, 1, 1, true, true, t, dot);
    else sddmm_dots<1, 1, BITS>(x1, y1, k, x_len, 1, 1, true, true, t, dot);
    sddmm_store<V>(p, o, at, g, t, dot, masks);
}

template <int V, int BITS, typename T>
__global__ void __launch_bounds__(MC_THREADS) mc_sddmm_planes(const McSddmmPlanes<T> p) {
    sddmm_planes<V, BITS>(p);
}

// The integer MMA rate of this device: each warp issues `iterations` rounds of MC_PROBE_CHAINS
// independent MMAs of BITS-bit operands (enough chains to keep the pipe busy), from registers.
// What sm_90 does with 4-bit MMAs (no 4-bit tensor cores) shows as the ratio of the two rates.
template <int BITS>
__global__ void __launch_bounds__(MC_THREADS) mc_mma_probe(const McProbe p) {
    const u32 a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x ^ 0x5au, blockIdx.x};
    const u32 b0 = threadIdx.x * 7u, b1 = blockIdx.x + 1u;
    int acc[MC_PROBE_CHAINS][4];
#pragma unroll
    for (int c = 0; c < MC_PROBE_CHAINS; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[c][i] = c;
    for (u32 it = 0; it < p.iterations; ++it)
#pragma unroll
        for (int c = 0; c < MC_PROBE_CHAINS; ++c) mma_int<BITS>(acc[c], a, b0, b1);
    int sum = 0;
#pragma unroll
    for (int c = 0; c < MC_PROBE_CHAINS; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    // Never true in practice, but the compiler cannot know: the MMAs must run.
    if ((u32)sum == p.never) p.out[0] = (u32)sum;
}
