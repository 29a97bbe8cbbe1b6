// Shared by every kernel file: storage types, conversions to the accumulation type, loads.
// No CUDA headers are needed: f16 is a 16-bit storage type converted with PTX cvt, so kernels
// compile with NVRTC alone.

typedef unsigned int u32;
typedef unsigned long long u64;

// Whether two types are the same: the compiled checks after every kernel file assert that the
// entry takes the parameter struct Rust passes.
template <typename A, typename B> struct sparse_same { static const bool value = false; };
template <typename A> struct sparse_same<A, A> { static const bool value = true; };

// IEEE binary16 storage; arithmetic happens in f32.
struct half_t {
    unsigned short bits;
};

// bfloat16 storage: the high half of an f32; arithmetic happens in f32.
struct bf16_t {
    unsigned short bits;
};

template <typename T> struct acc_of;
template <> struct acc_of<float> { typedef float type; };
template <> struct acc_of<double> { typedef double type; };
template <> struct acc_of<half_t> { typedef float type; };
template <> struct acc_of<bf16_t> { typedef float type; };
// i8 and i16 products are summed exactly in i32, the type their results are stored in.
template <> struct acc_of<signed char> { typedef int type; };
template <> struct acc_of<short> { typedef int type; };
template <> struct acc_of<int> { typedef int type; };

// The type results of storage type T are stored in: T, but i32 for i8 and i16.
template <typename T> struct out_of { typedef T type; };
template <> struct out_of<signed char> { typedef int type; };
template <> struct out_of<short> { typedef int type; };

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ int to_acc(int v) { return v; }
__device__ __forceinline__ int to_acc(signed char v) { return v; }
__device__ __forceinline__ int to_acc(short v) { return v; }
__device__ __forceinline__ float to_acc(half_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}

__device__ __forceinline__ float to_acc(bf16_t h) { return __uint_as_float((u32)h.bits << 16); }

template <typename T> __device__ __forceinline__ T from_acc(typename acc_of<T>::type v);
template <> __device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_acc<double>(double v) { return v; }
template <> __device__ __forceinline__ int from_acc<int>(int v) { return v; }
template <> __device__ __forceinline__ half_t from_acc<half_t>(float v) {
    half_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));
    return h;
}

template <> __device__ __forceinline__ bf16_t from_acc<bf16_t>(float v) {
    bf16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));
    return h;
}

// Read-only loads through the non-coherent cache.
__device__ __forceinline__ float load(const float* p) { return __ldg(p); }
__device__ __forceinline__ double load(const double* p) { return __ldg(p); }
__device__ __forceinline__ u32 load(const u32* p) { return __ldg(p); }
__device__ __forceinline__ half_t load(const half_t* p) {
    half_t h;
    h.bits = __ldg(reinterpret_cast<const unsigned short*>(p));
    return h;
}
__device__ __forceinline__ bf16_t load(const bf16_t* p) {
    bf16_t h;
    h.bits = __ldg(reinterpret_cast<const unsigned short*>(p));
    return h;
}

// out = alpha*sum + beta*out; out is not read when beta == 0 (it may hold NaN).
template <typename T>
__device__ __forceinline__ void update(T* out, typename acc_of<T>::type alpha, typename acc_of<T>::type sum,
                                       typename acc_of<T>::type beta) {
    typename acc_of<T>::type r = alpha * sum;
    if (beta != 0) r += beta * to_acc(*out);
    *out = from_acc<T>(r);
}
// i32 results wrap on overflow, as the oracle's do (signed overflow would be undefined in C++).
template <>
__device__ __forceinline__ void update<int>(int* out, int alpha, int sum, int beta) {
    u32 r = (u32)alpha * (u32)sum;
    if (beta != 0) r += (u32)beta * (u32)*out;
    *out = (int)r;
}

// Sum over the W lanes of a sub-warp (W a power of two up to 32); lane 0 holds the total.
template <int W, typename A>
__device__ __forceinline__ A subwarp_sum(A v) {
#pragma unroll
    for (int offset = W / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset, W);
    return v;
}

// Sum over the block (whose size is a multiple of 32); thread 0 holds the total. Every thread
// of the block must call it.
template <typename A>
__device__ __forceinline__ A block_sum(A v) {
    __shared__ A warp_sums[32];
    const u32 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = subwarp_sum<32>(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_sums[lane] : A(0);
        v = subwarp_sum<32>(v);
    }
    return v;
}

// Sub-warp helpers and vector loads shared by the SpMM and SDDMM kernels.

// The lanes of this thread's sub-warp of W lanes, for shuffles inside loops whose trip counts
// differ between the sub-warps of a warp.
template <int W>
__device__ __forceinline__ unsigned subwarp_mask() {
    return W == 32 ? 0xffffffffu : ((1u << W) - 1) << (threadIdx.x % 32 / W * W);
}

// A sub-warp of W lanes per item of the grid (a row, a segment) whose entries are
// offsets[item] .. offsets[item + 1]: the item, this thread's lane, the mask of the sub-warp's
// lanes, and the entries.
template <int W>
struct SubwarpItem {
    u64 item;
    u32 lane, begin, end;
    unsigned mask;
};

// This thread's sub-warp among `items`; false past them. The whole sub-warp leaves together, so
// its shuffles name only its own lanes.
template <int W>
__device__ __forceinline__ bool subwarp_item(u32 items, const u32* offsets, SubwarpItem<W>* s) {
    s->item = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / W;
    if (s->item >= items) return false;
    s->mask = subwarp_mask<W>();
    s->lane = threadIdx.x % W;
    s->begin = load(offsets + s->item);
    s->end = load(offsets + s->item + 1);
    return true;
}

// Sum over the W lanes of a sub-warp, left in every lane (a butterfly, so any lane can store it).
template <int W, typename A>
__device__ __forceinline__ A subwarp_allsum(unsigned mask, A v) {
#pragma unroll
    for (int offset = W / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(mask, v, offset, W);
    return v;
}

// The widest load type for V consecutive elements of T, up to 16 bytes (several of them for
// longer runs).
template <typename T, int V> struct vec;
template <> struct vec<float, 1> { typedef float type; };
template <> struct vec<float, 2> { typedef float2 type; };
template <> struct vec<float, 4> { typedef float4 type; };
template <> struct vec<double, 1> { typedef double type; };
template <> struct vec<double, 2> { typedef double2 type; };
template <> struct vec<double, 4> { typedef double2 type; };
template <> struct vec<half_t, 1> { typedef unsigned short type; };
template <> struct vec<half_t, 2> { typedef unsigned int type; };
template <> struct vec<half_t, 4> { typedef uint2 type; };
template <> struct vec<half_t, 8> { typedef uint4 type; };
template <> struct vec<half_t, 16> { typedef uint4 type; };
template <> struct vec<float, 8> { typedef float4 type; };
template <> struct vec<float, 16> { typedef float4 type; };

// V elements of T as the vector loads that carry them.
template <typename T, int V> union span {
    typedef typename vec<T, V>::type raw_t;
    static const int PARTS = V * sizeof(T) / sizeof(raw_t);
    raw_t raw[PARTS];
    T v[V];
};

// Asynchronous copies to shared memory (sm_80+). cp_async starts a copy of BYTES (4, 8 or 16;
// both addresses aligned to it): the first `bytes` (<= BYTES) of global_src are read and the rest
// of shared_dst is zero-filled; nothing is read past them.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* shared_dst, const void* global_src, u32 bytes) {
    const u32 dst = (u32)__cvta_generic_to_shared(shared_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(global_src), "n"(BYTES), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Loads that stay in flight: predicated in PTX, into registers the caller zeroed. A plain `if`
// around a load, or a choice between a vector and an element-wise load, compiles to a branch
// whose sides move their results into shared registers where they join, and that move waits for
// the load: a thread would then have one load in flight at a time. With these, nothing touches
// the loaded registers until their first real use.
__device__ __forceinline__ void ld_nc_pred(u32& w, const void* p, bool ok) {
    asm("{.reg .pred q; setp.ne.b32 q, %2, 0; @q ld.global.nc.b32 %0, [%1];}" : "+r"(w) : "l"(p), "r"((u32)ok));
}
__device__ __forceinline__ void ld_nc_pred(u32 (&w)[1], const void* p, bool ok) { ld_nc_pred(w[0], p, ok); }
__device__ __forceinline__ void ld_nc_pred(u32 (&w)[2], const void* p, bool ok) {
    asm("{.reg .pred q; setp.ne.b32 q, %3, 0; @q ld.global.nc.v2.b32 {%0, %1}, [%2];}"
        : "+r"(w[0]), "+r"(w[1])
        : "l"(p), "r"((u32)ok));
}
__device__ __forceinline__ void ld_nc_pred(u32 (&w)[4], const void* p, bool ok) {
    asm("{.reg .pred q; setp.ne.b32 q, %5, 0; @q ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];}"
        : "+r"(w[0]), "+r"(w[1]), "+r"(w[2]), "+r"(w[3])
        : "l"(p), "r"((u32)ok));
}
__device__ __forceinline__ void ld_nc_pred(u32 (&w)[8], const void* p, bool ok) {
    ld_nc_pred(*reinterpret_cast<u32(*)[4]>(&w[0]), p, ok);
    ld_nc_pred(*reinterpret_cast<u32(*)[4]>(&w[4]), static_cast<const char*>(p) + 16, ok);
}
// Two bytes, zero-extended.
__device__ __forceinline__ void ld_nc_pred_u16(u32& w, const void* p, bool ok) {
    asm("{.reg .pred q; .reg .b16 h; setp.ne.b32 q, %2, 0; @q ld.global.nc.b16 h, [%1]; @q cvt.u32.u16 %0, h;}"
        : "+r"(w)
        : "l"(p), "r"((u32)ok));
}

// The bits of one element, zero-extended.
__device__ __forceinline__ u32 raw_bits(const float* p) { return __float_as_uint(__ldg(p)); }
__device__ __forceinline__ u32 raw_bits(const signed char* p) { return (unsigned char)__ldg(p); }
__device__ __forceinline__ u32 raw_bits(const half_t* p) { return load(p).bits; }
__device__ __forceinline__ u32 raw_bits(const bf16_t* p) { return load(p).bits; }

// N elements of a row from element `first`, elements `cs` apart, as words (element i in bytes
// i*sizeof(T) .. of the run); elements at or past `len` read as 0. One vector access when `vec`
// (contiguous, the run aligned: the host checks the leading dimension and the address) and the
// run is whole; element by element at the ragged end of a row or for strided rows.
template <typename T, int N>
__device__ __forceinline__ void load_run(const T* row, u32 first, u32 len, u32 cs, bool vec,
                                         u32 (&w)[N * sizeof(T) / 4]) {
    const int PER_WORD = 4 / sizeof(T);
#pragma unroll
    for (int i = 0; i < N * (int)sizeof(T) / 4; ++i) w[i] = 0;
    if (vec && first + N <= len) {
        ld_nc_pred(w, row + first, true);
    } else {
#pragma unroll
        for (int b = 0; b < N; ++b)
            if (first + b < len) w[b / PER_WORD] |= raw_bits(row + (u64)(first + b) * cs) << (8 * sizeof(T) * (b % PER_WORD));
    }
}

// V consecutive elements at p as accumulation values when `ok`, else zeros: one predicated
// access of the whole span, which must be aligned to it (the host picks V > 1 only for
// contiguous rows whose leading dimension V divides).
template <typename T, int V>
__device__ __forceinline__ void load_whole(const T* p, bool ok, typename acc_of<T>::type (&out)[V]) {
    const int BYTES = V * sizeof(T), WORDS = BYTES < 4 ? 1 : BYTES / 4;
    union {
        u32 w[WORDS];
        T v[V];
    } s;
#pragma unroll
    for (int i = 0; i < WORDS; ++i) s.w[i] = 0;
    if constexpr (BYTES == 2) ld_nc_pred_u16(s.w[0], p, ok);
    else ld_nc_pred(s.w, p, ok);
#pragma unroll
    for (int t = 0; t < V; ++t) out[t] = to_acc(s.v[t]);
}

// V consecutive elements at p as accumulation values, the first `count` of them read and the
// rest zero. A full span is one vector access: the host picks V > 1 only for contiguous rows
// whose leading dimension V divides, so full spans are aligned. A partial span, the end of a row
// whose length V does not divide, is read element by element.
template <typename T, int V>
__device__ __forceinline__ void load_first(const T* p, u32 count, typename acc_of<T>::type (&out)[V]) {
    typedef typename span<T, V>::raw_t raw_t;
    if (count >= V) {
        span<T, V> s;
#pragma unroll
        for (int i = 0; i < span<T, V>::PARTS; ++i) s.raw[i] = __ldg(reinterpret_cast<const raw_t*>(p) + i);
#pragma unroll
        for (int t = 0; t < V; ++t) out[t] = to_acc(s.v[t]);
    } else {
#pragma unroll
        for (int t = 0; t < V; ++t) out[t] = t < (int)count ? to_acc(load(p + t)) : typename acc_of<T>::type(0);
    }
}

// V consecutive elements at p, or zeros when !in_range, for rows whose length V divides (so a
// span is entirely inside or outside the row).
template <typename T, int V>
__device__ __forceinline__ void load_span(const T* p, bool in_range, typename acc_of<T>::type (&out)[V]) {
    load_first<T, V>(p, in_range ? V : 0, out);
}

// p[t*stride] = alpha*sum[t] + beta*p[t*stride] for t < count <= V, p not read when beta == 0.
// One vector access each way when `vector` (contiguous and V-aligned) and the span is full.
template <typename T, int V>
__device__ __forceinline__ void update_span(T* p, u32 stride, bool vector, u32 count, typename acc_of<T>::type alpha,
                                            const typename acc_of<T>::type (&sum)[V], typename acc_of<T>::type beta) {
    if (V > 1 && vector && count >= V) {
        typedef typename span<T, V>::raw_t raw_t;
        raw_t* dst = reinterpret_cast<raw_t*>(p);
        span<T, V> s;
        if (beta != 0) {
#pragma unroll
            for (int i = 0; i < span<T, V>::PARTS; ++i) s.raw[i] = dst[i];
        }
#pragma unroll
        for (int t = 0; t < V; ++t) {
            typename acc_of<T>::type r = alpha * sum[t];
            if (beta != 0) r += beta * to_acc(s.v[t]);
            s.v[t] = from_acc<T>(r);
        }
#pragma unroll
        for (int i = 0; i < span<T, V>::PARTS; ++i) dst[i] = s.raw[i];
    } else {
#pragma unroll
        for (int t = 0; t < V; ++t)
            if (t < (int)count) update(p + (u64)t * stride, alpha, sum[t], beta);
    }
}
