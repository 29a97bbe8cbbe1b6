// FlashSparse (Shi, Li et al., PPoPP'25) on ME-BCRS: tensor-core SpMM and SDDMM with the
// swap-and-transpose MMA, and the GPU builder of ME-BCRS from CSR. `flashsparse.rs` describes
// the work decomposition; this file the thread mappings.
//
// Storage types: f16 runs mma.m16n8k8 with f16 inputs and f32 accumulation (K = 8 vectors per
// block); f32 runs mma.m16n8k4 with inputs rounded to tf32 (K = 4). Every kernel is a template
// over the storage type and the window height H:
// - H = 8, swap-and-transpose: C^T = B^T A^T puts the 8-row window on the MMA's n side (8) and
//   16 columns of the dense operand on its m side (16).
// - H = 16, the TC-GNN/DTC granularity kept as an ablation: the 16-row window is the MMA's m
//   side, as in C = A B. It shares the loads and stores below, so only the granularity differs.
//
// Lane l of a warp is (g, t) = (l / 4, l % 4), the MMA's groupID and thread-in-group. Fragment
// layouts (PTX ISA, mma.m16n8k8 .f16 and mma.m16n8k4 .tf32, both .row.col with f32 C/D):
//   A (16 x k): elements (g, k_i) and (g + 8, k_i) with k_i = t*VPL + i, i < VPL
//   B (k x 8):  elements (k_i, g)
//   D (16 x 8): d0 (g, 2t), d1 (g, 2t+1), d2 (g+8, 2t), d3 (g+8, 2t+1)
// where VPL (values per lane) is 2 for f16 and 1 for tf32.
//
// Coalesced mapping of the dense operand (the paper's "memory-efficient thread mapping"): the
// MMA's 16 dense rows need not be 16 consecutive columns of B in order. In its simplest form
// (the paper's), MMA row g stands for column 2g of a 16-column tile and row g + 8 for column
// 2g + 1, so each lane reads a pair of adjacent elements of a B row and the 8 lanes of one
// thread-in-group read 16 consecutive elements. Here the permutation spans several tiles, so
// that a lane reads a run of up to 16 bytes ("Lane runs" below) and the 8 lanes read up to 128
// consecutive bytes; each lane's outputs come out as runs of adjacent columns of C too. In
// SDDMM the inner dimension is permuted the same way (any order sums the same products), so
// each lane reads 16 consecutive bytes of its rows.
//
// Parameters: FsSpmm<T>, FsCombine<T>, FsSddmm<T> (src/flashsparse.rs) with SpmmDense<T> and
// SddmmDense<T> (src/operand.rs); FsBuildFirst, FsScan, FsBuildWindowPtr, FsBuildFill<T>
// (src/flashsparse/build.rs). The FS_* constants are Rust's, given as -D options: threads per
// block, pipeline stages, the combine's batch, flags per scan thread, the task limits, the empty
// slot and the run length.

// Loads issued ahead of their use (the SpMM pipeline, the SDDMM operands of a step) go through
// the predicated loads of prelude.cuh, so that nothing consumes them before the step that uses
// them. One element's bits, zero-extended to 32:
__device__ __forceinline__ void fs_ld_elem(u32& w, const float* p, bool ok) { ld_nc_pred(w, p, ok); }
__device__ __forceinline__ void fs_ld_elem(u32& w, const u32* p, bool ok) { ld_nc_pred(w, p, ok); }
__device__ __forceinline__ void fs_ld_elem(u32& w, const half_t* p, bool ok) { ld_nc_pred_u16(w, p, ok); }

// A run of P elements of T at p as packed words (P * sizeof(T) / 4 of them), zeros where not
// read. VEC: the run is whole or not read at all (`avail` >= P or 0), one access of up to 16
// bytes, p aligned to it; else element by element `stride` apart, the first `avail` of them.
template <typename T, int P, bool VEC>
__device__ __forceinline__ void fs_run(const T* p, u32 stride, u32 avail, u32 (&w)[P * sizeof(T) / 4]) {
    const int WORDS = P * sizeof(T) / 4;
#pragma unroll
    for (int i = 0; i < WORDS; ++i) w[i] = 0;
    if constexpr (VEC) {
        ld_nc_pred(w, p, avail >= P);
    } else {
        const int PER_WORD = 4 / sizeof(T);
#pragma unroll
        for (int j = 0; j < P; ++j) {
            u32 e = 0;
            fs_ld_elem(e, p + (u64)j * stride, j < (int)avail);
            w[j / PER_WORD] |= e << (32 / PER_WORD * (j % PER_WORD));
        }
    }
}

__device__ __forceinline__ u32 fs_tf32(u32 bits) {
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
    return r;
}

// d += A B by `mma.sync.aligned.SHAPE` (its shape and types) with f32 accumulators: A rows g (a0)
// and g+8 (a1), B column g.
#define FS_MMA(SHAPE, d, a0, a1, b)                                                         \
    asm volatile("mma.sync.aligned." SHAPE " {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                           \
                 : "r"(a0), "r"(a1), "r"(b))

// The MMA of a storage type and how its operand registers are made from loaded words.
template <typename T> struct fs_mma;

template <> struct fs_mma<half_t> {
    static const int K = 8;
    static const int VPL = 2;
    // A dense operand register: the element of column 2p + odd of the lane's two vectors (words
    // p of their runs).
    template <int G, int W>
    static __device__ __forceinline__ u32 dense(const u32 (&run)[VPL][G][W], int q, int p, int odd) {
        return __byte_perm(run[0][q][p], run[1][q][p], odd ? 0x7632 : 0x5410);
    }
    // A sparse operand register: the lane's two values (zero-extended halves).
    static __device__ __forceinline__ u32 sparse(const u32 (&v)[VPL]) { return __byte_perm(v[0], v[1], 0x5410); }
    // An inner-dimension register (SDDMM): word m of a run, two consecutive elements.
    static __device__ __forceinline__ u32 inner(const u32 (&w)[FS_RUN_BYTES / 4], int m) { return w[m]; }
    static __device__ __forceinline__ void run(float* d, u32 a0, u32 a1, u32 b) {
        FS_MMA("m16n8k8.row.col.f32.f16.f16.f32", d, a0, a1, b);
    }
};

template <> struct fs_mma<float> {
    static const int K = 4;
    static const int VPL = 1;
    template <int G, int W>
    static __device__ __forceinline__ u32 dense(const u32 (&run)[VPL][G][W], int q, int p, int odd) {
        return fs_tf32(run[0][q][2 * p + odd]);
    }
    static __device__ __forceinline__ u32 sparse(const u32 (&v)[VPL]) { return fs_tf32(v[0]); }
    static __device__ __forceinline__ u32 inner(const u32 (&w)[FS_RUN_BYTES / 4], int m) { return fs_tf32(w[m]); }
    static __device__ __forceinline__ void run(float* d, u32 a0, u32 a1, u32 b) {
        FS_MMA("m16n8k4.row.col.f32.tf32.tf32.f32", d, a0, a1, b);
    }
};

// ------------------------------------------------------------------------------------------
// SpMM: one warp per (task, G groups of columns of C). A task is up to 31 consecutive whole
// windows, or one chunk of a window too long for one task (flashsparse.rs sizes them). The warp
// streams the task's blocks, window after window, through one pipeline, so the latency of the
// task's first loads is paid once for all its windows; each window's rows are written when its
// last block is done. A chunk's window is split: its chunks write partial sums to a workspace
// slot each (f32, `ws_ld` per row) and fs_spmm_combine adds them in order.
//
// Lane runs: for each vector, a lane reads P consecutive elements of the vector's B row (16
// bytes when P * sizeof(T) == 16), and the 8 lanes of one thread-in-group read 8 * P
// consecutive elements, a group. Element j of lane g's run is column P*g + j of the group and
// feeds MMA tile j / 2 (16 columns each): as row g (j even) or g + 8 (j odd) of the dense side
// when H = 8, as the first (j even) or second (j odd) of the two MMAs side by side when H = 16.
// The outputs come back as runs too: R = P columns of rows 2t and 2t+1 (H = 8), or R = 2P
// columns of rows g and g+8 (H = 16). P = 2 is the pair mapping described at the top.

// One block's columns as a lane holds them: those of its vectors t*VPL + i (0 past the block's
// width, whose B elements are not read) and the block's width. Only a window's last block is
// short; its width comes from the window pointers.
template <typename T> struct fs_columns {
    static const int K = fs_mma<T>::K, VPL = fs_mma<T>::VPL;
    u32 col[VPL];
    u32 width;

    __device__ __forceinline__ void fetch(const u32* vec_col, u32 v, u32 window_end, u32 t) {
        width = min((u32)K, window_end - v);
        const u32 j0 = t * VPL;
#pragma unroll
        for (int i = 0; i < VPL; ++i) {
            col[i] = 0;
            fs_ld_elem(col[i], vec_col + v + j0 + i, j0 + i < width);
        }
    }
};

// The SpMM pipeline: a block's B runs and values are copied to shared memory by cp.async while
// the MMAs of the block before run, so no register is held while a copy is under way (with
// register buffers the f16 kernel needed 128 registers a thread, 25% occupancy; with these 96).
// The columns of the next block to copy are loaded one step ahead. More stages measured slower
// (f16, N = 128: 3 stages 0.99x, 4 stages 0.95x of 2): the shared memory they take is carved
// out of the L1 cache, where blocks of nearby windows find the B rows they share.

// The bits of one element in shared memory, zero-extended to 32.
__device__ __forceinline__ u32 fs_bits(const half_t* p) { return *reinterpret_cast<const unsigned short*>(p); }
__device__ __forceinline__ u32 fs_bits(const float* p) { return *reinterpret_cast<const u32*>(p); }

// W words of shared memory at p (aligned to them) in one access.
template <int W> __device__ __forceinline__ void fs_lds(const unsigned char* p, u32 (&w)[W]) {
    if constexpr (W == 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (W == 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        w[0] = v.x, w[1] = v.y;
    } else {
        w[0] = *reinterpret_cast<const u32*>(p);
    }
}

// One stage of a warp's pipeline in shared memory: the B runs of one block, each lane's own
// (VPL x G runs of P elements, stored lane after lane so that the warp's accesses are
// consecutive and never share a bank), then the block's values as ME-BCRS stores them (H rows
// of `width`), which every lane reads a part of.
template <typename T, int H, int P, int G> struct fs_stage {
    static const int K = fs_mma<T>::K, VPL = fs_mma<T>::VPL;
    static const int RUN_BYTES = P * sizeof(T), WORDS = RUN_BYTES / 4;
    static const int RUNS_BYTES = VPL * G * 32 * RUN_BYTES;
    static const int BYTES = RUNS_BYTES + H * K * sizeof(T);
    unsigned char* base;

    __device__ __forceinline__ unsigned char* run(int i, int q, u32 lane) const {
        return base + ((i * G + q) * 32 + lane) * RUN_BYTES;
    }

    // Starts the copies of the block at vector v whose columns `s` holds: per vector of the
    // lane and per group, P elements of the vector's B row (zeros past the block's width and
    // past N); the block's values in 16-byte chunks (a block starts at v * H * sizeof(T) bytes
    // and spans H * width * sizeof(T), both multiples of 16). The `_elem` variant loads its
    // runs element by element and stores them itself.
    template <bool VEC>
    __device__ __forceinline__ void fill(const fs_columns<T>& s, u32 v, const T* values, const T* b, u32 b_rs,
                                         u32 b_cs, u32 n, u32 first_col, u32 lane) const {
        const u32 t = lane % 4;
#pragma unroll
        for (int i = 0; i < VPL; ++i) {
            const bool live = t * VPL + i < s.width;
            const T* row = b + (u64)s.col[i] * b_rs;
#pragma unroll
            for (int q = 0; q < G; ++q) {
                const u32 col = first_col + q * 8 * P;
                const u32 left = live && col < n ? n - col : 0;
                const T* src = row + (u64)col * b_cs;
                if constexpr (VEC) {
                    cp_async<RUN_BYTES>(run(i, q, lane), src, left >= P ? RUN_BYTES : 0);
                } else {
                    u32 w[WORDS];
                    fs_run<T, P, false>(src, b_cs, left, w);
#pragma unroll
                    for (int k = 0; k < WORDS; ++k) reinterpret_cast<u32*>(run(i, q, lane))[k] = w[k];
                }
            }
        }
        const u32 chunks = H * s.width * sizeof(T) / 16;
        if (lane < chunks)
            cp_async<16>(base + RUNS_BYTES + lane * 16,
                              reinterpret_cast<const unsigned char*>(values + (u64)v * H) + lane * 16, 16);
    }

    // The lane's runs, as packed words.
    __device__ __forceinline__ void runs(u32 lane, u32 (&r)[VPL][G][WORDS]) const {
#pragma unroll
        for (int i = 0; i < VPL; ++i)
#pragma unroll
            for (int q = 0; q < G; ++q) fs_lds<WORDS>(run(i, q, lane), r[i][q]);
    }

    // The sparse operand of the lane: row `row` of the block at its vectors t*VPL + i, each
    // element's bits in a word, 0 past the block's width.
    __device__ __forceinline__ u32 sparse(u32 row, u32 width, u32 t) const {
        const T* block = reinterpret_cast<const T*>(base + RUNS_BYTES);
        u32 v[VPL];
#pragma unroll
        for (int i = 0; i < VPL; ++i) {
            const u32 j = t * VPL + i;
            v[i] = j < width ? fs_bits(block + row * width + j) : 0;
        }
        return fs_mma<T>::sparse(v);
    }
};

// The windows of a task: lane j holds the window pointer of its window j (j <= count), so the
// window of a vector and a window's end are a ballot and a shuffle, no load.
static_assert(FS_TASK_WINDOWS < 32, "the window pointers of a task fit one warp");
struct fs_windows {
    u32 bound, count;

    // The task's window holding vector v (< the task's end): the last boundary at or below v.
    __device__ __forceinline__ u32 of(u32 v) const {
        const u32 lane = threadIdx.x % 32;
        return __popc(__ballot_sync(0xffffffffu, lane <= count && bound <= v)) - 1;
    }
    __device__ __forceinline__ u32 end(u32 j) const { return __shfl_sync(0xffffffffu, bound, j + 1); }
};

// Where a block of the task's stream starts: vector v of window j; `live` false past the end.
struct fs_cursor {
    u32 v, j;
    bool live;

    // The next block: K vectors on, or the start of the next window that has vectors.
    __device__ __forceinline__ fs_cursor next(const fs_windows& ws, u32 k, u32 task_end) const {
        fs_cursor c;
        const u32 window_end = ws.end(j);
        c.v = v + k < window_end ? v + k : window_end;
        c.live = live && c.v < task_end;
        c.j = c.live ? ws.of(c.v) : ws.count;
        return c;
    }
};

// The SpMM of window height H with lane runs of P elements in G groups (flashsparse.rs picks
// them by N); VEC: B's runs are whole and aligned, one access each (row-major B whose leading
// dimension and width P divides), else read element by element.
template <typename T, int H, int P, int G, bool VEC>
__global__ void __launch_bounds__(FS_THREADS) fs_spmm(const FsSpmm<T> args) {
    const SpmmDense<T>& o = args.dense;
    typedef fs_mma<T> M;
    typedef fs_stage<T, H, P, G> S;
    const int K = M::K, VPL = M::VPL;
    // MMA tiles of 16 columns per group, and accumulators per tile: one MMA (H = 8) or two
    // side by side (H = 16).
    const int TILES = P / 2, ACC = 4 * H / 8, WARP_COLS = 8 * P * G;
    __shared__ __align__(16) unsigned char stages[FS_WARPS][FS_STAGES][S::BYTES];
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, warp = threadIdx.x / 32;
    const u32 task = blockIdx.x * FS_WARPS + warp;
    // The whole warp leaves together: the ballots and shuffles below involve all its lanes.
    if (task >= args.tasks) return;
    const u32 first = args.task_window[task], start = args.task_start[task], end = args.task_end[task],
              slot = args.task_slot[task];
    fs_windows wins;
    wins.count = args.task_windows[task];
    wins.bound = lane <= wins.count ? args.window_ptr[first + lane] : 0;
    auto stage = [&](u32 s) {
        S st;
        st.base = stages[warp][s];
        return st;
    };
    for (u32 n0 = blockIdx.y * WARP_COLS; n0 < o.n; n0 += gridDim.y * WARP_COLS) {
        const u32 lane_col = n0 + P * g;
        float acc[G][TILES][ACC];
        // C rows of window j of the task = alpha * acc + beta * C (its slot's rows for a
        // chunk), then the accumulators start again from zero.
        auto flush = [&](u32 j) {
            const u32 row0 = (first + j) * H;
            const int R = H == 8 ? P : 2 * P;
#pragma unroll
            for (int q = 0; q < G; ++q) {
                u32 r[2];
                float out[2][R];
                const u32 col = n0 + q * 8 * P + (H == 8 ? P * g : 2 * P * t);
                if constexpr (H == 8) {
                    // Tile p's d0, d2: row 2t at columns 2p, 2p+1 of the run; d1, d3: row 2t+1.
                    r[0] = 2 * t;
                    r[1] = 2 * t + 1;
#pragma unroll
                    for (int p = 0; p < TILES; ++p) {
                        out[0][2 * p] = acc[q][p][0];
                        out[0][2 * p + 1] = acc[q][p][2];
                        out[1][2 * p] = acc[q][p][1];
                        out[1][2 * p + 1] = acc[q][p][3];
                    }
                } else {
                    // MMA e of tile p holds run columns 2p + e (its n = 2t: d0 row g, d2 row
                    // g+8) and P + 2p + e (n = 2t+1: d1, d3).
                    r[0] = g;
                    r[1] = g + 8;
#pragma unroll
                    for (int p = 0; p < TILES; ++p)
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                out[h][2 * p + e] = acc[q][p][e * ACC / 2 + 2 * h];
                                out[h][P + 2 * p + e] = acc[q][p][e * ACC / 2 + 2 * h + 1];
                            }
                }
#pragma unroll
                for (int p = 0; p < TILES; ++p)
#pragma unroll
                    for (int i = 0; i < ACC; ++i) acc[q][p][i] = 0.0f;
                if (col >= o.n) continue;
                const u32 count = min((u32)R, o.n - col);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const u32 row = row0 + r[h];
                    if (row >= args.rows) continue;
                    if (slot == FS_NONE) {
                        update_span<T, R>(o.c + (u64)row * o.c_rs + (u64)col * o.c_cs, o.c_cs, args.c_vec,
                                          count, o.alpha, out[h], o.beta);
                    } else {
                        update_span<float, R>(args.ws + ((u64)slot * H + r[h]) * args.ws_ld + col, 1, true, count,
                                              1.0f, out[h], 0.0f);
                    }
                }
            }
        };
#pragma unroll
        for (int q = 0; q < G; ++q)
#pragma unroll
            for (int p = 0; p < TILES; ++p)
#pragma unroll
                for (int i = 0; i < ACC; ++i) acc[q][p][i] = 0.0f;
        // `at`: the block whose MMAs run next, in stage `now`; `fill`: the next block to copy,
        // into stage `into`, whose columns `cols` holds or is loading. One copy group per
        // block (empty past the task's end), so waiting for all but the last FS_STAGES - 1
        // groups waits for block `at`.
        fs_cursor at;
        at.v = start;
        at.live = start < end;
        at.j = at.live ? wins.of(start) : wins.count;
        fs_cursor fill = at;
        fs_columns<T> cols;
        // The previous pass over N may still be reading the stages.
        __syncwarp();
#pragma unroll
        for (u32 s = 0; s < FS_STAGES - 1; ++s) {
            if (fill.live) {
                cols.fetch(args.vec_col, fill.v, wins.end(fill.j), t);
                stage(s).template fill<VEC>(cols, fill.v, args.values, o.b, o.b_rs, o.b_cs, o.n,
                                            lane_col, lane);
            }
            cp_async_commit();
            fill = fill.next(wins, K, end);
        }
        if (fill.live) cols.fetch(args.vec_col, fill.v, wins.end(fill.j), t);
        // Windows before the first block are empty: beta * C.
        for (u32 j = 0; j < at.j; ++j) flush(j);
        u32 now = 0, into = FS_STAGES - 1;
        while (at.live) {
            // Every lane is done with the stage refilled now: the previous block's.
            __syncwarp();
            if (fill.live)
                stage(into).template fill<VEC>(cols, fill.v, args.values, o.b, o.b_rs, o.b_cs, o.n,
                                               lane_col, lane);
            cp_async_commit();
            fill = fill.next(wins, K, end);
            if (fill.live) cols.fetch(args.vec_col, fill.v, wins.end(fill.j), t);
            cp_async_wait<FS_STAGES - 1>();
            // The values other lanes copied have landed too.
            __syncwarp();
            const S st = stage(now);
            const u32 width = min((u32)K, wins.end(at.j) - at.v);
            const u32 lo = st.sparse(g, width, t);
            const u32 hi = H == 16 ? st.sparse(g + 8, width, t) : 0;
            u32 run[VPL][G][S::WORDS];
            st.runs(lane, run);
#pragma unroll
            for (int q = 0; q < G; ++q) {
#pragma unroll
                for (int p = 0; p < TILES; ++p) {
                    const u32 even = M::dense(run, q, p, 0), odd = M::dense(run, q, p, 1);
                    if constexpr (H == 8) {
                        // A = B^T (rows g and g+8: columns 2p and 2p+1 of the runs), B = the
                        // sparse block^T.
                        M::run(acc[q][p], even, odd, lo);
                    } else {
                        // A = the sparse block, B = the runs' even (first MMA) and odd columns.
                        M::run(acc[q][p], lo, hi, even);
                        M::run(acc[q][p] + ACC / 2, lo, hi, odd);
                    }
                }
            }
            // The window is done when the next block is another's (or none is left); the
            // empty windows up to that one get beta * C.
            const fs_cursor ahead = at.next(wins, K, end);
            if (ahead.j != at.j)
                for (u32 j = at.j; j < ahead.j; ++j) flush(j);
            at = ahead;
            now = now + 1 == FS_STAGES ? 0 : now + 1;
            into = into + 1 == FS_STAGES ? 0 : into + 1;
        }
    }
}

// C = alpha * (sum of a split window's partials, in chunk order) + beta * C: grid.x over
// columns, grid.y over groups of `group_rows` rows of the split windows (the host sizes the
// groups so that the threads fill the device about twice: one row a thread when split windows
// are few, several when they are many). On matrices of a few long rows a window has dozens of
// chunks; their partials are loaded FS_COMBINE_BATCH at a time, so that the loads overlap (one
// at a time, each add waits for its load), and still added in chunk order.
template <typename T>
__global__ void __launch_bounds__(FS_THREADS) fs_spmm_combine(const FsCombine<T> args) {
    const SpmmDense<T>& o = args.dense;
    const u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= o.n) return;
    const u32 h = args.h, group_rows = args.group_rows;
    const u32 groups = (h + group_rows - 1) / group_rows;
    for (u64 split_group = blockIdx.y; split_group < (u64)args.split * groups; split_group += gridDim.y) {
        const u32 s = (u32)(split_group / groups), r0 = (u32)(split_group % groups) * group_rows;
        const u32 w = args.split_window[s];
        const u32 parts = (args.window_ptr[w + 1] - args.window_ptr[w] + args.chunk_len - 1) / args.chunk_len;
        for (u32 r = r0; r < min(r0 + group_rows, h); ++r) {
            const u64 row = (u64)w * h + r;
            if (row >= args.rows) break;
            // Chunk p's partial of this row and column; slots of consecutive chunks are h rows
            // apart.
            const float* part = args.ws + ((u64)args.split_slot[s] * h + r) * args.ws_ld + j;
            const u64 stride = (u64)h * args.ws_ld;
            float sum = 0.0f;
            for (u32 p0 = 0; p0 < parts; p0 += FS_COMBINE_BATCH) {
                u32 v[FS_COMBINE_BATCH];
#pragma unroll
                for (int i = 0; i < FS_COMBINE_BATCH; ++i) {
                    v[i] = 0;
                    ld_nc_pred(v[i], part + (p0 + i) * stride, p0 + i < parts);
                }
#pragma unroll
                for (int i = 0; i < FS_COMBINE_BATCH; ++i)
                    if (p0 + i < parts) sum += __uint_as_float(v[i]);
            }
            update(o.c + row * o.c_rs + (u64)j * o.c_cs, o.alpha, sum, o.beta);
        }
    }
}

// ------------------------------------------------------------------------------------------
// SDDMM: one warp per tile of a window's vectors, 16 of them (H = 8: the MMA's m side, C^T =
// Y_sub X_sub^T) or 8 (H = 16: the n side, C = X_sub Y_sub^T), over the whole inner dimension.
// Tiles never share an output, so long windows need no combining. In each step a lane reads
// 16 bytes of each of its rows (L = 8 f16 or 4 f32 consecutive inner elements), fed to L / VPL
// MMAs, so a step covers 4 * L inner elements; the result lands in ME-BCRS slot order, 0 in
// slots without an entry, so it can feed an SpMM plan's values directly.

// The SDDMM of window height H; VEC: X's and Y's runs are whole and aligned, one access each
// (row-major X and Y whose leading dimensions and K the run length divides).
template <typename T, int H, bool VEC>
__global__ void __launch_bounds__(FS_THREADS) fs_sddmm(const FsSddmm<T> args) {
    const SddmmDense<T>& o = args.dense;
    typedef fs_mma<T> M;
    const int K = M::K, L = FS_RUN_BYTES / sizeof(T), WORDS = FS_RUN_BYTES / 4;
    const u32 lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const u32 tile = blockIdx.x * FS_WARPS + threadIdx.x / 32;
    if (tile >= args.tiles) return;
    const u32 w = args.tile_window[tile], v0 = args.tile_start[tile];
    const u32 window_start = args.window_ptr[w], window_end = args.window_ptr[w + 1];
    const u32 kdim = o.k;
    const u32 row0 = w * H;
    // The rows this lane reads: A's rows g and g+8 and B's column g, each a row of X or Y, or
    // none (a vector past the window's end, a row past the matrix's).
    const T *lo_row, *hi_row, *b_row;
    u32 lo_stride, hi_stride, b_stride;
    bool lo_ok, hi_ok, b_ok;
    if constexpr (H == 8) {
        lo_ok = v0 + g < window_end;
        hi_ok = v0 + g + 8 < window_end;
        b_ok = row0 + g < args.rows;
        lo_row = o.y + (u64)(lo_ok ? load(args.vec_col + v0 + g) : 0) * o.y_rs;
        hi_row = o.y + (u64)(hi_ok ? load(args.vec_col + v0 + g + 8) : 0) * o.y_rs;
        b_row = o.x + (u64)(b_ok ? row0 + g : 0) * o.x_rs;
        lo_stride = hi_stride = o.y_cs;
        b_stride = o.x_cs;
    } else {
        lo_ok = row0 + g < args.rows;
        hi_ok = row0 + g + 8 < args.rows;
        b_ok = v0 + g < window_end;
        lo_row = o.x + (u64)(lo_ok ? row0 + g : 0) * o.x_rs;
        hi_row = o.x + (u64)(hi_ok ? row0 + g + 8 : 0) * o.x_rs;
        b_row = o.y + (u64)(b_ok ? load(args.vec_col + v0 + g) : 0) * o.y_rs;
        lo_stride = hi_stride = o.x_cs;
        b_stride = o.y_cs;
    }
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // alpha == 0 reads neither X nor Y (C = beta*C, padding slots 0): K is taken as empty.
    const u32 k_end = o.alpha != 0 ? kdim : 0;
    // Two steps' loads in flight at once where K allows.
#pragma unroll 2
    for (u32 k0 = 0; k0 < k_end; k0 += 4 * L) {
        const u32 kk = k0 + t * L;
        const u32 left = kk < kdim ? kdim - kk : 0;
        u32 a_lo[WORDS], a_hi[WORDS], bb[WORDS];
        fs_run<T, L, VEC>(lo_row + (u64)kk * lo_stride, lo_stride, lo_ok ? left : 0, a_lo);
        fs_run<T, L, VEC>(hi_row + (u64)kk * hi_stride, hi_stride, hi_ok ? left : 0, a_hi);
        fs_run<T, L, VEC>(b_row + (u64)kk * b_stride, b_stride, b_ok ? left : 0, bb);
        // Word m of each run feeds one MMA: 2 consecutive f16 (k = 8) or 1 tf32 (k = 4).
#pragma unroll
        for (int m = 0; m < WORDS; ++m) M::run(d, M::inner(a_lo, m), M::inner(a_hi, m), M::inner(bb, m));
    }
    // D's (m, n) is (vector, row) for H = 8 and (row, vector) for H = 16.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const u32 m = g + (e >= 2 ? 8 : 0), nn = 2 * t + (e & 1);
        const u32 vl = H == 8 ? m : nn, r = H == 8 ? nn : m;
        const u32 v = v0 + vl;
        if (v >= window_end) continue;
        const u32 block_start = window_start + (v - window_start) / K * K;
        const u32 width = min((u32)K, window_end - block_start);
        const u64 s = (u64)block_start * H + r * width + (v - block_start);
        const u32 mask = H == 8 ? (u32)args.vec_mask[v]
                                : (u32)args.vec_mask[2 * (u64)v] | ((u32)args.vec_mask[2 * (u64)v + 1] << 8);
        T* out = o.c + s * o.c_inc;
        if ((mask >> r) & 1) {
            float result = 0.0f;
            if (o.alpha != 0) result = o.alpha * (args.scale_by_values ? d[e] * to_acc(args.values[s]) : d[e]);
            if (o.beta != 0) result += o.beta * to_acc(*out);
            *out = from_acc<T>(result);
        } else {
            *out = from_acc<T>(0.0f);
        }
    }
}

// ------------------------------------------------------------------------------------------
// ME-BCRS from canonical CSR on the device, parallel over entries (so a long window is spread
// over as many threads as it has entries). Entry e of row i (window w = i / H, row r = i % H,
// column c):
// 1. fs_build_first: first[e] = 1 when no earlier row of the window holds c (binary searches),
//    so each vector of the window is counted once, at its first row.
// 2. An exclusive scan of first[] (fs_scan_*): prefix[row_ptr[w*H]] is window_ptr[w].
// 3. fs_build_fill: c's vector index in the window is the number of distinct columns below c,
//    the sum over the window's rows of the first-flags before c (lower bound + prefix); the
//    same searches give the vector's mask. Each entry writes its value to its slot, and the
//    slot to slots[e] (so that new values in CSR order can be scattered there); the first entry
//    of a vector writes its column and mask.
// Every kernel is a template (the window height, the scan's block size), so that a module
// compiled for one instantiation holds no other kernel.

// The row of entry e: the last row whose start is at most e (empty rows skipped).
__device__ __forceinline__ u32 fs_row_of(const u32* row_ptr, u32 rows, u32 e) {
    u32 lo = 0, hi = rows;
    while (lo < hi) {
        const u32 mid = lo + (hi - lo + 1) / 2;
        if (row_ptr[mid] <= e) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// The first position in col_idx[begin, end) holding a column >= c.
__device__ __forceinline__ u32 fs_lower_bound(const u32* col_idx, u32 begin, u32 end, u32 c) {
    while (begin < end) {
        const u32 mid = begin + (end - begin) / 2;
        if (col_idx[mid] < c) begin = mid + 1;
        else end = mid;
    }
    return begin;
}

template <int H>
__global__ void __launch_bounds__(FS_BUILD_THREADS) fs_build_first(const FsBuildFirst args) {
    const u64 entry = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (entry >= args.nnz) return;
    const u32 e = (u32)entry;
    const u32 i = fs_row_of(args.row_ptr, args.rows, e), c = args.col_idx[e];
    u32 is_first = 1;
    for (u32 other = i - i % H; other < i && is_first; ++other) {
        const u32 p = fs_lower_bound(args.col_idx, args.row_ptr[other], args.row_ptr[other + 1], c);
        if (p < args.row_ptr[other + 1] && args.col_idx[p] == c) is_first = 0;
    }
    args.first[e] = is_first;
}

// Exclusive scan of the block's thread totals (THREADS of them); the block's total in *total.
template <int THREADS>
__device__ __forceinline__ u32 fs_block_scan(u32 v, u32* total) {
    __shared__ u32 warp_sums[THREADS / 32];
    const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    u32 inclusive = v;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const u32 up = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += up;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    u32 before = 0, all = 0;
    for (u32 k = 0; k < THREADS / 32; ++k) {
        if (k < warp) before += warp_sums[k];
        all += warp_sums[k];
    }
    __syncthreads();
    *total = all;
    return before + inclusive - v;
}

// This thread's FS_SCAN_ITEMS flags of a tile of THREADS * FS_SCAN_ITEMS: the first one's index
// (`base`) and their sum.
template <int THREADS>
__device__ __forceinline__ u32 fs_thread_flags(const FsScan& args, u64* base) {
    *base = ((u64)blockIdx.x * THREADS + threadIdx.x) * FS_SCAN_ITEMS;
    u32 mine = 0;
    for (u32 i = 0; i < FS_SCAN_ITEMS; ++i)
        if (*base + i < args.n) mine += args.flags[*base + i];
    return mine;
}

// Per tile of THREADS * FS_SCAN_ITEMS flags, their total (in offsets[tile]).
template <int THREADS>
__global__ void __launch_bounds__(THREADS) fs_scan_tiles(const FsScan args) {
    u64 base;
    const u32 mine = fs_thread_flags<THREADS>(args, &base);
    u32 total;
    fs_block_scan<THREADS>(mine, &total);
    if (threadIdx.x == 0) args.offsets[blockIdx.x] = total;
}

// One block: the tile totals become exclusive offsets; offsets[tiles] gets the grand total.
template <int THREADS>
__global__ void __launch_bounds__(THREADS) fs_scan_offsets(const FsScan args) {
    u32* totals = args.offsets;
    const u32 tiles = args.tiles;
    u32 carry = 0;
    // Every thread runs every iteration: the block scan synchronises the block.
    for (u32 base = 0; base < tiles; base += THREADS) {
        const u32 i = base + threadIdx.x;
        const u32 v = i < tiles ? totals[i] : 0;
        u32 total;
        const u32 before = fs_block_scan<THREADS>(v, &total);
        if (i < tiles) totals[i] = carry + before;
        carry += total;
    }
    if (threadIdx.x == 0) totals[tiles] = carry;
}

// prefix[e] = flags before e (e <= n), from the tile offsets.
template <int THREADS>
__global__ void __launch_bounds__(THREADS) fs_scan_apply(const FsScan args) {
    u64 base;
    const u32 mine = fs_thread_flags<THREADS>(args, &base);
    u32 total;
    u32 at = args.offsets[blockIdx.x] + fs_block_scan<THREADS>(mine, &total);
    for (u32 i = 0; i < FS_SCAN_ITEMS; ++i) {
        if (base + i <= args.n) args.prefix[base + i] = at;
        if (base + i < args.n) at += args.flags[base + i];
    }
}

template <int H>
__global__ void __launch_bounds__(FS_BUILD_THREADS) fs_build_window_ptr(const FsBuildWindowPtr args) {
    const u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (w <= args.windows) args.window_ptr[w] = args.prefix[args.row_ptr[min(w * H, (u64)args.rows)]];
}

template <typename T, int H>
__global__ void __launch_bounds__(FS_BUILD_THREADS) fs_build_fill(const FsBuildFill<T> args) {
    const u64 entry = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (entry >= args.nnz) return;
    const u32 e = (u32)entry, rows = args.rows, k = args.k;
    const u32* row_ptr = args.row_ptr;
    const u32* col_idx = args.col_idx;
    const u32 i = fs_row_of(row_ptr, rows, e), c = col_idx[e];
    const u32 w = i / H, r = i % H, first_row = w * H;
    u32 rank = 0, mask = 0;
    for (u32 other = first_row; other < min(first_row + H, rows); ++other) {
        const u32 begin = row_ptr[other], end = row_ptr[other + 1];
        const u32 p = fs_lower_bound(col_idx, begin, end, c);
        rank += args.prefix[p] - args.prefix[begin];
        if (p < end && col_idx[p] == c) mask |= 1u << (other - first_row);
    }
    const u32 start = args.window_ptr[w], vectors = args.window_ptr[w + 1] - start;
    const u32 block_start = rank - rank % k, width = min(k, vectors - block_start);
    const u64 slot = (u64)(start + block_start) * H + r * width + (rank - block_start);
    args.values[slot] = args.csr_values[e];
    // Below the slot count, which the host checked fits u32.
    args.slots[e] = (u32)slot;
    // The vector's lowest row writes what describes the vector.
    if ((mask & ((1u << r) - 1)) == 0) {
        const u32 v = start + rank;
        args.vec_col[v] = c;
        for (u32 byte = 0; byte < H / 8; ++byte)
            args.vec_mask[(u64)v * (H / 8) + byte] = (unsigned char)(mask >> (8 * byte));
    }
}
