// Prototype: cuSPARSE SpMV on R-MAT with the hub columns of x copied to the front of an
// extended x (x_ext = [x[hubs], x]), the matrix's columns relabelled to match.
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
#define CS(x) do { cusparseStatus_t e = (x); if (e != CUSPARSE_STATUS_SUCCESS) { printf("%s:%d cusparse %d\n", __FILE__, __LINE__, (int)e); exit(1);} } while (0)

struct SplitMix { u64 s; u64 next() { u64 z = (s += 0x9e3779b97f4a7c15ull); z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull; z = (z ^ (z >> 27)) * 0x94d049bb133111ebull; return z ^ (z >> 31); } double f() { return (next() >> 11) * (1.0 / 9007199254740992.0); } };

template <typename T>
__global__ void extend(u32 hub, u32 n, const u32* __restrict__ hubs, const T* __restrict__ x, T* __restrict__ xe) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < hub + n; i += gridDim.x * blockDim.x)
        xe[i] = i < hub ? __ldg(x + hubs[i]) : __ldg(x + (i - hub));
}

template <typename T>
__global__ void permute(u32 n, const u32* __restrict__ order, const T* __restrict__ x, T* __restrict__ xp) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) xp[i] = __ldg(x + order[i]);
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

// Uniform random columns, `ef` a row.
Csr uniform(int scale, int ef, u64 seed) {
    u64 n = 1ull << scale; SplitMix r{seed};
    Csr m; m.n = n; m.ptr.assign(n + 1, 0);
    for (u64 i = 0; i < n; ++i) {
        std::vector<u32> c(ef); for (auto& v : c) v = r.next() % n;
        std::sort(c.begin(), c.end()); c.erase(std::unique(c.begin(), c.end()), c.end());
        m.col.insert(m.col.end(), c.begin(), c.end()); m.ptr[i + 1] = m.col.size();
    }
    return m;
}

struct Relabel { std::vector<u32> hubs, col, perm_in_row; };

// Hubs: the `hub` most-read columns, kept in column order. Each row: its hub entries first,
// then the others, each part in column order, so rows stay sorted in the new labels.
Relabel relabel(const Csr& a, u32 hub, const std::vector<u32>& deg) {
    std::vector<u32> order(a.n);
    std::iota(order.begin(), order.end(), 0);
    std::nth_element(order.begin(), order.begin() + hub, order.end(), [&](u32 p, u32 q) { return deg[p] > deg[q] || (deg[p] == deg[q] && p < q); });
    Relabel r; r.hubs.assign(order.begin(), order.begin() + hub); std::sort(r.hubs.begin(), r.hubs.end());
    std::vector<u32> pos(a.n);
    for (u32 c = 0; c < a.n; ++c) pos[c] = hub + c;
    for (u32 i = 0; i < hub; ++i) pos[r.hubs[i]] = i;
    r.col.resize(a.col.size()); r.perm_in_row.resize(a.col.size());
    for (u32 row = 0; row < a.n; ++row) {
        u32 o = a.ptr[row];
        for (u32 k = a.ptr[row]; k < a.ptr[row + 1]; ++k) if (pos[a.col[k]] < hub) { r.col[o] = pos[a.col[k]]; r.perm_in_row[o++] = k; }
        for (u32 k = a.ptr[row]; k < a.ptr[row + 1]; ++k) if (pos[a.col[k]] >= hub) { r.col[o] = pos[a.col[k]]; r.perm_in_row[o++] = k; }
    }
    return r;
}

template <typename T>
void run(const char* name, const Csr& a, double copy_gbs) {
    const u32 n = a.n, nnz = a.col.size();
    std::vector<u32> deg(n, 0);
    for (u32 c : a.col) deg[c]++;
    std::vector<u32> sorted = deg; std::sort(sorted.begin(), sorted.end(), std::greater<u32>());
    std::vector<T> val(nnz), x(n);
    SplitMix r{7};
    for (auto& v : val) v = (T)(0.5 + 0.5 * r.f());
    for (auto& v : x) v = (T)(r.f() - 0.5);
    std::vector<u32> rowidx(nnz);
    for (u32 row = 0; row < n; ++row) for (u32 k = a.ptr[row]; k < a.ptr[row + 1]; ++k) rowidx[k] = row;
    std::vector<double> ref(n), mag(n);
    for (u32 row = 0; row < n; ++row) { double s = 0, m = 0; for (u32 k = a.ptr[row]; k < a.ptr[row + 1]; ++k) { s += (double)val[k] * x[a.col[k]]; m += std::abs((double)val[k] * x[a.col[k]]); } ref[row] = s; mag[row] = m; }
    const double bytes = (double)nnz * (4 + sizeof(T)) + (n + 1) * 4.0 + 2.0 * n * sizeof(T);
    const char* tn = sizeof(T) == 8 ? "f64" : "f32";
    const u32 maxhub = 262144;
    u32 *d_ptr, *d_row, *d_col, *d_col2, *d_hubs;
    T *d_val, *d_val2, *d_x, *d_xe, *d_y;
    CK(cudaMalloc(&d_ptr, (n + 1) * 4)); CK(cudaMalloc(&d_row, nnz * 4)); CK(cudaMalloc(&d_col, nnz * 4)); CK(cudaMalloc(&d_col2, nnz * 4));
    CK(cudaMalloc(&d_hubs, std::max(maxhub, n) * 4));
    CK(cudaMalloc(&d_val, nnz * sizeof(T))); CK(cudaMalloc(&d_val2, nnz * sizeof(T)));
    CK(cudaMalloc(&d_x, n * sizeof(T))); CK(cudaMalloc(&d_xe, (n + maxhub) * sizeof(T))); CK(cudaMalloc(&d_y, n * sizeof(T)));
    CK(cudaMemcpy(d_ptr, a.ptr.data(), (n + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_row, rowidx.data(), nnz * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_col, a.col.data(), nnz * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_val, val.data(), nnz * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_x, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    auto time = [&](auto&& f) {
        for (int i = 0; i < 20; ++i) f();
        std::vector<float> ts;
        for (int rep = 0; rep < 9; ++rep) {
            cudaEventRecord(e0); for (int i = 0; i < 30; ++i) f(); cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms / 30);
        }
        std::sort(ts.begin(), ts.end()); CK(cudaGetLastError()); return ts[4] * 1000.0;
    };
    auto check = [&]() {
        std::vector<T> y(n); CK(cudaMemcpy(y.data(), d_y, n * sizeof(T), cudaMemcpyDeviceToHost));
        double worst = 0, eps = sizeof(T) == 8 ? 1.1e-16 : 6e-8;
        for (u32 i = 0; i < n; ++i) if (mag[i] > 0) worst = std::max(worst, std::abs(y[i] - ref[i]) / (mag[i] * eps * (a.ptr[i + 1] - a.ptr[i] + 2)));
        return worst;
    };
    cusparseHandle_t h; CS(cusparseCreate(&h));
    T one = 1, zero = 0;
    void* buf = nullptr; size_t bufsize = 0;
    // One SpMV: `coo` picks the COO or CSR descriptor; cols columns; x the vector read.
    auto spmv_time = [&](bool coo, u32 cols, const u32* col, const T* v, T* xx, auto&& before) {
        cusparseSpMatDescr_t A; cusparseDnVecDescr_t X, Y;
        if (coo) CS(cusparseCreateCoo(&A, n, cols, nnz, d_row, (void*)col, (void*)v, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, dt<T>()));
        else CS(cusparseCreateCsr(&A, n, cols, nnz, d_ptr, (void*)col, (void*)v, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, dt<T>()));
        CS(cusparseCreateDnVec(&X, cols, xx, dt<T>())); CS(cusparseCreateDnVec(&Y, n, d_y, dt<T>()));
        auto alg = coo ? CUSPARSE_SPMV_COO_ALG1 : CUSPARSE_SPMV_CSR_ALG1;
        size_t ws = 0; CS(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), alg, &ws));
        if (ws > bufsize) { if (buf) cudaFree(buf); CK(cudaMalloc(&buf, ws)); bufsize = ws; }
        CS(cusparseSpMV_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), alg, buf));
        double alone = time([&] { cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), alg, buf); });
        double with = time([&] { before(); cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, X, &zero, Y, dt<T>(), alg, buf); });
        double err = check();
        cusparseDestroySpMat(A); cusparseDestroyDnVec(X); cusparseDestroyDnVec(Y);
        return std::vector<double>{alone, with, err};
    };
    auto nothing = [] {};
    double best = 1e30;
    for (bool coo : {true, false}) {
        auto t = spmv_time(coo, n, d_col, d_val, d_x, nothing);
        best = std::min(best, t[0]);
        printf("%s %s %s orig: %.1f us (%.3f of copy) err %.3f\n", name, tn, coo ? "coo" : "csr", t[0], bytes / (t[0] * 1e3) / copy_gbs, t[2]);
    }
    for (u32 hub : {2048u, 8192u, 32768u, 131072u, 262144u}) {
        if (hub >= n / 2) continue;
        u64 covered = 0; for (u32 i = 0; i < hub; ++i) covered += sorted[i];
        Relabel rl = relabel(a, hub, deg);
        std::vector<T> v2(nnz); for (u32 k = 0; k < nnz; ++k) v2[k] = val[rl.perm_in_row[k]];
        CK(cudaMemcpy(d_col2, rl.col.data(), nnz * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_val2, v2.data(), nnz * sizeof(T), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_hubs, rl.hubs.data(), hub * 4, cudaMemcpyHostToDevice));
        auto ext = [&] { extend<T><<<1024, 256>>>(hub, n, d_hubs, d_x, d_xe); };
        ext(); CK(cudaDeviceSynchronize());
        double ext_us = time(ext);
        for (bool coo : {true, false}) {
            auto t = spmv_time(coo, n + hub, d_col2, d_val2, d_xe, ext);
            printf("%s %s %s hub %u (%.1f%% of entries, min degree %u): alone %.1f us, with extension %.1f us (extension %.1f) = %.3fx cuSPARSE's best orig, err %.3f\n", name, tn, coo ? "coo" : "csr", hub, 100.0 * covered / nnz, sorted[hub - 1], t[0], t[1], ext_us, best / t[1], t[2]);
        }
    }
    // Every column by falling degree, x permuted on each call.
    {
        std::vector<u32> order(n); std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](u32 p, u32 q) { return deg[p] > deg[q]; });
        std::vector<u32> rank(n); for (u32 i = 0; i < n; ++i) rank[order[i]] = i;
        std::vector<u32> c2(nnz); std::vector<T> v2(nnz);
        for (u32 row = 0; row < n; ++row) {
            std::vector<std::pair<u32, u32>> e;
            for (u32 k = a.ptr[row]; k < a.ptr[row + 1]; ++k) e.push_back({rank[a.col[k]], k});
            std::sort(e.begin(), e.end());
            for (u32 i = 0; i < e.size(); ++i) { c2[a.ptr[row] + i] = e[i].first; v2[a.ptr[row] + i] = val[e[i].second]; }
        }
        CK(cudaMemcpy(d_col2, c2.data(), nnz * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_val2, v2.data(), nnz * sizeof(T), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d_hubs, order.data(), n * 4, cudaMemcpyHostToDevice));
        auto perm = [&] { permute<T><<<1024, 256>>>(n, d_hubs, d_x, d_xe); };
        perm(); CK(cudaDeviceSynchronize());
        double perm_us = time(perm);
        for (bool coo : {true, false}) {
            auto t = spmv_time(coo, n, d_col2, d_val2, d_xe, perm);
            printf("%s %s %s all by degree: alone %.1f us, with permutation %.1f us (permutation %.1f) = %.3fx cuSPARSE's best orig, err %.3f\n", name, tn, coo ? "coo" : "csr", t[0], t[1], perm_us, best / t[1], t[2]);
        }
    }
    cusparseDestroy(h); cudaFree(buf);
    cudaFree(d_ptr); cudaFree(d_row); cudaFree(d_col); cudaFree(d_col2); cudaFree(d_hubs); cudaFree(d_val); cudaFree(d_val2); cudaFree(d_x); cudaFree(d_xe); cudaFree(d_y);
}

int main(int argc, char** argv) {
    const char* kind = argv[1]; int scale = atoi(argv[2]), ef = atoi(argv[3]);
    Csr a = kind[0] == 'r' ? rmat(scale, ef, 42) : uniform(scale, ef, 42);
    char name[64]; snprintf(name, sizeof name, "%s-2^%d-x%d", kind, scale, ef);
    printf("%s: nnz %zu\n", name, a.col.size());
    size_t cb = 1ull << 30; void *p, *q; CK(cudaMalloc(&p, cb)); CK(cudaMalloc(&q, cb));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int i = 0; i < 3; ++i) cudaMemcpy(q, p, cb, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0); for (int i = 0; i < 10; ++i) cudaMemcpy(q, p, cb, cudaMemcpyDeviceToDevice); cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); double copy = 2.0 * cb * 10 / (ms * 1e6);
    printf("copy %.1f GB/s\n", copy); cudaFree(p); cudaFree(q);
    run<double>(name, a, copy);
    run<float>(name, a, copy);
    return 0;
}
