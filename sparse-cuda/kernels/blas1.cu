// BLAS-1 on strided device vectors: dot, nrm2 (its sum of squares), axpy, scal.
//
// Reductions take two passes with no atomics, so a result depends only on n and the launch
// shape the host derives from n: pass 1 has each block reduce a grid-strided share of the
// products into partial[block]; pass 2 is one block summing the partials into partial[0].
// Sums run in the accumulation type (f32 for f16 and f32, f64 for f64). Parameters: Reduce<T>,
// SumPartials<T>, Axpy<T>, Scal<T> (src/blas1.rs).

// partial[block] = the block's share of sum(x[i]*y[i]), or of sum(x[i]^2) when SQUARE (y unused).
template <typename T, bool SQUARE>
__global__ void __launch_bounds__(BLAS1_BLOCK) reduce_partial(const Reduce<T> p) {
    typedef typename acc_of<T>::type A;
    A sum = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x) {
        const A xi = to_acc(load(p.x + i * p.incx));
        sum += xi * (SQUARE ? xi : to_acc(load(p.y + i * p.incy)));
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) p.partial[blockIdx.x] = sum;
}

// partial[0] = sum of partial[0 .. count), by one block. Every read precedes block_sum's barrier
// and the write follows it, so the result may overwrite the first partial.
template <typename T>
__global__ void __launch_bounds__(BLAS1_BLOCK) sum_partials(const SumPartials<T> p) {
    typename acc_of<T>::type sum = 0;
    for (u32 i = threadIdx.x; i < p.count; i += blockDim.x) sum += p.partial[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0) p.partial[0] = sum;
}

// y += a*x.
template <typename T>
__global__ void __launch_bounds__(BLAS1_BLOCK) axpy(const Axpy<T> p) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x) {
        T* yi = p.y + i * p.incy;
        *yi = from_acc<T>(to_acc(*yi) + p.a * to_acc(load(p.x + i * p.incx)));
    }
}

// x = a*x; a == 0 writes zeros without reading x, as beta == 0 does everywhere in the library.
template <typename T>
__global__ void __launch_bounds__(BLAS1_BLOCK) scal(const Scal<T> p) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x)
        update(p.x + i * p.incx, typename acc_of<T>::type(0), typename acc_of<T>::type(0), p.a);
}
