// TileSpMV (Niu et al., IPDPS'21) on Tiled16: y = alpha*A*x + beta*y. Parameters: TileMatrix<T>,
// TileSpmv<T>, TileCombine<T> (src/tilespmv.rs), with SpmvDense<T> (src/operand.rs). The payload of
// each tile format is drawn in sparse-formats/src/tiled16/mod.rs.
//
// A warp walks the tiles of one tile row (or of one segment of a long tile row) in tile order.
// Lanes r and r + 16 own row r of the tile row: every tile format is decoded so that a lane visits
// only entries of its own row, the two lanes of a row taking alternate entries (CSR, COO), slot
// columns (ELL, HYB) or columns (Dense, DenseRow, DenseCol). Partial sums therefore stay in
// registers, are added in a fixed order and need no atomics; the two lanes of a row are added
// once, when the warp has walked all its tiles. A tile's format is the same for every lane, so the
// format switch does not diverge.
//
// Per tile, the 16 values of x the tile reads are staged once in the warp's shared memory (lanes
// walk rows of different lengths, so shuffles would diverge); the tile metadata of 32 tiles at a
// time is loaded by one lane per tile, coalesced, and broadcast by shuffles.
//
// Balancing: tile rows of more than `long_tiles` tiles are skipped by the row kernel; one warp per
// segment of TILE_SEGMENT tiles writes 16 partial row sums, and tile_combine adds each long tile
// row's segments in segment order and writes the rows once (deterministic, as spmv's split rows).
// Deferred very sparse tiles are a CSR added afterwards by spmv_csr_vector with beta = 1.

#define TILE 16
#define WARPS (TILE_BLOCK / 32)
#define FULL 0xffffffffu

enum TileFormat { CSR = 0, COO = 1, ELL = 2, HYB = 3, DENSE = 4, DENSE_ROW = 5, DENSE_COL = 6 };

__device__ __forceinline__ u32 byte_at(const unsigned char* p) { return __ldg(p); }

// In-tile index k of nibbles packed two per byte, the low half first.
__device__ __forceinline__ u32 nibble(const unsigned char* p, u32 k) { return byte_at(p + k / 2) >> (4 * (k & 1)) & 0xF; }

// A little-endian u16 mask.
__device__ __forceinline__ u32 mask16(const unsigned char* p) { return byte_at(p) | byte_at(p + 1) << 8; }

// The first of the n row-major positions (row << 4 | col) at or after `key`.
__device__ __forceinline__ u32 lower_bound(const unsigned char* pos, u32 n, u32 key) {
    u32 lo = 0, hi = n;
    while (lo < hi) {
        const u32 mid = (lo + hi) / 2;
        if (byte_at(pos + mid) < key) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// One stored tile as a lane decodes it.
template <typename T>
struct Tile {
    const unsigned char* bytes;
    const T* values;
    u32 h, w, nnz;
};

// Entries of row r among the n row-major positions at pos (COO tiles and the COO part of HYB),
// values at v: lane half `half` takes every other one.
template <typename T, typename A>
__device__ __forceinline__ A coo_row(const unsigned char* pos, const T* v, u32 n, u32 r, u32 half, const A* xs) {
    const u32 from = lower_bound(pos, n, r << 4), to = lower_bound(pos, n, (r + 1) << 4);
    A sum = 0;
    for (u32 k = from + half; k < to; k += 2) sum += to_acc(load(v + k)) * xs[byte_at(pos + k) & 0xF];
    return sum;
}

// The ELL part of width k (ELL and HYB tiles): slot column j holds row r's entry when bit r of its
// mask is set; lanes of half `half` take the slot columns of that parity.
template <typename T, typename A>
__device__ __forceinline__ A ell_row(const Tile<T>& t, u32 k, u32 r, u32 half, const A* xs) {
    const unsigned char* cols = t.bytes + 1 + 2 * k;
    A sum = 0;
    for (u32 j = half; j < k; j += 2) {
        const u32 slot = j * t.h + r;
        if (mask16(t.bytes + 1 + 2 * j) >> r & 1) sum += to_acc(load(t.values + slot)) * xs[nibble(cols, slot)];
    }
    return sum;
}

// This lane's share of row r (< t.h) of the tile.
template <typename T, typename A>
__device__ __forceinline__ A tile_row(u32 format, const Tile<T>& t, u32 r, u32 half, const A* xs) {
    A sum = 0;
    switch (format) {
    case CSR: {
        const u32 from = byte_at(t.bytes + r), to = r + 1 < t.h ? byte_at(t.bytes + r + 1) : t.nnz;
        for (u32 k = from + half; k < to; k += 2) sum += to_acc(load(t.values + k)) * xs[nibble(t.bytes + t.h, k)];
        break;
    }
    case COO:
        sum = coo_row(t.bytes, t.values, t.nnz, r, half, xs);
        break;
    case ELL:
        sum = ell_row(t, byte_at(t.bytes), r, half, xs);
        break;
    case HYB: {
        const u32 k = byte_at(t.bytes);
        u32 in_ell = 0;
        for (u32 j = 0; j < k; ++j) in_ell += __popc(mask16(t.bytes + 1 + 2 * j));
        sum = ell_row(t, k, r, half, xs);
        const unsigned char* pos = t.bytes + 1 + 2 * k + (k * t.h + 1) / 2;
        sum += coo_row(pos, t.values + k * t.h, t.nnz - in_ell, r, half, xs);
        break;
    }
    case DENSE:
        for (u32 c = half; c < t.w; c += 2) {
            const u32 slot = c * t.h + r;
            if (byte_at(t.bytes + slot / 8) >> (slot % 8) & 1) sum += to_acc(load(t.values + slot)) * xs[c];
        }
        break;
    case DENSE_ROW: {
        const u32 rows = mask16(t.bytes);
        if (rows >> r & 1) {
            const T* row = t.values + __popc(rows & ((1u << r) - 1)) * t.w;
            for (u32 c = half; c < t.w; c += 2) sum += to_acc(load(row + c)) * xs[c];
        }
        break;
    }
    case DENSE_COL: {
        u32 j = 0;
        for (u32 cols = mask16(t.bytes); cols != 0; cols &= cols - 1, ++j)
            if ((j & 1) == half) sum += to_acc(load(t.values + j * t.h + r)) * xs[__ffs(cols) - 1];
        break;
    }
    }
    return sum;
}

// The sum of row (lane % 16) of tile row tr over tiles first..end, complete in lanes 0..15. The
// whole warp calls it.
template <typename T>
__device__ __forceinline__ typename acc_of<T>::type
tile_range(const TileMatrix<T>& a, const SpmvDense<T>& o, u32 tr, u32 first, u32 end, typename acc_of<T>::type* xs) {
    typedef typename acc_of<T>::type A;
    const u32 lane = threadIdx.x % 32, r = lane % TILE, half = lane / TILE;
    const u32 h = min(a.rows - tr * TILE, (u32)TILE);
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
        for (u32 i = 0; i < count; ++i) {
            const u32 tc = __shfl_sync(FULL, col, i);
            Tile<T> t;
            t.h = h;
            t.w = min(a.cols - tc * TILE, (u32)TILE);
            t.nnz = __shfl_sync(FULL, nnz, i);
            t.bytes = a.bytes + __shfl_sync(FULL, byte0, i);
            t.values = a.values + __shfl_sync(FULL, value0, i);
            const u32 f = __shfl_sync(FULL, format, i);
            __syncwarp();
            if (lane < t.w) xs[lane] = to_acc(load(o.x + ((u64)tc * TILE + lane) * o.incx));
            __syncwarp();
            if (r < h) sum += tile_row(f, t, r, half, xs);
        }
    }
    return sum + __shfl_down_sync(FULL, sum, TILE);
}

// SEGMENTS = false: one warp per tile row of at most long_tiles tiles, writing its rows of y.
// SEGMENTS = true: one warp per segment of a long tile row, writing 16 partial sums.
template <typename T, bool SEGMENTS>
__global__ void __launch_bounds__(TILE_BLOCK) tile_spmv(const TileSpmv<T> p) {
    __shared__ typename acc_of<T>::type staged[WARPS][TILE];
    const TileMatrix<T>& a = p.a;
    const SpmvDense<T>& o = p.dense;
    const u64 item = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const u32 lane = threadIdx.x % 32;
    u32 tr, first, end;
    if (SEGMENTS) {
        if (item >= p.segments) return;  // whole warps leave together
        tr = load(p.segment_row + item);
        first = load(p.segment_first + item);
        end = min(load(a.tile_ptr + tr + 1), first + TILE_SEGMENT);
    } else {
        if (item >= a.tile_rows) return;
        tr = (u32)item;
        first = load(a.tile_ptr + tr);
        end = load(a.tile_ptr + tr + 1);
        if (end - first > p.long_tiles) return;
    }
    const typename acc_of<T>::type sum = tile_range(a, o, tr, first, end, staged[threadIdx.x / 32]);
    if (lane >= TILE) return;
    if (SEGMENTS) {
        p.partial[item * TILE + lane] = sum;
    } else {
        const u64 row = (u64)tr * TILE + lane;
        if (row < a.rows) update(o.y + row * o.incy, o.alpha, sum, o.beta);
    }
}

// One thread per row of a long tile row: its segments' partial sums added in segment order.
template <typename T>
__global__ void __launch_bounds__(TILE_BLOCK) tile_combine(const TileCombine<T> p) {
    const SpmvDense<T>& o = p.dense;
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 l = t / TILE;
    const u32 r = t % TILE;
    if (l >= p.long_rows) return;
    const u64 row = (u64)load(p.long_row + l) * TILE + r;
    if (row >= p.rows) return;
    typename acc_of<T>::type sum = 0;
    const u32 from = load(p.first_segment + l), to = load(p.first_segment + l + 1);
    for (u32 s = from; s < to; ++s) sum += load(p.partial + (u64)s * TILE + r);
    update(o.y + row * o.incy, o.alpha, sum, o.beta);
}
