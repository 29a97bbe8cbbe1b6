// BLAS-1 on strided device vectors: dot, nrm2 (its sum of squares), axpy, scal.
//
// Reductions take two passes with no atomics, so a result depends only on n and the launch
// shape the host derives from n: pass 1 has each block reduce a grid-strided share of the
// products into partial[block]; pass 2 is one block summing the partials into partial[0].
// Sums run in the accumulation type (f32 for f16 and f32, f64 for f64).

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

// partial[block] = the block's share of sum(x[i]*y[i]), or of sum(x[i]^2) when SQUARE (y unused).
template <typename T, bool SQUARE>
__device__ void reduce_partial(u32 n, const T* x, u32 incx, const T* y, u32 incy, typename acc_of<T>::type* partial) {
    typedef typename acc_of<T>::type A;
    A sum = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const A xi = to_acc(load(x + i * incx));
        sum += xi * (SQUARE ? xi : to_acc(load(y + i * incy)));
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// partial[0] = sum of partial[0 .. count), by one block. Every read precedes block_sum's barrier
// and the write follows it, so the result may overwrite the first partial.
template <typename A>
__device__ void sum_partials(u32 count, A* partial) {
    A sum = 0;
    for (u32 i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0) partial[0] = sum;
}

// y += a*x.
template <typename T>
__device__ void axpy(u32 n, typename acc_of<T>::type a, const T* x, u32 incx, T* y, u32 incy) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        T* yi = y + i * incy;
        *yi = from_acc<T>(to_acc(*yi) + a * to_acc(load(x + i * incx)));
    }
}

// x = a*x; a == 0 writes zeros without reading x, as beta == 0 does everywhere in the library.
template <typename T>
__device__ void scal(u32 n, typename acc_of<T>::type a, T* x, u32 incx) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        update(x + i * incx, typename acc_of<T>::type(0), typename acc_of<T>::type(0), a);
}

#define INSTANTIATE(NAME, T)                                                                                            \
    extern "C" __global__ void dot_partial_##NAME(u32 n, const T *x, u32 incx, const T *y, u32 incy,                    \
                                                  acc_of<T>::type *partial) {                                           \
        reduce_partial<T, false>(n, x, incx, y, incy, partial);                                                         \
    }                                                                                                                   \
    extern "C" __global__ void nrm2_partial_##NAME(u32 n, const T *x, u32 incx, acc_of<T>::type *partial) {             \
        reduce_partial<T, true>(n, x, incx, x, incx, partial);                                                          \
    }                                                                                                                   \
    extern "C" __global__ void sum_partials_##NAME(u32 count, acc_of<T>::type *partial) {                               \
        sum_partials(count, partial);                                                                                   \
    }                                                                                                                   \
    extern "C" __global__ void axpy_##NAME(u32 n, acc_of<T>::type a, const T *x, u32 incx, T *y, u32 incy) {            \
        axpy<T>(n, a, x, incx, y, incy);                                                                                \
    }                                                                                                                   \
    extern "C" __global__ void scal_##NAME(u32 n, acc_of<T>::type a, T *x, u32 incx) { scal<T>(n, a, x, incx); }

FOR_EACH_FLOAT(INSTANTIATE)
