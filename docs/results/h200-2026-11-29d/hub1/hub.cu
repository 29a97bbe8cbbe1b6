// Prototype: SpMV on R-MAT with the most-read x entries held in shared memory.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <numeric>
#include <cmath>
#include <cuda_runtime.h>
#include <cusparse.h>

typedef unsigned int u32;
typedef unsigned long long u64;

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

struct SplitMix { u64 s; u64 next() { u64 z = (s += 0x9e3779b97f4a7c15ull); z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull; return z ^ (z >> 31); } double f() { return (next() >> 11) * (1.0 / 9007199254740992.0); } };

// Work items: a warp takes either ROWS_PER_ITEM rows (W lanes a row) or a segment of a long row.
template <typename T, int W, bool HUB>
__global__ void __launch_bounds__(1024) spmv_hub(u32 rows, const u32* __restrict__ row_ptr, const u32* __restrict__ col,
                                                 const T* __restrict__ val, const T* __restrict__ x, T* __restrict__ y,
                                                 u32 hub, u32 items, u32 row_items, const u32* __restrict__ seg_row,
                                                 const u32* __restrict__ seg_from, const u32* __restrict__ seg_to) {
    extern __shared__ unsigned char smem_raw[];
    T* sx = reinterpret_cast<T*>(smem_raw);
    if (HUB) {
        for (u32 i = threadIdx.x; i < hub; i += blockDim.x) sx[i] = x[i];
        __syncthreads();
    }
    const u32 lane = threadIdx.x % 32;
    const u32 warps = gridDim.x * (blockDim.x / 32);
    for (u32 item = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; item < items; item += warps) {
        if (item < row_items) {
            const u32 row = item * (32 / W) + lane / W;
            const u32 sub = lane % W;
            T sum = 0;
            u32 from = 0, to = 0;
            if (row < rows) { from = row_ptr[row]; to = row_ptr[row + 1]; }
            if (to - from > 8 * W) to = from;  // long rows go to segments
            for (u32 k = from + sub; k < to; k += W) {
                const u32 c = __ldg(col + k);
                const T xv = HUB ? (c < hub ? sx[c] : __ldg(x + c)) : __ldg(x + c);
                sum += __ldg(val + k) * xv;
            }
#pragma unroll
            for (int o = W / 2; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o, W);
            if (sub == 0 && row < rows && row_ptr[row + 1] - row_ptr[row] <= 8 * W) y[row] = sum;
        } else {
            const u32 s = item - row_items;
            const u32 from = seg_from[s], to = seg_to[s];
            T sum = 0;
            for (u32 k = from + lane; k < to; k += 32) {
                const u32 c = __ldg(col + k);
                const T xv = HUB ? (c < hub ? sx[c] : __ldg(x + c)) : __ldg(x + c);
                sum += __ldg(val + k) * xv;
            }
#pragma unroll
            for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o);
            if (lane == 0) atomicAdd(y + seg_row[s], sum);
        }
    }
}

template <typename T>
__global__ void zero_long(u32 n, const u32* rows, T* y) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[rows[i]] = 0;
}

template <typename T> cudaDataType dt();
template <> cudaDataType dt<float>() { return CUDA_R_32F; }
template <> cudaDataType dt<double>() { return CUDA_R_64F; }

struct Csr { u32 n; std::vector<u32> ptr, col; };

Csr rmat(int scale, int ef, u64 seed) {
    u64 n = 1ull << scale, e = n * ef;
    SplitMix r{seed};
    std::vector<u64> keys(e);
    for (u64 i = 0; i < e; ++i) {
        u64 rr = 0, cc = 0;
        for (int b = scale - 1; b >= 0; --b) {
            double p = r.f();
            u64 down = p >= 0.76, right = (p >= 0.57 && p < 0.76) || p >= 0.95;
            rr |= down << b; cc |= right << b;
        }
        keys[i] = rr * n + cc;
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    Csr m; m.n = n; m.ptr.assign(n + 1, 0); m.col.resize(keys.size());
    for (u64 i = 0; i < keys.size(); ++i) { m.ptr[keys[i] / n + 1]++; m.col[i] = keys[i] % n; }
    for (u64 i = 0; i < n; ++i) m.ptr[i + 1] += m.ptr[i];
    return m;
}

// Columns renumbered by falling in-degree (ties by index); rows sorted again.
Csr by_degree(const Csr& a, std::vector<u32>& rank) {
    std::vector<u32> deg(a.n, 0);
    for (u32 c : a.col) deg[c]++;
    std::vector<u32> order(a.n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](u32 p, u32 q) { return deg[p] > deg[q]; });
    rank.assign(a.n, 0);
    for (u32 i = 0; i < a.n; ++i) rank[order[i]] = i;
    Csr b = a;
    for (u32 r = 0; r < a.n; ++r) {
        for (u32 k = a.ptr[r]; k < a.ptr[r + 1]; ++k) b.col[k] = rank[a.col[k]];
        std::sort(b.col.begin() + a.ptr[r], b.col.begin() + a.ptr[r + 1]);
    }
    return b;
}

template <typename T>
void run(const Csr& orig, const Csr& ren, const std::vector<u32>& rank, double copy_gbs) {
    const u32 n = orig.n, nnz = orig.col.size();
    std::vector<T> val(nnz), x(n), xr(n);
    SplitMix r{7};
    for (auto& v : val) v = (T)(0.5 + 0.5 * r.f());
    for (auto& v : x) v = (T)(r.f() - 0.5);
    for (u32 c = 0; c < n; ++c) xr[rank[c]] = x[c];
    // The same values in the renumbered rows' order: each row is the same set, sorted by rank.
    std::vector<T> valr(nnz);
    for (u32 row = 0; row < n; ++row) {
        std::vector<std::pair<u32, T>> e;
        for (u32 k = orig.ptr[row]; k < orig.ptr[row + 1]; ++k) e.push_back({rank[orig.col[k]], val[k]});
        std::sort(e.begin(), e.end(), [](auto& p, auto& q) { return p.first < q.first; });
        for (u32 i = 0; i < e.size(); ++i) valr[orig.ptr[row] + i] = e[i].second;
    }
    u32 *d_ptr, *d_col, *d_colr;
    T *d_val, *d_valr, *d_x, *d_xr, *d_y, *d_y2;
    CK(cudaMalloc(&d_ptr, (n + 1) * 4)); CK(cudaMalloc(&d_col, nnz * 4)); CK(cudaMalloc(&d_colr, nnz * 4));
    CK(cudaMalloc(&d_val, nnz * sizeof(T))); CK(cudaMalloc(&d_valr, nnz * sizeof(T)));
    CK(cudaMalloc(&d_x, n * sizeof(T))); CK(cudaMalloc(&d_xr, n * sizeof(T)));
    CK(cudaMalloc(&d_y, n * sizeof(T))); CK(cudaMalloc(&d_y2, n * sizeof(T)));
    CK(cudaMemcpy(d_ptr, orig.ptr.data(), (n + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_col, orig.col.data(), nnz * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_colr, ren.col.data(), nnz * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_val, val.data(), nnz * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_valr, valr.data(), nnz * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_x, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_xr, xr.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    // Reference on the host in double.
    std::vector<double> ref(n);
    for (u32 row = 0; row < n; ++row) { double s = 0; for (u32 k = orig.ptr[row]; k < orig.ptr[row + 1]; ++k) s += (double)val[k] * x[orig.col[k]]; ref[row] = s; }
    // Long-row segments.
    const int W = 4;
    std::vector<u32> sr, sf, st, longrows;
    for (u32 row = 0; row < n; ++row) {
        u32 f = orig.ptr[row], t = orig.ptr[row + 1];
        if (t - f > 8 * W) { longrows.push_back(row); for (u32 k = f; k < t; k += 256) { sr.push_back(row); sf.push_back(k); st.push_back(std::min(t, k + 256)); } }
    }
    u32 *d_sr, *d_sf, *d_st, *d_long;
    CK(cudaMalloc(&d_sr, sr.size() * 4)); CK(cudaMalloc(&d_sf, sr.size() * 4)); CK(cudaMalloc(&d_st, sr.size() * 4)); CK(cudaMalloc(&d_long, longrows.size() * 4));
    CK(cudaMemcpy(d_sr, sr.data(), sr.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_sf, sf.data(), sr.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_st, st.data(), sr.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_long, longrows.data(), longrows.size() * 4, cudaMemcpyHostToDevice));
    const u32 row_items = (n + 32 / W - 1) / (32 / W), items = row_items + sr.size();
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const double bytes = (double)nnz * (4 + sizeof(T)) + (n + 1) * 4.0 + 2.0 * n * sizeof(T);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    auto time = [&](auto&& f) {
        for (int i = 0; i < 20; ++i) f();
        std::vector<float> ts;
        for (int rep = 0; rep < 7; ++rep) {
            cudaEventRecord(e0); for (int i = 0; i < 50; ++i) f(); cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms / 50);
        }
        std::sort(ts.begin(), ts.end()); CK(cudaGetLastError()); return ts[3];
    };
    auto check = [&](T* dy, bool renumbered) {
        std::vector<T> y(n); CK(cudaMemcpy(y.data(), dy, n * sizeof(T), cudaMemcpyDeviceToHost));
        double worst = 0; for (u32 i = 0; i < n; ++i) { double s = 0; for (u32 k = orig.ptr[i]; k < orig.ptr[i + 1]; ++k) s += std::abs((double)val[k] * x[orig.col[k]]); double e = std::abs(y[i] - ref[i]) / (s * 1e-5 + 1e-300); worst = std::max(worst, s > 0 ? e : 0.0); }
        (void)renumbered; return worst;
    };
    const char* tn = sizeof(T) == 8 ? "f64" : "f32";
    // cuSPARSE CSR on the original.
    {
        cusparseHandle_t h; cusparseCreate(&h);
        cusparseSpMatDescr_t A; cusparseDnVecDescr_t X, Y;
        cusparseCreateCsr(&A, n, n, nnz, d_ptr, d_col, d_val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, dt<T>());
        cusparseCreateDnVec(&X, n, d_x, dt<T>()); cusparseCreateDnVec(&Y, n, d_y, dt<T>());
        T one = 1, zero = 0; size_t ws = 0; void* buf = nullptr;
        for (auto alg : {CUSPARSE_SPMV_CSR_ALG1, CUSPARSE_SPMV_CSR_ALG2}) {
            cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), alg, &ws);
            if (buf) cudaFree(buf); CK(cudaMalloc(&buf, ws + 16));
            cusparseSpMV_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), alg, buf);
            float ms = time([&] { cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), alg, buf); });
            printf("%s cusparse-csr-alg%d orig %.4f ms  %.3f of copy  err %.3g\n", tn, alg == CUSPARSE_SPMV_CSR_ALG1 ? 1 : 2, ms, bytes / (ms * 1e6) / copy_gbs, check(d_y, false));
        }
        cusparseCreateCsr(&A, n, n, nnz, d_ptr, d_colr, d_valr, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, dt<T>());
        cusparseCreateDnVec(&X, n, d_xr, dt<T>());
        cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), CUSPARSE_SPMV_CSR_ALG1, &ws);
        cudaFree(buf); CK(cudaMalloc(&buf, ws + 16));
        float ms = time([&] { cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), CUSPARSE_SPMV_CSR_ALG1, buf); });
        printf("%s cusparse-csr-alg1 renumbered %.4f ms  %.3f of copy  err %.3g\n", tn, ms, bytes / (ms * 1e6) / copy_gbs, check(d_y, true));
    }
    for (int renum = 0; renum < 2; ++renum) {
        const u32* c = renum ? d_colr : d_col; const T* v = renum ? d_valr : d_val; const T* xx = renum ? d_xr : d_x;
        std::vector<u32> hubs = {0};
        if (renum) { if (sizeof(T) == 8) hubs = {0, 8192, 12288, 16384, 20480, 24576, 28160}; else hubs = {0, 16384, 24576, 32768, 40960, 49152, 56320}; }
        for (u32 hub : hubs) {
            for (int bpsm : {1, 2}) {
                size_t sm = hub * sizeof(T);
                if (bpsm == 2 && sm > 110 * 1024) continue;
                if (hub == 0 && bpsm == 2) continue;
                auto k = hub ? spmv_hub<T, W, true> : spmv_hub<T, W, false>;
                CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
                const u32 grid = hub ? sms * bpsm : sms * 2;
                float ms = time([&] {
                    zero_long<T><<<(longrows.size() + 255) / 256, 256>>>(longrows.size(), d_long, d_y2);
                    k<<<grid, 1024, sm>>>(n, d_ptr, c, v, xx, d_y2, hub, items, row_items, d_sr, d_sf, d_st);
                });
                printf("%s hub=%u blocks/sm=%d %s %.4f ms  %.3f of copy  err %.3g\n", tn, hub, hub ? bpsm : 2, renum ? "renumbered" : "orig", ms, bytes / (ms * 1e6) / copy_gbs, check(d_y2, renum));
            }
        }
    }
    cudaFree(d_ptr); cudaFree(d_col); cudaFree(d_colr); cudaFree(d_val); cudaFree(d_valr); cudaFree(d_x); cudaFree(d_xr); cudaFree(d_y); cudaFree(d_y2);
    cudaFree(d_sr); cudaFree(d_sf); cudaFree(d_st); cudaFree(d_long);
}

int main(int argc, char** argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 21, ef = argc > 2 ? atoi(argv[2]) : 16;
    Csr a = rmat(scale, ef, 42);
    std::vector<u32> rank;
    Csr b = by_degree(a, rank);
    printf("rmat scale %d ef %d: nnz %zu\n", scale, ef, a.col.size());
    // Copy bandwidth: 1 GiB device to device.
    size_t cb = 1ull << 30; void *p, *q; CK(cudaMalloc(&p, cb)); CK(cudaMalloc(&q, cb));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int i = 0; i < 3; ++i) cudaMemcpy(q, p, cb, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0); for (int i = 0; i < 10; ++i) cudaMemcpy(q, p, cb, cudaMemcpyDeviceToDevice); cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); double copy = 2.0 * cb * 10 / (ms * 1e6);
    printf("copy %.1f GB/s\n", copy); cudaFree(p); cudaFree(q);
    run<double>(a, b, rank, copy);
    run<float>(a, b, rank, copy);
    return 0;
}
