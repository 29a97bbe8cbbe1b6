// TileSpMV (Niu et al., IPDPS'21) on Tiled16: y = alpha*A*x + beta*y. Parameters: TileMatrix<T>,
// TileSpmv<T>, TileCombine<T> (src/tilespmv.rs), TileRule, TileBuild<T> (src/tilespmv/build.rs),
// with SpmvDense<T> (src/operand.rs). The payload of each tile format is drawn in
// sparse-formats/src/tiled16/mod.rs.
//
// A warp walks the tiles of one tile row, or of one segment of a longer tile row, two tiles at a
// time: half-warp `half` takes every other tile, and lane r of a half owns row r of its tile.
// Every tile format is decoded so that a lane visits only entries of its own row, so partial sums
// stay in registers, are added in a fixed order and need no atomics; the two halves of a row are
// added once, when the warp has walked all its tiles. Two tiles in flight per warp, short
// segments, and each lane's loads issued four entries at a time keep the chains of dependent
// loads (metadata, payload, x) few: a tile's latency, not its bandwidth, is what a tile row of
// many sparse tiles waits on.
//
// Per tile, lane c of the half loads x at the tile's column c, and the lanes read it by shuffles:
// the lanes of a half step through their rows together, as many steps as the longest row, so no
// barrier orders the loads of x before those of the payload. The tile metadata of 32 tiles at a
// time is loaded by one lane per tile, coalesced, and broadcast by shuffles. A tile's row starts
// (RowStarts, 16 bytes a tile kept beside the format's arrays) are loaded a pair of tiles ahead,
// so that a CSR or COO row's entries wait on the metadata alone, not on payload bytes as well.
//
// Balancing: tile rows of more than `segment_tiles` tiles (chosen per matrix by the plan) are
// cut into segments. One launch runs a warp per short tile row, writing its rows of y. A tile row
// that a block's warps cover (segments of `segment_tiles` tiles, or a few more on small
// matrices; src/tilespmv.rs, Segments) takes consecutive warps of one block, whose sums are added
// through shared memory in segment order. Longer tile rows take a warp per segment of
// `segment_tiles` tiles, each writing 16 partial row sums, which tile_combine then adds in
// segment order. Every row is written once, its sums added in a fixed order (deterministic, as
// spmv's split rows). Deferred very sparse tiles are a CSR: in small matrices whose deferred rows
// are short, the thread that writes a row adds the row's deferred entries to its tiles' sum (the
// two halves of a tile row's warp take every other entry each); otherwise spmv.cu's scalar or
// vector-split kernels add them afterwards, with beta = 1 (long rows of deferred entries cut into
// segments too).

#define TILE 16
#define WARPS (TILE_BLOCK / 32)
#define TILE_GROUP 4
#define FULL 0xffffffffu

enum TileFormat { CSR = 0, COO = 1, ELL = 2, HYB = 3, DENSE = 4, DENSE_ROW = 5, DENSE_COL = 6 };

__device__ __forceinline__ u32 byte_at(const unsigned char* p) { return __ldg(p); }

// In-tile index k of nibbles packed two per byte, the low half first.
__device__ __forceinline__ u32 nibble(const unsigned char* p, u32 k) { return byte_at(p + k / 2) >> (4 * (k & 1)) & 0xF; }

// A little-endian u16 mask.
__device__ __forceinline__ u32 mask16(const unsigned char* p) { return byte_at(p) | byte_at(p + 1) << 8; }

// Where a lane's row r of a tile lies among the tile's CSR or COO entries (a HYB tile's COO
// part), from the 16 bytes the builder lists per tile (`row_start`): byte r > 0 is row r's first
// entry (the entry count for rows past the tile's height), byte 0 a HYB tile's COO count. They
// are loaded with the tile's metadata, so that a row's entries wait on no payload byte (a CSR
// tile's row starts, a COO tile's binary searches).
struct RowStarts {
    u32 from, next, hyb_count;
};

template <typename T>
__device__ __forceinline__ RowStarts row_starts(const TileMatrix<T>& a, u32 tile, u32 r) {
    const unsigned char* starts = a.row_start + (u64)tile * TILE;
    return RowStarts{r > 0 ? byte_at(starts + r) : 0u, r + 1 < TILE ? byte_at(starts + r + 1) : 0u, byte_at(starts)};
}

// Row r's entries [from, to) of a tile whose CSR or COO entries number `count`.
struct RowSpan {
    u32 from, to;
};

__device__ __forceinline__ RowSpan row_span(const RowStarts& s, u32 r, u32 count) {
    return RowSpan{s.from, r + 1 < TILE ? s.next : count};
}

// One stored tile as a lane decodes it.
template <typename T>
struct Tile {
    const unsigned char* bytes;
    const T* values;
    u32 h, w, nnz;
};

// x at a tile's columns, column c in lane c of the half-warp that decodes the tile, read by
// shuffles: all 16 lanes of the half read it together.
template <typename A>
struct HalfX {
    u32 mask;
    A x;
    __device__ __forceinline__ A operator[](u32 c) const { return __shfl_sync(mask, x, c, TILE); }
};

// One of a lane's items: a value, its in-tile column, and whether it is an entry at all (an ELL
// slot or a Dense cell off its mask is padding, never multiplied).
template <typename A>
struct Item {
    A value;
    u32 col;
    bool on;
};

// A lane's `len` items from `from` of a tile, item(k) each, times x, summed in item order. The
// lanes of the half take as many steps as the longest of them (each step reads x by a shuffle);
// a step past a lane's own items reads its last item again, or item 0 where it has none, and adds
// nothing. The loads of TILE_GROUP items are issued together, so that a lane waits on one chain
// of dependent loads (payload byte, then value) per group instead of one per entry: tiles are
// small and many, and latency, not bandwidth, sets their time.
template <typename A, typename F>
__device__ __forceinline__ A walk(const HalfX<A>& xs, u32 from, u32 len, const F& item) {
    const u32 steps = __reduce_max_sync(xs.mask, len);
    A sum = 0;
    for (u32 k = 0; k < steps; k += TILE_GROUP) {
        Item<A> it[TILE_GROUP];
#pragma unroll
        for (u32 g = 0; g < TILE_GROUP; ++g) it[g] = item(k + g < len ? from + k + g : len > 0 ? from + len - 1 : 0);
#pragma unroll
        for (u32 g = 0; g < TILE_GROUP; ++g) {
            const A x = xs[it[g].col];
            if (k + g < len && it[g].on) sum += it[g].value * x;
        }
    }
    return sum;
}

// Entries `span` of the row-major positions at pos (COO tiles and the COO part of HYB), values at
// v.
template <typename T, typename A>
__device__ __forceinline__ A coo_row(const unsigned char* pos, const T* v, RowSpan span, const HalfX<A>& xs) {
    return walk(xs, span.from, span.to - span.from,
                [&](u32 k) { return Item<A>{to_acc(load(v + k)), byte_at(pos + k) & 0xF, true}; });
}

// The ELL part of width k (ELL and HYB tiles): slot column j holds row r's entry when bit r of its
// mask is set.
template <typename T, typename A>
__device__ __forceinline__ A ell_row(const Tile<T>& t, u32 k, u32 r, const HalfX<A>& xs) {
    const unsigned char* cols = t.bytes + 1 + 2 * k;
    return walk(xs, 0, k, [&](u32 j) {
        const u32 slot = j * t.h + r;
        return Item<A>{to_acc(load(t.values + slot)), nibble(cols, slot), (mask16(t.bytes + 1 + 2 * j) >> r & 1) != 0};
    });
}

// Row r (< t.h) of the tile times x, its CSR or COO entries placed by `starts`. Every lane of the
// half calls it, for the same tile.
template <typename T, typename A>
__device__ __forceinline__ A tile_row(u32 format, const Tile<T>& t, u32 r, const RowStarts& starts, const HalfX<A>& xs) {
    switch (format) {
    case CSR: {
        const RowSpan span = row_span(starts, r, t.nnz);
        return walk(xs, span.from, span.to - span.from,
                    [&](u32 k) { return Item<A>{to_acc(load(t.values + k)), nibble(t.bytes + t.h, k), true}; });
    }
    case COO:
        return coo_row(t.bytes, t.values, row_span(starts, r, t.nnz), xs);
    case ELL:
        return ell_row(t, byte_at(t.bytes), r, xs);
    case HYB: {
        const u32 k = byte_at(t.bytes);
        const unsigned char* pos = t.bytes + 1 + 2 * k + (k * t.h + 1) / 2;
        return ell_row(t, k, r, xs) + coo_row(pos, t.values + k * t.h, row_span(starts, r, starts.hyb_count), xs);
    }
    case DENSE:
        return walk(xs, 0, t.w, [&](u32 c) {
            const u32 slot = c * t.h + r;
            return Item<A>{to_acc(load(t.values + slot)), c, (byte_at(t.bytes + slot / 8) >> (slot % 8) & 1) != 0};
        });
    case DENSE_ROW: {
        const u32 rows = mask16(t.bytes);
        const bool full = rows >> r & 1;
        const T* row = t.values + (full ? __popc(rows & ((1u << r) - 1)) * t.w : 0);
        return walk(xs, 0, full ? t.w : 0, [&](u32 c) { return Item<A>{to_acc(load(row + c)), c, true}; });
    }
    default: {  // DENSE_COL: the j-th stored column is the j-th set bit of the mask
        const u32 cols = mask16(t.bytes);
        return walk(xs, 0, __popc(cols), [&](u32 j) { return Item<A>{to_acc(load(t.values + j * t.h + r)), __fns(cols, 0, j + 1), true}; });
    }
    }
}

// The sum of row (lane % 16) of tile row tr over tiles first..end, complete in lanes 0..15. The
// whole warp calls it.
template <typename T>
__device__ __forceinline__ typename acc_of<T>::type
tile_range(const TileMatrix<T>& a, const SpmvDense<T>& o, u32 tr, u32 first, u32 end) {
    typedef typename acc_of<T>::type A;
    const u32 lane = threadIdx.x % 32, half = lane / TILE;
    const u32 h = min(a.rows - tr * TILE, (u32)TILE);
    // Lanes past the tile row's last row decode that row again and add nothing.
    const u32 r = min(lane % TILE, h - 1);
    A sum = 0;
    for (u32 base = first; base < end; base += 32) {
        const u32 mine = base + lane;
        u32 col = 0, format = 0, byte0 = 0, value0 = 0, nnz = 0;
        if (mine < end) {
            col = load(a.tile_col + mine);
            format = byte_at(a.tile_format + mine);
            byte0 = load(a.byte_ptr + mine);
            value0 = load(a.value_ptr + mine);
            nnz = load(a.tile_nnz + mine + 1) - load(a.tile_nnz + mine);
        }
        const u32 count = min(end - base, 32u);
        // The row starts of the half's next tile, loaded a pair of tiles ahead.
        RowStarts next = row_starts(a, base + min(half, count - 1), r);
        for (u32 i = 0; i < count; i += 2) {
            // The half's tile; past the last one, the second half repeats it and adds nothing.
            const u32 src = min(i + half, count - 1);
            const RowStarts starts = next;
            if (i + 2 < count) next = row_starts(a, base + min(i + 2 + half, count - 1), r);
            const u32 tc = __shfl_sync(FULL, col, src);
            Tile<T> t;
            t.h = h;
            t.w = min(a.cols - tc * TILE, (u32)TILE);
            t.nnz = __shfl_sync(FULL, nnz, src);
            t.bytes = a.bytes + __shfl_sync(FULL, byte0, src);
            t.values = a.values + __shfl_sync(FULL, value0, src);
            const u32 f = __shfl_sync(FULL, format, src);
            HalfX<A> xs;
            xs.mask = 0xFFFFu << (TILE * half);
            xs.x = lane % TILE < t.w ? to_acc(load(o.x + ((u64)tc * TILE + lane % TILE) * o.incx)) : A(0);
            const A row_sum = tile_row(f, t, r, starts, xs);
            if (i + half < count && lane % TILE < h) sum += row_sum;
        }
    }
    return sum + __shfl_down_sync(FULL, sum, TILE);
}

// Row `row`'s deferred entries times x (a.deferred_ptr set): the thread's share, the entries
// part, part + parts, ... of the row, summed in that order. The loads of TILE_GROUP entries are
// issued together, as walk's are.
template <typename T>
__device__ __forceinline__ typename acc_of<T>::type deferred_share(const TileMatrix<T>& a, const SpmvDense<T>& o, u64 row,
                                                                   u32 part, u32 parts) {
    typedef typename acc_of<T>::type A;
    const u32 from = load(a.deferred_ptr + row) + part, to = load(a.deferred_ptr + row + 1);
    A sum = 0;
    for (u32 k = from; k < to; k += parts * TILE_GROUP) {
        u32 col[TILE_GROUP];
        A v[TILE_GROUP];
#pragma unroll
        for (u32 g = 0; g < TILE_GROUP; ++g) {
            const u32 e = k + g * parts < to ? k + g * parts : k;
            col[g] = load(a.deferred_col + e);
            v[g] = to_acc(load(a.deferred_values + e));
        }
#pragma unroll
        for (u32 g = 0; g < TILE_GROUP; ++g)
            if (k + g * parts < to) sum += v[g] * to_acc(load(o.x + (u64)col[g] * o.incx));
    }
    return sum;
}

// The deferred entries of row (lane % 16) of tile row tr, complete in lanes 0..15: the two
// halves take every other entry. 0 where the tile kernels add no deferred entries. The whole
// warp calls it.
template <typename T>
__device__ __forceinline__ typename acc_of<T>::type deferred_rows(const TileMatrix<T>& a, const SpmvDense<T>& o, u32 tr) {
    typedef typename acc_of<T>::type A;
    if (a.deferred_ptr == nullptr) return 0;
    const u32 lane = threadIdx.x % 32;
    const u64 row = (u64)tr * TILE + lane % TILE;
    const A share = row < a.rows ? deferred_share(a, o, row, lane / TILE, 2) : A(0);
    return share + __shfl_down_sync(FULL, share, TILE);
}

// One warp per tile row of at most segment_tiles tiles, writing its rows of y; from the block
// boundary at packed_base, the packed warps: a tile row's segments in consecutive warps of one
// block, whose first warp adds their sums from shared memory in segment order and writes the
// rows; then one warp per segment of the longest tile rows, writing its 16 partial sums.
template <typename T>
__global__ void __launch_bounds__(TILE_BLOCK) tile_spmv(const TileSpmv<T> p) {
    typedef typename acc_of<T>::type A;
    __shared__ A sums[WARPS][TILE];
    const TileMatrix<T>& a = p.a;
    const SpmvDense<T>& o = p.dense;
    const u64 item = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const bool whole_row = item < a.tile_rows;  // a warp for a whole tile row
    // One call of tile_range (inlined, and long) for every kind of warp.
    u64 s = 0;
    u32 tr, first, end;
    if (whole_row) {
        tr = (u32)item;
        first = load(a.tile_ptr + tr);
        end = load(a.tile_ptr + tr + 1);
        if (end - first > p.segment_tiles) return;
    } else {
        if (item < p.packed_base) return;  // whole warps of the last tile-row block
        s = item - p.packed_base;
        if (s >= (u64)p.packed_warps + p.segments) return;  // whole warps leave together
        tr = load(p.segment_row + s);
        first = load(p.segment_first + s);
        end = load(p.segment_end + s);
    }
    const A sum = tile_range(a, o, tr, first, end);
    const u64 row = (u64)tr * TILE + lane;
    if (whole_row) {
        const A total = sum + deferred_rows(a, o, tr);
        if (lane < TILE && row < a.rows) update(o.y + row * o.incy, o.alpha, total, o.beta);
        return;
    }
    if (s >= p.packed_warps) {
        if (lane < TILE) p.partial[(s - p.packed_warps) * TILE + lane] = sum;
        return;
    }
    // Every warp of a packed block gets here (the block holds packed warps only).
    if (lane < TILE) sums[warp][lane] = sum;
    __syncthreads();
    const u32 span = load(p.segment_span + s);
    if (span == 0) return;
    const A rest = deferred_rows(a, o, tr);
    if (lane >= TILE || row >= a.rows) return;
    A total = 0;
    for (u32 w = warp; w < warp + span; ++w) total += sums[w][lane];
    update(o.y + row * o.incy, o.alpha, total + rest, o.beta);
}

// One thread per row of a long tile row: its segments' partial sums added in segment order,
// then its fused deferred entries.
template <typename T>
__global__ void __launch_bounds__(TILE_BLOCK) tile_combine(const TileCombine<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 l = t / TILE;
    const u32 r = t % TILE;
    if (l >= p.long_rows) return;
    const u64 row = (u64)load(p.long_row + l) * TILE + r;
    if (row >= p.a.rows) return;
    typename acc_of<T>::type sum = 0;
    const u32 from = load(p.first_segment + l), to = load(p.first_segment + l + 1);
    for (u32 s = from; s < to; ++s) sum += load(p.partial + (u64)s * TILE + r);
    if (p.a.deferred_ptr != nullptr) sum += deferred_share(p.a, o, row, 0, 1);
    update(o.y + row * o.incy, o.alpha, sum, o.beta);
}

// ---------------------------------------------------------------------------------------------
// CSR -> Tiled16 on the device, the same tiles, formats, payloads and value order as
// sparse-formats' conversion (src/tiled16/convert.rs, select.rs, payload.rs), in two passes of
// one warp per tile row:
// - count (FILL = false): per tile row, its stored tiles and their entries, payload bytes and
//   values; per row, its deferred entries. Scans of these (fs_scan_*) place every tile row.
// - fill (FILL = true): the same walk again, writing level 1, the payloads, the values, the
//   deferred CSR, each CSR entry's slot, and each tile's row starts (RowStarts).
// Lane r < 16 holds row r of the tile row and a cursor into it; the next tile is the smallest
// tile column under the cursors (a warp minimum), and each lane takes its row's entries in it.
// The selection rule is evaluated by every lane alike, from warp reductions of the row lengths
// and column masks, summing in the host's order where floating point is involved. Payload bytes
// are shared by lanes (nibbles, mask bits), so every payload byte is OR-ed into its zeroed
// 32-bit word atomically: the result does not depend on the order of the writes.

// What plan_tile decides for a deferred tile: past every TileFormat.
#define DEFERRED 7u

// This lane's row in a tile: its entries' count and column mask.
struct LaneRow {
    bool has;
    u32 len, mask;
};

// Inclusive sum over the warp's lanes up to this one.
__device__ __forceinline__ u32 warp_inclusive(u32 v) {
    const u32 lane = threadIdx.x % 32;
#pragma unroll
    for (u32 d = 1; d < 32; d *= 2) {
        const u32 o = __shfl_up_sync(FULL, v, d);
        if (lane >= d) v += o;
    }
    return v;
}

// Columns every row of the tile holds entries in (lanes without a row take no part).
__device__ __forceinline__ u32 all_cols(const LaneRow& l) { return __reduce_and_sync(FULL, l.has ? l.mask : 0xFFFFu); }

// Entries of rows longer than k (the COO part of a HYB tile of ELL width k), over the warp.
__device__ __forceinline__ u32 overflow(const LaneRow& l, u32 k) { return __reduce_add_sync(FULL, l.len > k ? l.len - k : 0); }

__device__ __forceinline__ u32 ell_bytes(u32 k, u32 h) { return 1 + 2 * k + (k * h + 1) / 2; }

__device__ __forceinline__ u32 hyb_stored_bytes(const LaneRow& l, u32 k, u32 h, u32 value_bytes) {
    const u32 m = overflow(l, k);
    return ell_bytes(k, h) + m + (k * h + m) * value_bytes;
}

// The ELL width of a HYB tile: from the longest row down, while the stored bytes keep falling.
__device__ __forceinline__ u32 hyb_width(const LaneRow& l, u32 longest, u32 h, u32 value_bytes) {
    u32 best = longest, best_bytes = hyb_stored_bytes(l, longest, h, value_bytes);
    for (u32 k = longest - 1; k >= 1 && k < longest; --k) {
        const u32 bytes = hyb_stored_bytes(l, k, h, value_bytes);
        if (bytes >= best_bytes) break;
        best = k;
        best_bytes = bytes;
    }
    return best;
}

// What the selection decides for one tile, and the tile's payload lengths.
struct TilePlan {
    u32 format, width, bytes, values;
};

template <typename T>
__device__ __forceinline__ TilePlan plan_tile(const TileRule& rule, const LaneRow& l, u32 n, u32 h, u32 w) {
    TilePlan t;
    t.width = 0;
    t.bytes = 0;
    t.values = 0;
    if (n <= rule.deferred_max) {
        t.format = DEFERRED;
        return t;
    }
    const bool rows_ok = __all_sync(FULL, !l.has || l.len == 0 || l.len == w);
    const u32 any_col = __reduce_or_sync(FULL, l.has ? l.mask : 0u);
    const bool cols_ok = any_col == all_cols(l);
    const u32 longest = __reduce_max_sync(FULL, l.len);
    const u32 vb = sizeof(T);
    if (rule.forced != TILE_ADAPTIVE) {
        t.format = (rule.forced == DENSE_ROW && !rows_ok) || (rule.forced == DENSE_COL && !cols_ok) ? CSR : rule.forced;
    } else if (n >= (u32)(rule.dense_min_fill * (double)(h * w))) {
        t.format = DENSE;
    } else if (n <= rule.coo_max_nnz) {
        t.format = COO;
    } else if (rows_ok) {
        t.format = DENSE_ROW;
    } else if (cols_ok) {
        t.format = DENSE_COL;
    } else {
        // The coefficient of variation of the row lengths, summed in row order as the host does.
        const double mean = (double)n / (double)h;
        const double d = l.has ? ((double)l.len - mean) * ((double)l.len - mean) : 0.0;
        double variance = 0.0;
        for (u32 r = 0; r < h; ++r) variance += __shfl_sync(FULL, d, r);
        const double cv = sqrt(variance / (double)h) / mean;
        if (cv <= rule.ell_max_cv) {
            t.format = ELL;
        } else {
            const u32 k = hyb_width(l, longest, h, vb);
            t.format = hyb_stored_bytes(l, k, h, vb) < h + (n + 1) / 2 + n * vb ? HYB : CSR;
        }
    }
    switch (t.format) {
    case CSR: t.bytes = h + (n + 1) / 2; t.values = n; break;
    case COO: t.bytes = n; t.values = n; break;
    case ELL: t.width = longest; t.bytes = ell_bytes(longest, h); t.values = longest * h; break;
    case HYB: {
        t.width = hyb_width(l, longest, h, vb);
        const u32 m = overflow(l, t.width);
        t.bytes = ell_bytes(t.width, h) + m;
        t.values = t.width * h + m;
        break;
    }
    case DENSE: t.bytes = (h * w + 7) / 8; t.values = h * w; break;
    default: t.bytes = 2; t.values = n; break;
    }
    return t;
}

// Byte `at` of the zeroed payload words gets `v` OR-ed in.
__device__ __forceinline__ void or_byte(u32* words, u64 at, u32 v) { atomicOr(words + at / 4, v << (8 * (at % 4))); }
__device__ __forceinline__ void or_nibble(u32* words, u64 base, u32 k, u32 v) { or_byte(words, base + k / 2, v << (4 * (k & 1))); }
__device__ __forceinline__ void or_bit(u32* words, u64 base, u32 bit) { or_byte(words, base + bit / 8, 1u << (bit % 8)); }
__device__ __forceinline__ void or_u16(u32* words, u64 at, u32 v) {
    or_byte(words, at, v & 0xFF);
    or_byte(words, at + 1, v >> 8);
}

template <typename T, bool FILL>
__global__ void __launch_bounds__(TILE_BLOCK) tile_build(const TileBuild<T> p) {
    const u64 item = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (item >= p.tile_rows) return;  // whole warps leave together
    const u32 tr = (u32)item, lane = threadIdx.x % 32;
    const u32 h = min(p.rows - tr * TILE, (u32)TILE);
    const u64 row = (u64)tr * TILE + lane;
    LaneRow l;
    l.has = lane < h;
    u32 cur = l.has ? load(p.row_ptr + row) : 0;
    const u32 end = l.has ? load(p.row_ptr + row + 1) : 0;
    // Running totals of the tile row (count) or positions in the outputs (fill).
    u32 tiles = 0, nnz = 0, bytes = 0, values = 0, deferred = 0;
    const u32 tile_values = FILL ? load(p.value_base + p.tile_rows) : 0;
    if (FILL) {
        tiles = load(p.tile_ptr + tr);
        nnz = load(p.nnz_base + tr);
        bytes = load(p.byte_base + tr);
        values = load(p.value_base + tr);
        deferred = l.has ? load(p.deferred_ptr + row) : 0;
    }
    for (;;) {
        const u32 tc = __reduce_min_sync(FULL, cur < end ? load(p.col_idx + cur) / TILE : 0xFFFFFFFFu);
        if (tc == 0xFFFFFFFFu) break;
        u32 stop = cur;
        l.mask = 0;
        while (stop < end && load(p.col_idx + stop) / TILE == tc) l.mask |= 1u << (load(p.col_idx + stop++) % TILE);
        l.len = stop - cur;
        const u32 n = __reduce_add_sync(FULL, l.len);
        const u32 w = min(p.cols - tc * TILE, (u32)TILE);
        const TilePlan t = plan_tile<T>(p.rule, l, n, h, w);
        if (!FILL) {
            if (t.format == DEFERRED) {
                deferred += l.len;
            } else {
                ++tiles;
                nnz += n;
                bytes += t.bytes;
                values += t.values;
            }
            cur = stop;
            continue;
        }
        if (t.format == DEFERRED) {
            for (u32 e = cur; e < stop; ++e, ++deferred) {
                p.deferred_col[deferred] = load(p.col_idx + e);
                p.values[tile_values + deferred] = load(p.csr_values + e);
                p.slots[e] = tile_values + deferred;
            }
            cur = stop;
            continue;
        }
        if (lane == 0) {
            p.tile_col[tiles] = tc;
            p.tile_format[tiles] = (unsigned char)t.format;
            p.tile_nnz[tiles + 1] = nnz + n;
            p.byte_ptr[tiles + 1] = bytes + t.bytes;
            p.value_ptr[tiles + 1] = values + t.values;
        }
        // Where this lane's row starts in row-major order, and its first entry past the ELL
        // width among the HYB tile's COO entries.
        const u32 before = warp_inclusive(l.len) - l.len;
        const u32 over = l.len > t.width ? l.len - t.width : 0;
        const u32 over_before = warp_inclusive(over) - over;
        const u32 r = lane, full_cols = all_cols(l);
        const u64 b = bytes;
        // Row starts are below 256: a tile of 256 entries has 16 in each row.
        const u32 hyb_count = overflow(l, t.width);
        if (lane < TILE)
            p.row_start[(u64)tiles * TILE + lane] =
                (unsigned char)(lane > 0 ? (t.format == HYB ? over_before : before) : t.format == HYB ? hyb_count : 0u);
        switch (t.format) {
        case CSR:
            if (l.has) or_byte(p.payload, b + r, before);
            break;
        case ELL:
        case HYB:
            if (lane == 0) or_byte(p.payload, b, t.width);
            for (u32 j = 0; j < t.width; ++j) {
                const u32 mask = __ballot_sync(FULL, l.has && l.len > j) & 0xFFFFu;
                if (lane == 0) or_u16(p.payload, b + 1 + 2 * j, mask);
            }
            break;
        case DENSE_ROW: {
            const u32 mask = __ballot_sync(FULL, l.has && l.len == w) & 0xFFFFu;
            if (lane == 0) or_u16(p.payload, b, mask);
            break;
        }
        case DENSE_COL:
            if (lane == 0) or_u16(p.payload, b, full_cols);
            break;
        default:
            break;
        }
        for (u32 i = 0; i < l.len; ++i) {
            const u32 e = cur + i, c = load(p.col_idx + e) % TILE;
            u32 slot;
            switch (t.format) {
            case CSR:
                slot = before + i;
                or_nibble(p.payload, b + h, slot, c);
                break;
            case COO:
                slot = before + i;
                or_byte(p.payload, b + slot, r << 4 | c);
                break;
            case ELL:
            case HYB:
                if (i < t.width) {
                    slot = i * h + r;
                    or_nibble(p.payload, b + 1 + 2 * t.width, slot, c);
                } else {
                    const u32 k = over_before + i - t.width;
                    slot = t.width * h + k;
                    or_byte(p.payload, b + ell_bytes(t.width, h) + k, r << 4 | c);
                }
                break;
            case DENSE:
                slot = c * h + r;
                or_bit(p.payload, b, slot);
                break;
            case DENSE_ROW:
                slot = before + i;
                break;
            default:
                slot = __popc(full_cols & ((1u << c) - 1)) * h + r;
                break;
            }
            p.values[values + slot] = load(p.csr_values + e);
            p.slots[e] = values + slot;
        }
        ++tiles;
        nnz += n;
        bytes += t.bytes;
        values += t.values;
        cur = stop;
    }
    if (!FILL) {
        if (lane == 0) {
            p.row_tiles[tr] = tiles;
            p.row_nnz[tr] = nnz;
            p.row_bytes[tr] = bytes;
            p.row_values[tr] = values;
        }
        if (l.has) p.deferred_len[row] = deferred;
    }
}
