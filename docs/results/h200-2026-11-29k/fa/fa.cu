// Prototype: the CUDA-core fused attention forward in f32 (one head, rows of up to 256 entries,
// a warp a row), as committed and with the scores taken by groups of lanes with 16-byte loads.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cuda_runtime.h>

typedef unsigned int u32;
typedef unsigned long long u64;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
#define NEG_INF __int_as_float(0xff800000)

struct SplitMix { u64 s; u64 next() { u64 z = (s += 0x9e3779b97f4a7c15ull); z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull; return z ^ (z >> 31); } double f() { return (next() >> 11) * (1.0 / 9007199254740992.0); } };

struct P { u32 items; const u32* rows; const u32* row_ptr; const u32* col; const float* q; const float* k; const float* v; float* o; u32 d; float scale; };

__device__ __forceinline__ float allsum(float v, int width) {
    for (int o = width / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float allmax(float v) {
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The committed kernel's short-row path (WPI = 1), contiguous rows.
template <int CH>
__global__ void __launch_bounds__(256) base(const P p) {
    const u32 lane = threadIdx.x % 32;
    const u64 item = (u64)blockIdx.x * 8 + threadIdx.x / 32;
    if (item >= p.items) return;
    const u32 row = __ldg(p.rows + item), begin = __ldg(p.row_ptr + row), end = __ldg(p.row_ptr + row + 1);
    float q_reg[CH], acc[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; q_reg[c] = t < p.d ? __ldg(p.q + (u64)row * p.d + t) : 0.f; acc[c] = 0.f; }
    float run_max = NEG_INF, run_sum = 0.f;
    for (u32 base = begin; base < end; base += 32) {
        const u32 chunk = min(end - base, 32u);
        const u32 col = lane < chunk ? __ldg(p.col + base + lane) : 0;
        float score = NEG_INF;
#pragma unroll 4
        for (u32 e = 0; e < chunk; ++e) {
            const float* k_row = p.k + (u64)__shfl_sync(0xffffffffu, col, e) * p.d;
            float partial = 0.f;
#pragma unroll
            for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; if (t < p.d) partial += q_reg[c] * __ldg(k_row + t); }
            const float dot = allsum(partial, 32);
            if (lane == e) score = dot * p.scale;
        }
        const float tile_max = fmaxf(run_max, allmax(score));
        const float rescale = expf(run_max - tile_max);
        const float weight = lane < chunk ? expf(score - tile_max) : 0.f;
        run_sum = run_sum * rescale + allsum(weight, 32);
        run_max = tile_max;
#pragma unroll
        for (int c = 0; c < CH; ++c) acc[c] *= rescale;
#pragma unroll 4
        for (u32 e = 0; e < chunk; ++e) {
            const float w = __shfl_sync(0xffffffffu, weight, e);
            const float* v_row = p.v + (u64)__shfl_sync(0xffffffffu, col, e) * p.d;
#pragma unroll
            for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; if (t < p.d) acc[c] += w * __ldg(v_row + t); }
        }
    }
    const float inv = begin == end ? 0.f : 1.f / run_sum;
#pragma unroll
    for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; if (t < p.d) p.o[(u64)row * p.d + t] = acc[c] * inv; }
}


// The committed kernel's long-row path (WPI = 8 warps a row, combined through shared memory).
template <int CH>
__global__ void __launch_bounds__(256) base_long(const P p) {
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const u64 item = blockIdx.x;
    const u32 row = __ldg(p.rows + item), begin = __ldg(p.row_ptr + row), end = __ldg(p.row_ptr + row + 1);
    float q_reg[CH], acc[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; q_reg[c] = t < p.d ? __ldg(p.q + (u64)row * p.d + t) : 0.f; acc[c] = 0.f; }
    float run_max = NEG_INF, run_sum = 0.f;
    for (u32 base = begin + warp * 32; base < end; base += 32 * 8) {
        const u32 chunk = min(end - base, 32u);
        const u32 col = lane < chunk ? __ldg(p.col + base + lane) : 0;
        float score = NEG_INF;
#pragma unroll 4
        for (u32 e = 0; e < chunk; ++e) {
            const float* k_row = p.k + (u64)__shfl_sync(0xffffffffu, col, e) * p.d;
            float partial = 0.f;
#pragma unroll
            for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; if (t < p.d) partial += q_reg[c] * __ldg(k_row + t); }
            const float dot = allsum(partial, 32);
            if (lane == e) score = dot * p.scale;
        }
        const float tile_max = fmaxf(run_max, allmax(score));
        const float rescale = expf(run_max - tile_max);
        const float weight = lane < chunk ? expf(score - tile_max) : 0.f;
        run_sum = run_sum * rescale + allsum(weight, 32);
        run_max = tile_max;
#pragma unroll
        for (int c = 0; c < CH; ++c) acc[c] *= rescale;
#pragma unroll 4
        for (u32 e = 0; e < chunk; ++e) {
            const float w = __shfl_sync(0xffffffffu, weight, e);
            const float* v_row = p.v + (u64)__shfl_sync(0xffffffffu, col, e) * p.d;
#pragma unroll
            for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; if (t < p.d) acc[c] += w * __ldg(v_row + t); }
        }
    }
    __shared__ float part_max[8], part_sum[8], part_acc[8][32 * CH];
    if (lane == 0) { part_max[warp] = run_max; part_sum[warp] = run_sum; }
#pragma unroll
    for (int c = 0; c < CH; ++c) part_acc[warp][lane + 32 * c] = acc[c];
    __syncthreads();
    if (warp != 0) return;
    run_max = NEG_INF;
    for (int w = 0; w < 8; ++w) run_max = fmaxf(run_max, part_max[w]);
    run_sum = 0.f;
#pragma unroll
    for (int c = 0; c < CH; ++c) acc[c] = 0.f;
    for (int w = 0; w < 8; ++w) {
        const float f = part_max[w] == NEG_INF ? 0.f : expf(part_max[w] - run_max);
        run_sum += f * part_sum[w];
#pragma unroll
        for (int c = 0; c < CH; ++c) acc[c] += f * part_acc[w][lane + 32 * c];
    }
    const float inv = 1.f / run_sum;
#pragma unroll
    for (int c = 0; c < CH; ++c) { const u32 t = lane + 32 * c; if (t < p.d) p.o[(u64)row * p.d + t] = acc[c] * inv; }
}

// Scores by groups of G lanes, each lane VPL 16-byte runs of the K row (d = 4 * G * VPL), so a
// step takes 32 / G entries; the weighted sum with lanes across d, d / 32 columns each in one
// vector load. UNROLL: entries of the weighted sum issued together.
template <int G, int VPL, int UNROLL>
__global__ void __launch_bounds__(256) grouped(const P p) {
    constexpr int E = 32 / G;         // entries a step
    constexpr int STEPS = 32 / E;     // steps a tile of 32
    constexpr int D = 4 * G * VPL;
    constexpr int CV = D / 32;        // columns a lane in the sum
    const u32 lane = threadIdx.x % 32, sub = lane % G, grp = lane / G;
    const u64 item = (u64)blockIdx.x * 8 + threadIdx.x / 32;
    if (item >= p.items) return;
    const u32 row = __ldg(p.rows + item), begin = __ldg(p.row_ptr + row), end = __ldg(p.row_ptr + row + 1);
    float4 q_reg[VPL];
    const float4* q_row = reinterpret_cast<const float4*>(p.q + (u64)row * D);
#pragma unroll
    for (int i = 0; i < VPL; ++i) q_reg[i] = __ldg(q_row + sub + G * i);
    float acc[CV];
#pragma unroll
    for (int c = 0; c < CV; ++c) acc[c] = 0.f;
    float run_max = NEG_INF, run_sum = 0.f;
    for (u32 base = begin; base < end; base += 32) {
        const u32 chunk = min(end - base, 32u);
        const u32 col = lane < chunk ? __ldg(p.col + base + lane) : 0;
        float sc[STEPS];
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            const u32 e = s * E + grp;
            const u32 c = __shfl_sync(0xffffffffu, col, e);
            float partial = 0.f;
            if (e < chunk) {
                const float4* k_row = reinterpret_cast<const float4*>(p.k + (u64)c * D);
#pragma unroll
                for (int i = 0; i < VPL; ++i) {
                    const float4 kv = __ldg(k_row + sub + G * i);
                    partial += q_reg[i].x * kv.x + q_reg[i].y * kv.y + q_reg[i].z * kv.z + q_reg[i].w * kv.w;
                }
            }
            sc[s] = allsum(partial, G);
        }
        // Entry e's score is sc[e / E] in group e % E: lane e takes it.
        float score = NEG_INF;
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            const float v = __shfl_sync(0xffffffffu, sc[s], (lane % E) * G);
            if (lane / E == (u32)s && lane < chunk) score = v * p.scale;
        }
        const float tile_max = fmaxf(run_max, allmax(score));
        const float rescale = expf(run_max - tile_max);
        const float weight = lane < chunk ? expf(score - tile_max) : 0.f;
        run_sum = run_sum * rescale + allsum(weight, 32);
        run_max = tile_max;
#pragma unroll
        for (int c = 0; c < CV; ++c) acc[c] *= rescale;
#pragma unroll UNROLL
        for (u32 e = 0; e < chunk; ++e) {
            const float w = __shfl_sync(0xffffffffu, weight, e);
            const float* v_row = p.v + (u64)__shfl_sync(0xffffffffu, col, e) * D + CV * lane;
            if constexpr (CV == 4) {
                const float4 x = __ldg(reinterpret_cast<const float4*>(v_row));
                acc[0] += w * x.x; acc[1] += w * x.y; acc[2] += w * x.z; acc[3] += w * x.w;
            } else {
                const float2 x = __ldg(reinterpret_cast<const float2*>(v_row));
                acc[0] += w * x.x; acc[1] += w * x.y;
            }
        }
    }
    const float inv = begin == end ? 0.f : 1.f / run_sum;
#pragma unroll
    for (int c = 0; c < CV; ++c) p.o[(u64)row * D + CV * lane + c] = acc[c] * inv;
}

// As grouped, over pieces of rows; a piece of a long row writes (acc, max, sum) to scratch.
// Scores by groups of G lanes, each lane VPL 16-byte runs of the K row (d = 4 * G * VPL), so a
// step takes 32 / G entries; the weighted sum with lanes across d, d / 32 columns each in one
// vector load. UNROLL: entries of the weighted sum issued together.
template <int G, int VPL, int UNROLL>
__global__ void __launch_bounds__(256) pieces(const P p, const u32* item_begin, const u32* item_end, const u32* item_slot, float* scratch) {
    constexpr int E = 32 / G;         // entries a step
    constexpr int STEPS = 32 / E;     // steps a tile of 32
    constexpr int D = 4 * G * VPL;
    constexpr int CV = D / 32;        // columns a lane in the sum
    const u32 lane = threadIdx.x % 32, sub = lane % G, grp = lane / G;
    const u64 item = (u64)blockIdx.x * 8 + threadIdx.x / 32;
    if (item >= p.items) return;
    const u32 row = __ldg(p.rows + item), begin = __ldg(item_begin + item), end = __ldg(item_end + item), slot = __ldg(item_slot + item);
    float4 q_reg[VPL];
    const float4* q_row = reinterpret_cast<const float4*>(p.q + (u64)row * D);
#pragma unroll
    for (int i = 0; i < VPL; ++i) q_reg[i] = __ldg(q_row + sub + G * i);
    float acc[CV];
#pragma unroll
    for (int c = 0; c < CV; ++c) acc[c] = 0.f;
    float run_max = NEG_INF, run_sum = 0.f;
    for (u32 base = begin; base < end; base += 32) {
        const u32 chunk = min(end - base, 32u);
        const u32 col = lane < chunk ? __ldg(p.col + base + lane) : 0;
        float sc[STEPS];
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            const u32 e = s * E + grp;
            const u32 c = __shfl_sync(0xffffffffu, col, e);
            float partial = 0.f;
            if (e < chunk) {
                const float4* k_row = reinterpret_cast<const float4*>(p.k + (u64)c * D);
#pragma unroll
                for (int i = 0; i < VPL; ++i) {
                    const float4 kv = __ldg(k_row + sub + G * i);
                    partial += q_reg[i].x * kv.x + q_reg[i].y * kv.y + q_reg[i].z * kv.z + q_reg[i].w * kv.w;
                }
            }
            sc[s] = allsum(partial, G);
        }
        // Entry e's score is sc[e / E] in group e % E: lane e takes it.
        float score = NEG_INF;
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            const float v = __shfl_sync(0xffffffffu, sc[s], (lane % E) * G);
            if (lane / E == (u32)s && lane < chunk) score = v * p.scale;
        }
        const float tile_max = fmaxf(run_max, allmax(score));
        const float rescale = expf(run_max - tile_max);
        const float weight = lane < chunk ? expf(score - tile_max) : 0.f;
        run_sum = run_sum * rescale + allsum(weight, 32);
        run_max = tile_max;
#pragma unroll
        for (int c = 0; c < CV; ++c) acc[c] *= rescale;
#pragma unroll UNROLL
        for (u32 e = 0; e < chunk; ++e) {
            const float w = __shfl_sync(0xffffffffu, weight, e);
            const float* v_row = p.v + (u64)__shfl_sync(0xffffffffu, col, e) * D + CV * lane;
            if constexpr (CV == 4) {
                const float4 x = __ldg(reinterpret_cast<const float4*>(v_row));
                acc[0] += w * x.x; acc[1] += w * x.y; acc[2] += w * x.z; acc[3] += w * x.w;
            } else {
                const float2 x = __ldg(reinterpret_cast<const float2*>(v_row));
                acc[0] += w * x.x; acc[1] += w * x.y;
            }
        }
    }
    if (slot != 0xffffffffu) {
        float* s = scratch + (u64)slot * (D + 2);
        if (lane == 0) { s[D] = run_max; s[D + 1] = run_sum; }
#pragma unroll
        for (int c = 0; c < CV; ++c) s[CV * lane + c] = acc[c];
        return;
    }
    const float inv = begin == end ? 0.f : 1.f / run_sum;
#pragma unroll
    for (int c = 0; c < CV; ++c) p.o[(u64)row * D + CV * lane + c] = acc[c] * inv;
}


// A long row's pieces first..last of scratch combined in order: a warp a row.
template <int CV>
__global__ void __launch_bounds__(256) combine(u32 rows, const u32* long_row, const u32* first_piece, const float* scratch, float* o) {
    const u32 lane = threadIdx.x % 32;
    const u64 item = (u64)blockIdx.x * 8 + threadIdx.x / 32;
    if (item >= rows) return;
    constexpr int D = 32 * CV;
    const u32 row = long_row[item], first = first_piece[item], last = first_piece[item + 1];
    float run_max = NEG_INF;
    for (u32 s = first; s < last; ++s) run_max = fmaxf(run_max, scratch[(u64)s * (D + 2) + D]);
    float sum = 0.f, acc[CV];
#pragma unroll
    for (int c = 0; c < CV; ++c) acc[c] = 0.f;
    for (u32 s = first; s < last; ++s) {
        const float* p = scratch + (u64)s * (D + 2);
        const float m = p[D];
        const float f = m == NEG_INF ? 0.f : expf(m - run_max);
        sum += f * p[D + 1];
#pragma unroll
        for (int c = 0; c < CV; ++c) acc[c] += f * p[CV * lane + c];
    }
    const float inv = 1.f / sum;
#pragma unroll
    for (int c = 0; c < CV; ++c) o[(u64)row * D + CV * lane + c] = acc[c] * inv;
}

struct Csr { u32 n; std::vector<u32> ptr, col; };
Csr rmat(int scale, int ef, u64 seed) {
    u64 n = 1ull << scale, e = n * ef; SplitMix r{seed}; std::vector<u64> keys(e);
    for (u64 i = 0; i < e; ++i) { u64 rr = 0, cc = 0; for (int b = scale - 1; b >= 0; --b) { double p = r.f(); u64 down = p >= 0.76, right = (p >= 0.57 && p < 0.76) || p >= 0.95; rr |= down << b; cc |= right << b; } keys[i] = rr * n + cc; }
    std::sort(keys.begin(), keys.end()); keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    Csr m; m.n = n; m.ptr.assign(n + 1, 0); m.col.resize(keys.size());
    for (u64 i = 0; i < keys.size(); ++i) { m.ptr[keys[i] / n + 1]++; m.col[i] = keys[i] % n; }
    for (u64 i = 0; i < n; ++i) m.ptr[i + 1] += m.ptr[i]; return m;
}


struct Items { std::vector<u32> row, begin, end, slot, long_row, first_piece; };
Items make_items(const Csr& a, u32 piece) {
    Items it; u32 slots = 0;
    for (u32 r = 0; r < a.n; ++r) {
        const u32 b = a.ptr[r], e = a.ptr[r + 1];
        if (e - b <= piece) { it.row.push_back(r); it.begin.push_back(b); it.end.push_back(e); it.slot.push_back(0xffffffffu); continue; }
        it.long_row.push_back(r); it.first_piece.push_back(slots);
        for (u32 s = b; s < e; s += piece) { it.row.push_back(r); it.begin.push_back(s); it.end.push_back(std::min(e, s + piece)); it.slot.push_back(slots++); }
    }
    it.first_piece.push_back(slots);
    return it;
}
template <typename V> V* up(const std::vector<V>& h) { V* d; CK(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(V))); CK(cudaMemcpy(d, h.data(), h.size() * sizeof(V), cudaMemcpyHostToDevice)); return d; }

int main(int argc, char** argv) {
    const int scale = atoi(argv[1]), ef = atoi(argv[2]);
    Csr a = rmat(scale, ef, 42);
    const u32 n = a.n, nnz = a.col.size();
    std::vector<u32> short_rows, long_rows; u64 short_nnz = 0; u32 longest = 0;
    for (u32 r = 0; r < n; ++r) { u32 len = a.ptr[r + 1] - a.ptr[r]; longest = std::max(longest, len); if (len <= 256) { short_rows.push_back(r); short_nnz += len; } else long_rows.push_back(r); }
    printf("rmat 2^%d x %d: nnz %u, %zu short rows with %llu entries, %zu long rows, longest %u\n", scale, ef, nnz, short_rows.size(), short_nnz, long_rows.size(), longest);
    u32* d_rows = up(short_rows); u32* d_long = up(long_rows); u32* d_ptr = up(a.ptr); u32* d_col = up(a.col);
    Items it[3] = {make_items(a, 128), make_items(a, 256), make_items(a, 512)};
    const u32 piece_of[3] = {128, 256, 512};
    u32 *i_row[3], *i_begin[3], *i_end[3], *i_slot[3], *i_lrow[3], *i_first[3];
    for (int i = 0; i < 3; ++i) { i_row[i] = up(it[i].row); i_begin[i] = up(it[i].begin); i_end[i] = up(it[i].end); i_slot[i] = up(it[i].slot); i_lrow[i] = up(it[i].long_row); i_first[i] = up(it[i].first_piece); }
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<u32> sample; for (u32 r = 0; r < n; r += 97) sample.push_back(r);
    for (u32 i = 0; i < long_rows.size(); i += std::max<size_t>(1, long_rows.size() / 300)) sample.push_back(long_rows[i]);
    sample.push_back(long_rows.empty() ? 0 : *std::max_element(long_rows.begin(), long_rows.end(), [&](u32 x, u32 y) { return a.ptr[x + 1] - a.ptr[x] < a.ptr[y + 1] - a.ptr[y]; }));
    for (u32 d : {64u, 128u}) {
        std::vector<float> q((u64)n * d), k((u64)n * d), v((u64)n * d);
        SplitMix r{d};
        for (auto& x : q) x = r.f() * 2 - 1; for (auto& x : k) x = r.f() * 2 - 1; for (auto& x : v) x = r.f() * 2 - 1;
        float* dq = up(q); float* dk = up(k); float* dv = up(v); float* dout; CK(cudaMalloc(&dout, v.size() * 4));
        float* scratch; CK(cudaMalloc(&scratch, (u64)(nnz / 128 + 16) * (d + 2) * 4));
        P p{(u32)short_rows.size(), d_rows, d_ptr, d_col, dq, dk, dv, dout, d, 1.0f / sqrtf((float)d)};
        P pl = p; pl.items = long_rows.size(); pl.rows = d_long;
        auto check = [&]() {
            std::vector<float> o(v.size()); CK(cudaMemcpy(o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (u32 row : sample) {
                u32 b = a.ptr[row], e = a.ptr[row + 1];
                if (b == e) { for (u32 t = 0; t < d; ++t) worst = std::max(worst, (double)std::abs(o[(u64)row * d + t])); continue; }
                std::vector<double> s(e - b); double mx = -1e300;
                for (u32 j = b; j < e; ++j) { double dot = 0; for (u32 t = 0; t < d; ++t) dot += (double)q[(u64)row * d + t] * k[(u64)a.col[j] * d + t]; s[j - b] = dot * p.scale; mx = std::max(mx, s[j - b]); }
                double sum = 0; for (auto& x : s) { x = std::exp(x - mx); sum += x; }
                for (u32 t = 0; t < d; ++t) { double ov = 0; for (u32 j = b; j < e; ++j) ov += s[j - b] / sum * v[(u64)a.col[j] * d + t]; worst = std::max(worst, std::abs(ov - o[(u64)row * d + t])); }
            }
            return worst;
        };
        auto time = [&](auto&& f) {
            CK(cudaMemset(dout, 0xff, v.size() * 4));
            for (int i = 0; i < 5; ++i) f();
            CK(cudaDeviceSynchronize()); CK(cudaGetLastError());
            std::vector<float> ts;
            for (int rep = 0; rep < 7; ++rep) { cudaEventRecord(e0); for (int i = 0; i < 5; ++i) f(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms / 5); }
            std::sort(ts.begin(), ts.end()); return ts[3];
        };
        const double flops = 4.0 * nnz * d;
        auto report = [&](const char* name, float ms) { printf("d=%u %-40s %.3f ms  %.2f TFLOP/s  err %.2e\n", d, name, ms, flops / (ms * 1e9), check()); };
        const u32 sb = (p.items + 7) / 8, lb = pl.items;
        auto run_pieces = [&](int i, auto kernel, auto comb) {
            const u32 items = it[i].row.size(), longs = it[i].long_row.size();
            P pp = p; pp.items = items; pp.rows = i_row[i];
            kernel<<<(items + 7) / 8, 256>>>(pp, i_begin[i], i_end[i], i_slot[i], scratch);
            if (longs) comb<<<(longs + 7) / 8, 256>>>(longs, i_lrow[i], i_first[i], scratch, dout);
        };
        char name[64];
        if (d == 64) {
            report("committed: base CH=2 + long", time([&] { base<2><<<sb, 256>>>(p); base_long<2><<<lb, 256>>>(pl); }));
            printf("d=64   short alone %.3f ms, long alone %.3f ms\n", time([&] { base<2><<<sb, 256>>>(p); }), time([&] { base_long<2><<<lb, 256>>>(pl); }));
            report("grouped G=8 VPL=2 U4 + long", time([&] { grouped<8, 2, 4><<<sb, 256>>>(p); base_long<2><<<lb, 256>>>(pl); }));
            for (int i = 0; i < 3; ++i) {
                snprintf(name, sizeof name, "pieces %u G=8 VPL=2 U4", piece_of[i]);
                report(name, time([&] { run_pieces(i, pieces<8, 2, 4>, combine<2>); }));
                snprintf(name, sizeof name, "pieces %u G=8 VPL=2 U8", piece_of[i]);
                report(name, time([&] { run_pieces(i, pieces<8, 2, 8>, combine<2>); }));
            }
            report("pieces 256 G=16 VPL=1 U8", time([&] { run_pieces(1, pieces<16, 1, 8>, combine<2>); }));
        } else {
            report("committed: base CH=4 + long", time([&] { base<4><<<sb, 256>>>(p); base_long<4><<<lb, 256>>>(pl); }));
            printf("d=128  short alone %.3f ms, long alone %.3f ms\n", time([&] { base<4><<<sb, 256>>>(p); }), time([&] { base_long<4><<<lb, 256>>>(pl); }));
            report("grouped G=16 VPL=2 U8 + long", time([&] { grouped<16, 2, 8><<<sb, 256>>>(p); base_long<4><<<lb, 256>>>(pl); }));
            for (int i = 0; i < 3; ++i) {
                snprintf(name, sizeof name, "pieces %u G=16 VPL=2 U8", piece_of[i]);
                report(name, time([&] { run_pieces(i, pieces<16, 2, 8>, combine<4>); }));
                snprintf(name, sizeof name, "pieces %u G=16 VPL=2 U4", piece_of[i]);
                report(name, time([&] { run_pieces(i, pieces<16, 2, 4>, combine<4>); }));
            }
            report("pieces 256 G=8 VPL=4 U8", time([&] { run_pieces(1, pieces<8, 4, 8>, combine<4>); }));
        }
        cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(scratch);
    }
    return 0;
}
