// RoDe (row decomposition, Pang et al., PPoPP'24): CSR SpMM C = alpha*A*B + beta*C and SDDMM
// C = alpha*(X*Y^T) ∘ spy(S) + beta*C on CUDA cores. Parameters: RodeSpmm<T>, RodeScaleRows<T>,
// RodeSddmm<T> with RodeParts (src/rode.rs), SpmmDense<T> and SddmmDense<T> (src/operand.rs);
// RodeCount, RodeScan, RodeFill (src/rode/decomposition.rs). The RODE_* constants come from Rust
// as -D options.
//
// Decomposition, built on the device from row_ptr by the rode_preprocess_* kernels (the host twin
// in rode/decomposition.rs must agree with row_parts below). A row's entries begin..end are
// widened to start at `aligned`, begin rounded down to RODE_ALIGN entries, so that every sparse
// tile starts on a 16-byte boundary and can be copied with cp.async. Then:
// - a row of at least RODE_TILE entries from `aligned` is a block row, cut into segments of
//   seg_len entries (a multiple of RODE_TILE, chosen by the host) from `aligned`; the last
//   segment takes the rest, from RODE_TILE to seg_len + RODE_TILE - 1 entries, so only rows of
//   seg_len + RODE_TILE entries or more are split. The up to RODE_ALIGN - 1 entries before
//   `begin` in the first tile belong to the previous row and those after `end` in the last tile
//   to the next: they are masked, never read from B nor multiplied.
// - a shorter row is a residual: its entries begin..end, fewer than RODE_TILE, read as they are.
//   For SpMM an empty row is a residual too (it writes beta*C); for SDDMM it has no part.
// Every part is listed as (row, lo, hi), the segments first, then the residuals: its entries
// lo..hi of the row (a segment's tiles start at lo rounded down to RODE_ALIGN). A part needs
// nothing else, so its three words are read together, not through row_ptr. For SpMM, each split
// row is listed too, and each of its segments has a workspace slot, the row's in order.
//
// SpMM, block segments: a sub-warp of W lanes per segment (W, a power of two from 4 to 32, is a
// run-time parameter, so one kernel serves every width); lane l owns V columns of a tile of W*V
// columns of C, grid.y striding over the column tiles. The segment's tiles (column indices and
// values) go through two shared-memory buffers per sub-warp, filled by cp.async one tile ahead, so
// the copy of tile t+1 overlaps the work on tile t. Inside a tile, B rows are loaded
// rode_sub<T>::N entries (a sub-block) at a time into a 2-deep register buffer: the loads of
// sub-block s+1 are issued before the FMAs of sub-block s. Only the lanes of one sub-warp
// cooperate, so they synchronise with __syncwarp on their mask, never __syncthreads.
// SpMM, residuals: the same per-tile work over one tile read with plain loads (a residual is
// short and unaligned), into the first of the sub-warp's two buffers.
// Segments and residuals run in one launch, the segments' blocks first in the grid so that the
// long work starts first and the residuals' blocks fill the device behind it. The two parts still
// run concurrently, and a run pays no fork and join of a second stream (about 1.3 us a run on
// an H200). Every sub-warp gets the two tiles a segment needs; the host sizes
// the dynamic shared memory for RODE_BLOCK / W sub-warps (rode.rs).
//
// A part that is its row's only part writes its sums directly (alpha*sum + beta*C). The segments
// of a split row are combined in one of two ways, chosen by the host:
// - atomics (`rode`, f32 and f64; `partials` is null): rode_scale_rows first sets C = beta*C on
//   the listed rows, then every segment atomically adds alpha*sum. The order of the additions
//   varies between runs.
// - partials (`rode-deterministic`, and f16, which has no atomic add of f32 sums into f16
//   storage): every segment stores its sums in its own workspace slot and counts itself in the
//   row's arrival counter (one per split row and column tile); the last to arrive adds the row's
//   slots in order and writes alpha*total + beta*C once, then clears the counter for the next
//   run. The sum does not depend on which segment is last, so results are bit-reproducible, and
//   the combining costs no second launch: on a small matrix a launch and its chain of dependent
//   loads are a large part of the time.
//
// SDDMM: the same decomposition and the same one launch, a sub-warp of W >= rode_sub<T>::N lanes
// per segment or residual and lanes across K (V elements each); the X row's first W*V elements stay
// in registers. Entries are taken a sub-block of S = rode_sub<T>::N at a time, and a sub-block's
// K a chunk of W*V columns at a time, pipelined as in SpMM; each lane's partial dot products of
// the sub-block are summed over the sub-warp by a halving exchange that leaves entry i's total in
// lane i (S - 1 + log2(W/S) shuffles for S entries instead of S*log2(W)), so S lanes write S
// consecutive outputs. Every output belongs to exactly one part: no atomics and no combining.

// Entries per sub-block of the register pipeline: RODE_SUB B rows (8), half as many for f64
// (whose spans take twice the registers), so the 2-deep buffer holds 64 registers of B per lane
// at V = 4.
template <typename T> struct rode_sub { static const int N = RODE_SUB; };
template <> struct rode_sub<double> { static const int N = RODE_SUB / 2; };

// Blocks of RODE_BLOCK threads per SM that the register budgets of rode_spmm and rode_sddmm
// must allow: 4 (at most 128 registers a thread) keeps 16 warps per SM, which the latency of the
// B and Y rows needs; left to itself ptxas takes up to 150 registers at V = 4, a quarter fewer
// warps. f64 SDDMM at V = 4 needs more registers than that without spilling: 3 (at most 168).
template <typename T> struct rode_blocks_per_sm { static const int SPMM = 4, SDDMM = 4; };
template <> struct rode_blocks_per_sm<double> { static const int SPMM = 4, SDDMM = 3; };

// The W lanes of a sub-warp: which sub-warp of the block, which lane, and the mask of its lanes
// for __syncwarp and shuffles (sub-warps of one warp may run different trip counts).
struct Subwarp {
    u32 width, index, lane;
    unsigned mask;
};

__device__ __forceinline__ Subwarp subwarp_of(u32 width) {
    Subwarp w;
    w.width = width;
    w.index = threadIdx.x / width;
    w.lane = threadIdx.x & (width - 1);
    w.mask = width == 32 ? 0xffffffffu : ((1u << width) - 1) << (threadIdx.x % 32 / width * width);
    return w;
}

// Copies the first `count` (<= RODE_TILE) of the RODE_TILE elements at src (RODE_ALIGN-aligned)
// to dst, spread over the sub-warp's lanes, in chunks of 16 bytes or RODE_ALIGN elements,
// whichever is smaller (so a chunk is always aligned: 8 bytes for f16). Nothing past them is read,
// so a tile may end at the end of the arrays. The caller commits the group.
template <typename E>
__device__ __forceinline__ void stage_tile(E* dst, const E* src, u32 count, const Subwarp& w) {
    const int BYTES = sizeof(E) * RODE_ALIGN < 16 ? sizeof(E) * RODE_ALIGN : 16;
    const u32 PER_CHUNK = BYTES / sizeof(E);
    for (u32 first = w.lane * PER_CHUNK; first < count; first += w.width * PER_CHUNK) {
        const u32 n = count - first < PER_CHUNK ? count - first : PER_CHUNK;
        cp_async<BYTES>(dst + first, src + first, n * (u32)sizeof(E));
    }
}

// ---------------------------------------------------------------------------------------------
// Decomposition of one row.

struct RowParts {
    u32 aligned;   // begin rounded down to RODE_ALIGN: where the row's first tile starts
    u32 segments;  // block segments (0 for a residual or an empty row)
    u32 residual;  // 1 for a residual row
};

// empty_residual: an empty row is a residual (SpMM), else it has no part (SDDMM).
__device__ __forceinline__ RowParts row_parts(u32 begin, u32 end, u32 seg_len, u32 empty_residual) {
    RowParts p;
    p.aligned = begin & ~(u32)(RODE_ALIGN - 1);
    const u32 padded = end - p.aligned;
    p.segments = padded >= RODE_TILE ? (padded - RODE_TILE) / seg_len + 1 : 0;
    p.residual = padded < RODE_TILE && (end > begin || empty_residual);
    return p;
}

// ---------------------------------------------------------------------------------------------
// Preprocessing: per-row counts, reduced per block (count), scanned over blocks (scan), then
// recomputed, scanned within the block and written out (fill). Block totals, not per-row counts,
// are all that is stored between the passes. Each kernel is templated over its parameter struct,
// so that a module compiled for another kernel of this file holds none of them.

// What a row adds to each list. `listed`: split rows; `slots`: their workspace slots (one per
// segment). The block totals are arrays of these, passed as u32 words (four per RodeCounts).
struct RodeCounts {
    u32 segments, residuals, listed, slots;
};

__device__ __forceinline__ RodeCounts operator+(RodeCounts a, RodeCounts b) {
    RodeCounts r = {a.segments + b.segments, a.residuals + b.residuals, a.listed + b.listed, a.slots + b.slots};
    return r;
}

__device__ __forceinline__ RodeCounts operator-(RodeCounts a, RodeCounts b) {
    RodeCounts r = {a.segments - b.segments, a.residuals - b.residuals, a.listed - b.listed, a.slots - b.slots};
    return r;
}

__device__ __forceinline__ RodeCounts row_counts(const RowParts& p) {
    RodeCounts c = {p.segments, p.residual, (u32)(p.segments > 1), p.segments > 1 ? p.segments : 0};
    return c;
}

__device__ __forceinline__ RodeCounts shfl_up(RodeCounts v, int delta) {
    RodeCounts r = {__shfl_up_sync(0xffffffffu, v.segments, delta), __shfl_up_sync(0xffffffffu, v.residuals, delta),
                    __shfl_up_sync(0xffffffffu, v.listed, delta), __shfl_up_sync(0xffffffffu, v.slots, delta)};
    return r;
}

// Exclusive prefix sum of v over the block's THREADS threads, and the block's total. Every thread
// of the block must call it (it synchronises the block).
template <int THREADS>
__device__ RodeCounts block_exclusive_scan(RodeCounts v, RodeCounts* total) {
    __shared__ RodeCounts warp_totals[THREADS / 32];
    const RodeCounts zero = {0, 0, 0, 0};
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    RodeCounts inclusive = v;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const RodeCounts up = shfl_up(inclusive, d);
        if (lane >= d) inclusive = inclusive + up;
    }
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        RodeCounts w = lane < THREADS / 32 ? warp_totals[lane] : zero;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const RodeCounts up = shfl_up(w, d);
            if (lane >= d) w = w + up;
        }
        if (lane < THREADS / 32) warp_totals[lane] = w;
    }
    __syncthreads();
    const RodeCounts before = warp == 0 ? zero : warp_totals[warp - 1];
    *total = warp_totals[THREADS / 32 - 1];
    // The next call may overwrite warp_totals.
    __syncthreads();
    return before + inclusive - v;
}

// The counts of this thread's RODE_PRE_ROWS (consecutive) rows.
__device__ __forceinline__ RodeCounts thread_counts(u64 first, u32 rows, const u32* row_ptr, u32 seg_len,
                                                    u32 with_combine) {
    RodeCounts sum = {0, 0, 0, 0};
    for (u64 r = first; r < rows && r < first + RODE_PRE_ROWS; ++r)
        sum = sum + row_counts(row_parts(load(row_ptr + r), load(row_ptr + r + 1), seg_len, with_combine));
    return sum;
}

__device__ __forceinline__ u64 first_row_of_thread() {
    return ((u64)blockIdx.x * RODE_PRE_THREADS + threadIdx.x) * RODE_PRE_ROWS;
}

// block_totals[b] = the counts of the rows of block b. Grid: one block per
// RODE_PRE_THREADS * RODE_PRE_ROWS rows. `with_combine`: the SpMM decomposition (empty rows are
// residuals; split rows are listed), else SDDMM's.
template <typename P>
__global__ void __launch_bounds__(RODE_PRE_THREADS) rode_preprocess_count(const P p) {
    RodeCounts total;
    block_exclusive_scan<RODE_PRE_THREADS>(
        thread_counts(first_row_of_thread(), p.rows, p.row_ptr, p.seg_len, p.with_combine), &total);
    if (threadIdx.x == 0) reinterpret_cast<RodeCounts*>(p.block_totals)[blockIdx.x] = total;
}

// In place: block_totals[b] becomes the counts of all rows before block b, and
// block_totals[blocks] the counts of the whole matrix. Grid: one block of RODE_SCAN_THREADS.
template <typename P>
__global__ void __launch_bounds__(RODE_SCAN_THREADS) rode_preprocess_scan(const P p) {
    RodeCounts* block_totals = reinterpret_cast<RodeCounts*>(p.block_totals);
    const RodeCounts zero = {0, 0, 0, 0};
    RodeCounts carry = zero;
    // Every thread runs every iteration: the scan synchronises the block.
    for (u32 base = 0; base < p.blocks; base += RODE_SCAN_THREADS) {
        const u32 i = base + threadIdx.x;
        const RodeCounts v = i < p.blocks ? block_totals[i] : zero;
        RodeCounts total;
        const RodeCounts before = block_exclusive_scan<RODE_SCAN_THREADS>(v, &total);
        if (i < p.blocks) block_totals[i] = carry + before;
        carry = carry + total;
    }
    if (threadIdx.x == 0) block_totals[p.blocks] = carry;
}

// Writes the lists (the grid and `with_combine` of rode_preprocess_count; `offsets` as
// rode_preprocess_scan left them, the matrix's totals after the blocks'). Without `with_combine`
// (SDDMM) the slot and listed-row pointers are not touched.
template <typename P>
__global__ void __launch_bounds__(RODE_PRE_THREADS) rode_preprocess_fill(const P p) {
    const RodeCounts* offsets = reinterpret_cast<const RodeCounts*>(p.offsets);
    const u64 first = first_row_of_thread();
    // The residuals follow all the segments.
    const u32 residual_base = offsets[gridDim.x].segments;
    RodeCounts total;
    const RodeCounts mine = thread_counts(first, p.rows, p.row_ptr, p.seg_len, p.with_combine);
    RodeCounts at = offsets[blockIdx.x] + block_exclusive_scan<RODE_PRE_THREADS>(mine, &total);
    for (u64 r = first; r < p.rows && r < first + RODE_PRE_ROWS; ++r) {
        const u32 begin = load(p.row_ptr + r), end = load(p.row_ptr + r + 1);
        const RowParts row = row_parts(begin, end, p.seg_len, p.with_combine);
        const RodeCounts c = row_counts(row);
        // A row with many segments is one thread's serial loop: its SpMM costs far more.
        for (u32 j = 0; j < row.segments; ++j) {
            const u32 i = at.segments + j, start = row.aligned + j * p.seg_len;
            p.part_row[i] = (u32)r;
            p.part_lo[i] = j == 0 ? begin : start;
            p.part_hi[i] = j + 1 == row.segments ? end : start + p.seg_len;
            if (p.with_combine) p.seg_slot[i] = c.slots ? at.slots + j : RODE_NONE;
        }
        if (row.residual) {
            const u32 i = residual_base + at.residuals;
            p.part_row[i] = (u32)r;
            p.part_lo[i] = begin;
            p.part_hi[i] = end;
        }
        if (p.with_combine && c.listed) p.listed_row[at.listed] = (u32)r;
        at = at + c;
    }
}

// ---------------------------------------------------------------------------------------------
// Tiles in dynamic shared memory, RODE_BLOCK / W sub-warps each owning RODE_BUFFERS tiles: first
// all the column-index tiles, then (SpMM) all the value tiles. rode.rs sizes it the same way. One
// launch sizes every block alike, so a residual's sub-warp has the two tiles a segment's sub-warp
// needs, and uses the first.

extern __shared__ __align__(16) unsigned char rode_shared[];

__device__ __forceinline__ u32* tile_cols(const Subwarp& w, u32 buffer) {
    return reinterpret_cast<u32*>(rode_shared) + (w.index * RODE_BUFFERS + buffer) * RODE_TILE;
}

template <typename T>
__device__ __forceinline__ T* tile_vals(const Subwarp& w, u32 buffer) {
    const u32 cols_bytes = RODE_BLOCK / w.width * RODE_BUFFERS * RODE_TILE * sizeof(u32);
    return reinterpret_cast<T*>(rode_shared + cols_bytes) + (w.index * RODE_BUFFERS + buffer) * RODE_TILE;
}

// The parts' list (row, lo, hi each), segments first.
struct Parts {
    const u32 *row, *lo, *hi;
};

// The block segment a sub-warp works on: its row, first tile's start and length from there (whole
// tiles but for the last tile of a row's last segment), and its first entry (the row's first for
// its first segment: entries of the first tile before it are masked).
struct Segment {
    u32 row, start, length, begin;
};

__device__ __forceinline__ Segment segment_at(const Parts& parts, u64 s) {
    Segment g;
    g.row = load(parts.row + s);
    g.begin = load(parts.lo + s);
    g.start = g.begin & ~(u32)(RODE_ALIGN - 1);
    g.length = load(parts.hi + s) - g.start;
    return g;
}

__device__ __forceinline__ u32 tile_count(const Segment& g) { return (g.length + RODE_TILE - 1) / RODE_TILE; }

// Entries of tile t of a segment: lo..hi of its RODE_TILE slots belong to the row.
__device__ __forceinline__ u32 tile_lo(const Segment& g, u32 t) {
    const u32 tile_begin = g.start + t * RODE_TILE;
    return g.begin > tile_begin ? g.begin - tile_begin : 0;
}

__device__ __forceinline__ u32 tile_hi(const Segment& g, u32 t) {
    const u32 left = g.length - t * RODE_TILE;
    return left < RODE_TILE ? left : RODE_TILE;
}

// The residual a sub-warp works on: its row, and its entries begin..begin+length (fewer than
// RODE_TILE).
struct Residual {
    u32 row, begin, length;
};

// Residual r, part segments + r of the list.
__device__ __forceinline__ Residual residual_at(const Parts& parts, u32 segments, u64 r) {
    const u64 i = segments + r;
    Residual g;
    g.row = load(parts.row + i);
    g.begin = load(parts.lo + i);
    g.length = load(parts.hi + i) - g.begin;
    return g;
}

// Waits for tile t of a double-buffered segment, having started the copy of tile t+1
// (`stage(t+1)`) into the other buffer first, so that copy overlaps the work on tile t. Ends with
// the sub-warp synchronised: every lane's copies of tile t are visible to all.
template <typename Stage>
__device__ __forceinline__ void next_tile(u32 t, u32 tiles, const Subwarp& w, Stage stage) {
    if (t + 1 < tiles) {
        stage(t + 1);
        cp_async_commit();
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
    __syncwarp(w.mask);
}

// ---------------------------------------------------------------------------------------------
// SpMM.

// Whether split rows of T may be combined with atomic adds into C.
template <typename T> struct atomic_combine { static const bool value = true; };
template <> struct atomic_combine<half_t> { static const bool value = false; };

// The V columns of C (and of B) this lane owns in column tile `tile`: the first one, and how many
// of them are inside C (0 for lanes past N, fewer than V at the end of a row that V does not
// divide). whole_tile: every lane of the sub-warp has all V.
template <int V>
__device__ __forceinline__ u32 lane_columns(u32 tile, const Subwarp& w, u32 n, u64* first) {
    *first = ((u64)tile * w.width + w.lane) * V;
    return *first >= n ? 0 : (n - *first < V ? (u32)(n - *first) : V);
}

template <int V>
__device__ __forceinline__ bool whole_tile(u32 tile, const Subwarp& w, u32 n) {
    return ((u64)tile + 1) * w.width * V <= n;
}

template <typename T, int V>
__device__ __forceinline__ u32 column_tiles(const SpmmDense<T>& o, const Subwarp& w) {
    return (u32)(((u64)o.n + w.width * V - 1) / (w.width * V));
}

// Dense rows (B for SpMM, Y for SDDMM) of the entries e0 .. e0 + SUB - 1 of a tile, this lane's
// `count` elements of each from `lane_base` (the lane's first element of row 0); entries outside
// lo..hi are not read (zeros). WHOLE: every lane's span is whole or past the row's end (`count`
// is V or 0), so each row is one predicated load and the loads of the sub-block stay in flight
// together (prelude.cuh).
template <typename T, int V, int SUB, bool WHOLE>
__device__ __forceinline__ void load_rows(const u32* cols, u32 e0, u32 lo, u32 hi, const T* lane_base, u32 rs,
                                          u32 count, typename acc_of<T>::type (&dst)[SUB][V]) {
#pragma unroll
    for (int i = 0; i < SUB; ++i) {
        const u32 e = e0 + i;
        const bool live = e >= lo && e < hi;
        const T* row = lane_base + (u64)(live ? cols[e] : 0) * rs;
        if constexpr (WHOLE) load_whole<T, V>(row, live && count != 0, dst[i]);
        else load_first<T, V>(row, live ? count : 0, dst[i]);
    }
}

// sum[t] += value(e) * B row of e, over the entries e0 .. e0 + SUB - 1 inside lo..hi. Masked
// entries contribute 0*0: their B values were never read and their values (another row's, or
// never copied) are not used, so neither can carry an Inf or NaN in.
template <typename T, int V, int SUB>
__device__ __forceinline__ void fma_b_rows(const T* vals, u32 e0, u32 lo, u32 hi,
                                           const typename acc_of<T>::type (&rows)[SUB][V],
                                           typename acc_of<T>::type (&sum)[V]) {
    typedef typename acc_of<T>::type A;
#pragma unroll
    for (int i = 0; i < SUB; ++i) {
        const u32 e = e0 + i;
        const A a = e >= lo && e < hi ? to_acc(vals[e]) : A(0);
#pragma unroll
        for (int t = 0; t < V; ++t) sum[t] += a * rows[i][t];
    }
}

// sum[t] += value(e) * B[col(e), first + t] over the entries lo <= e < hi of a tile in shared
// memory, with the sub-block register pipeline (two buffers, used in turn, so each step's buffer
// is known at compile time). `b_lane` points at B[0, first].
template <typename T, int V, bool WHOLE>
__device__ __forceinline__ void spmm_tile_of(const u32* cols, const T* vals, u32 lo, u32 hi, const T* b_lane, u32 b_rs,
                                          u32 count, typename acc_of<T>::type (&sum)[V]) {
    typedef typename acc_of<T>::type A;
    const int SUB = rode_sub<T>::N;
    const u32 STEPS = RODE_TILE / SUB;  // even
    A even[SUB][V], odd[SUB][V];
    load_rows<T, V, SUB, WHOLE>(cols, 0, lo, hi, b_lane, b_rs, count, even);
#pragma unroll 1
    for (u32 s = 0; s < STEPS && s * SUB < hi; s += 2) {
        load_rows<T, V, SUB, WHOLE>(cols, (s + 1) * SUB, lo, hi, b_lane, b_rs, count, odd);
        fma_b_rows<T, V, SUB>(vals, s * SUB, lo, hi, even, sum);
        if ((s + 1) * SUB >= hi) break;
        if (s + 2 < STEPS) load_rows<T, V, SUB, WHOLE>(cols, (s + 2) * SUB, lo, hi, b_lane, b_rs, count, even);
        fma_b_rows<T, V, SUB>(vals, (s + 1) * SUB, lo, hi, odd, sum);
    }
}

// spmm_tile over a column tile whose spans are all whole (all but a row's last tile when V does
// not divide N, a condition uniform over the sub-warp: every lane's `count` is V), else with the
// partial spans read element by element.
template <typename T, int V>
__device__ __forceinline__ void spmm_tile(const u32* cols, const T* vals, u32 lo, u32 hi, const T* b_lane, u32 b_rs,
                                          bool whole, u32 count, typename acc_of<T>::type (&sum)[V]) {
    if (whole) spmm_tile_of<T, V, true>(cols, vals, lo, hi, b_lane, b_rs, V, sum);
    else spmm_tile_of<T, V, false>(cols, vals, lo, hi, b_lane, b_rs, count, sum);
}

// C = alpha*sum + beta*C on this lane's columns of row `row`: what the only part of a row writes.
template <typename T, int V>
__device__ __forceinline__ void write_row(const SpmmDense<T>& o, u64 row, u64 first, u32 count,
                                          const typename acc_of<T>::type (&sum)[V]) {
    if (count == 0) return;
    update_span<T, V>(o.c + row * o.c_rs + first * o.c_cs, o.c_cs, o.c_cs == 1 && o.c_rs % V == 0, count, o.alpha,
                      sum, o.beta);
}

// How the segments of split rows reach C is a Combining<T> (see the header): `partials` is null
// for atomics, else the workspace of one slot of N sums per segment, and `arrivals` the counters,
// one per slot and column tile (a row uses its first slot's). The last segment finds its row's
// slots from row_ptr.

// The row of a segment combined through partials, its first and last entry; read when the
// segment starts, as predicated loads (zeros for other segments), so they overlap its work.
struct SplitRow {
    u32 begin, end;
};

template <typename T>
__device__ __forceinline__ SplitRow split_row(const Combining<T>& k, const Segment& g, u32 slot) {
    const bool combined = slot != RODE_NONE && k.partials != nullptr;
    SplitRow r = {0, 0};
    ld_nc_pred(r.begin, k.row_ptr + g.row, combined);
    ld_nc_pred(r.end, k.row_ptr + g.row + 1, combined);
    return r;
}

// A split row's segment combined through partials: its sums go to its slot, then the last of
// the row's segments to arrive (for this column tile) adds the row's slots in order and writes
// C. The sub-warp stays together throughout (the arrival is counted once, by lane 0).
template <typename T, int V>
__device__ __forceinline__ void combine_partials(const SpmmDense<T>& o, const Combining<T>& k, const Subwarp& w,
                                                 const Segment& g, SplitRow split, u32 slot, u32 col_tile,
                                                 u32 col_tiles, u64 first, u32 count,
                                                 const typename acc_of<T>::type (&sum)[V]) {
    typedef typename acc_of<T>::type A;
    A* own = k.partials + (u64)slot * o.n + first;
#pragma unroll
    for (int t = 0; t < V; ++t)
        if (t < (int)count) own[t] = sum[t];
    // Every lane's sums are visible on the device before the segment counts as arrived.
    __threadfence();
    __syncwarp(w.mask);
    const RowParts row = row_parts(split.begin, split.end, k.seg_len, 1);
    const u32 first_slot = slot - (g.start - row.aligned) / k.seg_len;
    u32* arrived = k.arrivals + (u64)first_slot * col_tiles + col_tile;
    u32 before = 0;
    if (w.lane == 0) before = atomicAdd(arrived, 1u);
    before = __shfl_sync(w.mask, before, 0, w.width);
    if (before + 1 < row.segments) return;
    // The other segments' sums, stored before they arrived, are visible after this fence; they
    // are read from L2 (__ldcg), never from a stale L1 line.
    __threadfence();
    A total[V];
#pragma unroll
    for (int t = 0; t < V; ++t) total[t] = 0;
    for (u32 q = 0; q < row.segments; ++q) {
        const A* p = k.partials + ((u64)first_slot + q) * o.n + first;
#pragma unroll
        for (int t = 0; t < V; ++t)
            if (t < (int)count) total[t] += __ldcg(p + t);
    }
    write_row<T, V>(o, g.row, first, count, total);
    // Every segment of the row has arrived for this tile: the next run starts from zero.
    if (w.lane == 0) *arrived = 0;
}

// One segment's sums of this lane's columns: written as the row's when it is the only segment
// (slot == RODE_NONE), else added into C atomically (null `partials`) or combined through its
// slot.
template <typename T, int V>
__device__ __forceinline__ void write_segment(const SpmmDense<T>& o, const Combining<T>& k, const Subwarp& w,
                                              const Segment& g, SplitRow split, u32 slot, u32 col_tile,
                                              u32 col_tiles, u64 first, u32 count,
                                              const typename acc_of<T>::type (&sum)[V]) {
    if (slot == RODE_NONE) return write_row<T, V>(o, g.row, first, count, sum);
    if constexpr (atomic_combine<T>::value) {
        if (k.partials == nullptr) {
            T* out = o.c + (u64)g.row * o.c_rs + first * o.c_cs;
#pragma unroll
            for (int t = 0; t < V; ++t)
                if (t < (int)count) atomicAdd(out + (u64)t * o.c_cs, o.alpha * sum[t]);
            return;
        }
    }
    combine_partials<T, V>(o, k, w, g, split, slot, col_tile, col_tiles, first, count, sum);
}

// One sub-warp per block segment, RODE_BLOCK / W segments for the block `cta` of the parts' grid;
// grid.y strides over the column tiles of W*V columns. Both tiles of the sub-warp's shared memory.
template <typename T, int V>
__device__ void rode_spmm_block(u32 cta, u32 lanes, u32 segments, const Parts& parts, const u32* seg_slot,
                                const u32* col_idx, const T* values, const Combining<T>& k, const SpmmDense<T>& o) {
    typedef typename acc_of<T>::type A;
    const Subwarp w = subwarp_of(lanes);
    const u64 s = (u64)cta * (RODE_BLOCK / lanes) + w.index;
    // The whole sub-warp leaves together; no other sub-warp waits for it.
    if (s >= segments) return;
    const Segment g = segment_at(parts, s);
    const u32 tiles = tile_count(g), slot = load(seg_slot + s);
    const SplitRow split = split_row(k, g, slot);
    const u32 col_tiles = column_tiles<T, V>(o, w);
    auto stage = [&](u32 t) {
        const u32 at = g.start + t * RODE_TILE, count = tile_hi(g, t);
        stage_tile<u32>(tile_cols(w, t & 1), col_idx + at, count, w);
        stage_tile<T>(tile_vals<T>(w, t & 1), values + at, count, w);
    };
    for (u32 col_tile = blockIdx.y; col_tile < col_tiles; col_tile += gridDim.y) {
        u64 first;
        const u32 count = lane_columns<V>(col_tile, w, o.n, &first);
        A sum[V];
#pragma unroll
        for (int t = 0; t < V; ++t) sum[t] = 0;
        stage(0);
        cp_async_commit();
        for (u32 t = 0; t < tiles; ++t) {
            next_tile(t, tiles, w, stage);
            spmm_tile<T, V>(tile_cols(w, t & 1), tile_vals<T>(w, t & 1), tile_lo(g, t), tile_hi(g, t),
                            o.b + first * o.b_cs, o.b_rs, whole_tile<V>(col_tile, w, o.n), count, sum);
            // Every lane is done reading this buffer before the next step refills it.
            __syncwarp(w.mask);
        }
        write_segment<T, V>(o, k, w, g, split, slot, col_tile, col_tiles, first, count, sum);
    }
}

// One sub-warp per residual, the only part of its row (an empty row's gets beta*C), as
// rode_spmm_block over the residuals; the first tile of the sub-warp's shared memory.
template <typename T, int V>
__device__ void rode_spmm_residual(u32 cta, u32 lanes, u32 segments, u32 residuals, const Parts& parts,
                                   const u32* col_idx, const T* values, const SpmmDense<T>& o) {
    typedef typename acc_of<T>::type A;
    const Subwarp w = subwarp_of(lanes);
    const u64 r = (u64)cta * (RODE_BLOCK / lanes) + w.index;
    // The whole sub-warp leaves together; no other sub-warp waits for it.
    if (r >= residuals) return;
    const Residual g = residual_at(parts, segments, r);
    u32* cols = tile_cols(w, 0);
    T* vals = tile_vals<T>(w, 0);
    for (u32 e = w.lane; e < g.length; e += lanes) {
        cols[e] = load(col_idx + g.begin + e);
        vals[e] = load(values + g.begin + e);
    }
    __syncwarp(w.mask);
    for (u32 col_tile = blockIdx.y; col_tile < column_tiles<T, V>(o, w); col_tile += gridDim.y) {
        u64 first;
        const u32 count = lane_columns<V>(col_tile, w, o.n, &first);
        A sum[V];
#pragma unroll
        for (int t = 0; t < V; ++t) sum[t] = 0;
        spmm_tile<T, V>(cols, vals, 0, g.length, o.b + first * o.b_cs, o.b_rs, whole_tile<V>(col_tile, w, o.n), count,
                        sum);
        write_row<T, V>(o, g.row, first, count, sum);
    }
}

// C = beta*C on the listed (split) rows (zeros when beta == 0, C not read), before atomic
// segments add into them (the types combined by atomics: f32, f64). Grid: x covers the N
// columns, RODE_BLOCK a block, y strides over the listed rows.
template <typename T>
__global__ void __launch_bounds__(RODE_BLOCK) rode_scale_rows(const RodeScaleRows<T> p) {
    typedef typename acc_of<T>::type A;
    const u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const SpmmDense<T>& o = p.dense;
    if (j >= o.n) return;
    for (u64 i = blockIdx.y; i < p.listed; i += gridDim.y)
        update(o.c + (u64)load(p.listed_row + i) * o.c_rs + j * o.c_cs, A(0), A(0), o.beta);
}

// ---------------------------------------------------------------------------------------------
// SDDMM.

// Sums v[i] over the sub-warp's lanes for each i < S (S <= W), leaving entry (lane % S)'s total
// in the lane. At offset o (S/2 .. 1) a lane keeps the half of its values whose index has bit o
// equal to its lane's bit o, adding the partner's copy of that half; after log2(S) steps each
// group of S lanes has summed each entry once, and a butterfly over the offsets S .. W/2 adds the
// groups.
template <int S, typename A>
__device__ __forceinline__ A scatter_sum(const Subwarp& w, A (&v)[S]) {
#pragma unroll
    for (int o = S / 2; o > 0; o /= 2) {
        const bool upper = w.lane & o;
#pragma unroll
        for (int i = 0; i < o; ++i) {
            const A give = upper ? v[i] : v[i + o];
            const A keep = upper ? v[i + o] : v[i];
            v[i] = keep + __shfl_xor_sync(w.mask, give, o, w.width);
        }
    }
    A total = v[0];
    for (u32 o = S; o < w.width; o *= 2) total += __shfl_xor_sync(w.mask, total, o, w.width);
    return total;
}

// How many of this lane's V elements at offset kk of K exist: V, fewer at the end of K.
template <int V>
__device__ __forceinline__ u32 k_count(u64 kk, u32 k) {
    return kk >= k ? 0 : (k - kk < V ? (u32)(k - kk) : V);
}

// Where a step of sddmm_tile is: its sub-block of S entries and its chunk of W*V columns of K,
// the chunks of a sub-block taken in turn. CHUNKED: K spans more than one chunk; else every step
// is chunk 0, known at compile time.
template <bool CHUNKED>
struct SddmmStep {
    u32 sub, chunk;
    __device__ __forceinline__ void advance(u32 chunks) {
        if (!CHUNKED || ++chunk == chunks) {
            chunk = 0;
            ++sub;
        }
    }
};

// Adds this lane's share of one step to the S partial dot products: X's span of the step's chunk
// (the first chunk's from registers, a later one's read here, from L1) times the Y rows the
// pipeline loaded. At the sub-block's last chunk the products are summed over the sub-warp and
// C = alpha*dot [* S value] + beta*C written by lanes 0 .. S-1 for the entries inside lo..hi;
// the products start again from zero.
template <typename T, int V, int S, bool CHUNKED>
__device__ __forceinline__ void sum_step(const RodeSddmm<T>& p, const Subwarp& w, SddmmStep<CHUNKED> at, u32 chunks,
                                         u32 lo, u32 hi, u64 tile_begin, const T* x_lane, u64 first,
                                         const typename acc_of<T>::type (&x_first)[V],
                                         const typename acc_of<T>::type (&y)[S][V],
                                         typename acc_of<T>::type (&dot)[S]) {
    typedef typename acc_of<T>::type A;
    const SddmmDense<T>& g = p.dense;
    const bool last = !CHUNKED || at.chunk + 1 == chunks;
    const u32 mine = at.sub * S + w.lane;
    const bool writes = last && w.lane < S && mine >= lo && mine < hi;
    // The S value of the entry this lane writes, in flight while the dot products are formed.
    A s_value[1];
    load_whole<T, 1>(p.s_values + tile_begin + mine, writes && p.scale_by_values, s_value);
    A x[V];
    if (!CHUNKED || at.chunk == 0) {
#pragma unroll
        for (int t = 0; t < V; ++t) x[t] = x_first[t];
    } else {
        const u64 skip = (u64)at.chunk * w.width * V;
        load_first<T, V>(x_lane + skip * g.x_cs, k_count<V>(first + skip, g.k), x);
    }
#pragma unroll
    for (int i = 0; i < S; ++i)
#pragma unroll
        for (int t = 0; t < V; ++t) dot[i] += x[t] * y[i][t];
    if (!last) return;
    const A total = scatter_sum<S>(w, dot);
    if (writes)
        update(g.c + (tile_begin + mine) * g.c_inc, g.alpha, p.scale_by_values ? total * s_value[0] : total, g.beta);
#pragma unroll
    for (int i = 0; i < S; ++i) dot[i] = 0;
}

// C for the entries lo <= e < hi of a tile of column indices in shared memory (entry e is entry
// tile_begin + e of S), with the sub-block register pipeline of spmm_tile over Y rows, K in
// `chunks` chunks of W*V columns (1 unless CHUNKED), a step each: past the first chunk too, every
// step's Y rows are loaded while the step before is summed. WHOLE: V divides K, so every lane's
// span of a Y row is whole or past K.
template <typename T, int V, bool WHOLE, bool CHUNKED>
__device__ __forceinline__ void sddmm_tile(const RodeSddmm<T>& p, const Subwarp& w, const u32* cols, u32 lo, u32 hi,
                                           u64 tile_begin, const T* x_row,
                                           const typename acc_of<T>::type (&x_first)[V], u32 chunks) {
    typedef typename acc_of<T>::type A;
    const SddmmDense<T>& g = p.dense;
    const int S = rode_sub<T>::N;
    const u64 first = (u64)w.lane * V, span = (u64)w.width * V;
    const u32 steps = (hi + S - 1) / S * chunks;
    const T* x_lane = x_row + first * g.x_cs;
    const T* y_lane = g.y + first * g.y_cs;
    SddmmStep<CHUNKED> loading = {0, 0}, summing = {0, 0};
    auto load = [&](A (&dst)[S][V]) {
        const u64 skip = loading.chunk * span;
        load_rows<T, V, S, WHOLE>(cols, loading.sub * S, lo, hi, y_lane + skip * g.y_cs, g.y_rs,
                                  k_count<V>(first + skip, g.k), dst);
        loading.advance(chunks);
    };
    auto sum = [&](const A (&y)[S][V], A (&dot)[S]) {
        sum_step<T, V, S, CHUNKED>(p, w, summing, chunks, lo, hi, tile_begin, x_lane, first, x_first, y, dot);
        summing.advance(chunks);
    };
    A even[S][V], odd[S][V], dot[S];
#pragma unroll
    for (int i = 0; i < S; ++i) dot[i] = 0;
    load(even);
#pragma unroll 1
    for (u32 i = 0; i < steps; i += 2) {
        if (i + 1 < steps) load(odd);
        sum(even, dot);
        if (i + 1 >= steps) break;
        if (i + 2 < steps) load(even);
        sum(odd, dot);
    }
}

// Chunks of W*V columns of K: 1 unless CHUNKED (the host's choice where K spans more).
template <typename T, int V, bool CHUNKED>
__device__ __forceinline__ u32 k_chunks(const SddmmDense<T>& g, const Subwarp& w) {
    const u64 span = (u64)w.width * V;
    return CHUNKED ? (u32)((g.k + span - 1) / span) : 1;
}

// This lane's V elements of the first W*V of X row `row`; returns the row.
template <typename T, int V>
__device__ __forceinline__ const T* load_x_row(const SddmmDense<T>& g, const Subwarp& w, u32 row,
                                               typename acc_of<T>::type (&x_first)[V]) {
    const T* x_row = g.x + (u64)row * g.x_rs;
    const u64 first = (u64)w.lane * V;
    load_first<T, V>(x_row + first * g.x_cs, k_count<V>(first, g.k), x_first);
    return x_row;
}

// One sub-warp per block segment, RODE_BLOCK / W segments for the block `cta` of the parts' grid,
// its column-index tiles double-buffered as in rode_spmm_block.
template <typename T, int V, bool WHOLE, bool CHUNKED>
__device__ void rode_sddmm_block(u32 cta, u32 lanes, u32 segments, const Parts& parts, const RodeSddmm<T>& p) {
    typedef typename acc_of<T>::type A;
    const Subwarp w = subwarp_of(lanes);
    const u64 s = (u64)cta * (RODE_BLOCK / lanes) + w.index;
    // The whole sub-warp leaves together: the reductions' shuffles involve only its lanes.
    if (s >= segments) return;
    const Segment seg = segment_at(parts, s);
    const u32 tiles = tile_count(seg);
    A x_first[V];
    const T* x_row = load_x_row<T, V>(p.dense, w, seg.row, x_first);
    const u32 chunks = k_chunks<T, V, CHUNKED>(p.dense, w);
    auto stage = [&](u32 t) {
        stage_tile<u32>(tile_cols(w, t & 1), p.col_idx + seg.start + t * RODE_TILE, tile_hi(seg, t), w);
    };
    stage(0);
    cp_async_commit();
    for (u32 t = 0; t < tiles; ++t) {
        next_tile(t, tiles, w, stage);
        sddmm_tile<T, V, WHOLE, CHUNKED>(p, w, tile_cols(w, t & 1), tile_lo(seg, t), tile_hi(seg, t),
                                         seg.start + t * RODE_TILE, x_row, x_first, chunks);
        __syncwarp(w.mask);
    }
}

// One sub-warp per residual, as rode_sddmm_block over the residuals; the first tile of the
// sub-warp's shared memory.
template <typename T, int V, bool WHOLE, bool CHUNKED>
__device__ void rode_sddmm_residual(u32 cta, u32 lanes, u32 segments, u32 residuals, const Parts& parts,
                                    const RodeSddmm<T>& p) {
    typedef typename acc_of<T>::type A;
    const Subwarp w = subwarp_of(lanes);
    const u64 r = (u64)cta * (RODE_BLOCK / lanes) + w.index;
    // The whole sub-warp leaves together: the reductions' shuffles involve only its lanes.
    if (r >= residuals) return;
    const Residual res = residual_at(parts, segments, r);
    // X before the column indices: the two loads overlap.
    A x_first[V];
    const T* x_row = load_x_row<T, V>(p.dense, w, res.row, x_first);
    u32* cols = tile_cols(w, 0);
    for (u32 e = w.lane; e < res.length; e += lanes) cols[e] = load(p.col_idx + res.begin + e);
    __syncwarp(w.mask);
    sddmm_tile<T, V, WHOLE, CHUNKED>(p, w, cols, 0, res.length, res.begin, x_row, x_first,
                                     k_chunks<T, V, CHUNKED>(p.dense, w));
}

// ---------------------------------------------------------------------------------------------
// Entry points: rode_spmm<T, V> and rode_sddmm<T, V, WHOLE, CHUNKED> (the sub-warp width W is
// `lanes`; rode.rs picks WHOLE where V divides K and CHUNKED where K spans more than W*V columns:
// kernels that each compile in a fraction of the time of one holding every path, and a one-chunk
// kernel whose registers are not sized for the chunked path), and rode_scale_rows<T> above.
//
// The parts' grid (RodeParts): blocks 0 .. block_ctas - 1 take the segments, RODE_BLOCK / W each, and the
// blocks after them the residuals. A block is all segments or all residuals, so the branch is
// uniform over it.

template <typename T, int V>
__global__ void __launch_bounds__(RODE_BLOCK, rode_blocks_per_sm<T>::SPMM) rode_spmm(const RodeSpmm<T> p) {
    const RodeParts& g = p.parts;
    const Parts parts = {g.part_row, g.part_lo, g.part_hi};
    if (blockIdx.x < g.block_ctas)
        rode_spmm_block<T, V>(blockIdx.x, g.lanes, g.segments, parts, p.seg_slot, p.col_idx, p.values, p.combining,
                              p.dense);
    else
        rode_spmm_residual<T, V>(blockIdx.x - g.block_ctas, g.lanes, g.segments, g.residuals, parts, p.col_idx,
                                 p.values, p.dense);
}

template <typename T, int V, bool WHOLE, bool CHUNKED>
__global__ void __launch_bounds__(RODE_BLOCK, rode_blocks_per_sm<T>::SDDMM) rode_sddmm(const RodeSddmm<T> p) {
    const RodeParts& g = p.parts;
    const Parts parts = {g.part_row, g.part_lo, g.part_hi};
    if (blockIdx.x < g.block_ctas)
        rode_sddmm_block<T, V, WHOLE, CHUNKED>(blockIdx.x, g.lanes, g.segments, parts, p);
    else
        rode_sddmm_residual<T, V, WHOLE, CHUNKED>(blockIdx.x - g.block_ctas, g.lanes, g.segments, g.residuals, parts,
                                                  p);
}
