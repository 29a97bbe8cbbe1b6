// Vector operations of the iterative solvers, with scalars in device memory (src/vector_ops.rs).
//
// Coefficients are read from the scalar workspace s (doubles) by every thread, as
// ±(s[n0]/s[d0])·(s[n1]/s[d1]) with VEC_ONE standing for 1 and a zero denominator giving 0,
// evaluated in double in the order the host's Coef::eval uses, then rounded to the
// accumulation type. Reductions write one partial per block of a fixed grid (two sets of
// VEC_PARTIALS when a pass forms two sums), and vec_finish, one block, adds them in a fixed
// order into slots of s: no atomics, results depend on n alone.
// Parameters: Ratios, VecMap<T>, VecConvert<T>, VecDots<T>, VecCgUpdate<T>, VecScaleDots<T>,
// VecFinish<T>.

__device__ __forceinline__ double vec_slot(const double* s, u32 k) { return k == VEC_ONE ? 1.0 : s[k]; }

__device__ __forceinline__ double vec_ratio(const double* s, u32 n, u32 d) {
    const double den = vec_slot(s, d);
    return den == 0.0 ? 0.0 : vec_slot(s, n) / den;
}

__device__ __forceinline__ double vec_coef(const Ratios c, const double* s) {
    double v = 1.0;
    v *= vec_ratio(s, c.n0, c.d0);
    v *= vec_ratio(s, c.n1, c.d1);
    return c.negative ? -v : v;
}

// One pass over y: y = x (COPY), y += c*x (AXPY), y = x + c*y (XPBY), y = d ∘ x (SCALE).
template <typename T, u32 MODE>
__global__ void __launch_bounds__(BLAS1_BLOCK) vec_map(const VecMap<T> p) {
    typedef typename acc_of<T>::type A;
    const A c = (MODE == VEC_AXPY || MODE == VEC_XPBY) ? A(vec_coef(p.c, p.s)) : A(0);
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x) {
        T* yi = p.y + i * p.incy;
        const T xi = load(p.x + i * p.incx);
        if (MODE == VEC_COPY) {
            *yi = xi;
        } else if (MODE == VEC_AXPY) {
            *yi = from_acc<T>(to_acc(*yi) + c * to_acc(xi));
        } else if (MODE == VEC_XPBY) {
            *yi = from_acc<T>(to_acc(xi) + c * to_acc(*yi));
        } else {
            *yi = from_acc<T>(to_acc(load(p.d + i * p.incd)) * to_acc(xi));
        }
    }
}

// y = x rounded to T, from x of type S.
template <typename S, typename T>
__global__ void __launch_bounds__(BLAS1_BLOCK) vec_convert(const VecConvert<T> p) {
    const S* x = reinterpret_cast<const S*>(p.x);
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x)
        p.y[i * p.incy] = (T)load(x + i * p.incx);
}

// Writes the block's sums of v0 (and v1 when TWO) to its partials. Every thread must call it.
template <bool TWO, typename A>
__device__ __forceinline__ void vec_block_partials(A v0, A v1, A* partial) {
    v0 = block_sum(v0);
    if (threadIdx.x == 0) partial[blockIdx.x] = v0;
    if (TWO) {
        // block_sum's shared sums are reused: the first sum must be read out before the second
        // is written.
        __syncthreads();
        v1 = block_sum(v1);
        if (threadIdx.x == 0) partial[VEC_PARTIALS + blockIdx.x] = v1;
    }
}

// Partials of x·y (and x·z when TWO).
template <typename T, bool TWO>
__global__ void __launch_bounds__(BLAS1_BLOCK) vec_dots(const VecDots<T> p) {
    typedef typename acc_of<T>::type A;
    A xy = 0, xz = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x) {
        const A xi = to_acc(load(p.x + i * p.incx));
        xy += xi * to_acc(load(p.y + i * p.incy));
        if (TWO) xz += xi * to_acc(load(p.z + i * p.incz));
    }
    vec_block_partials<TWO>(xy, xz, p.partial);
}

// x += c*p and r -= c*q in one pass, with the partials of the new r·r when NORM.
template <typename T, bool NORM>
__global__ void __launch_bounds__(BLAS1_BLOCK) vec_cg_update(const VecCgUpdate<T> p) {
    typedef typename acc_of<T>::type A;
    const A c = A(vec_coef(p.c, p.s));
    A rr = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x) {
        T* xi = p.x + i * p.incx;
        T* ri = p.r + i * p.incr;
        *xi = from_acc<T>(to_acc(*xi) + c * to_acc(load(p.p + i * p.incp)));
        const T r = from_acc<T>(to_acc(*ri) - c * to_acc(load(p.q + i * p.incq)));
        *ri = r;
        if (NORM) rr += to_acc(r) * to_acc(r);
    }
    if (NORM) vec_block_partials<false>(rr, rr, p.partial);
}

// z = d ∘ r in one pass, with the partials of r·z and r·r.
template <typename T>
__global__ void __launch_bounds__(BLAS1_BLOCK) vec_scale_dots(const VecScaleDots<T> p) {
    typedef typename acc_of<T>::type A;
    A rz = 0, rr = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x) {
        const A r = to_acc(load(p.r + i * p.incr));
        const T z = from_acc<T>(to_acc(load(p.d + i * p.incd)) * r);
        p.z[i * p.incz] = z;
        rz += r * to_acc(z);
        rr += r * r;
    }
    vec_block_partials<true>(rz, rr, p.partial);
}

// s[k0] = the sum of the first set of partials (and s[k1] of the second when TWO), by one block.
template <typename T, bool TWO>
__global__ void __launch_bounds__(BLAS1_BLOCK) vec_finish(const VecFinish<T> p) {
    typedef typename acc_of<T>::type A;
    A v0 = 0, v1 = 0;
    for (u32 i = threadIdx.x; i < p.count; i += blockDim.x) {
        v0 += p.partial[i];
        if (TWO) v1 += p.partial[VEC_PARTIALS + i];
    }
    v0 = block_sum(v0);
    if (threadIdx.x == 0) p.s[p.k0] = (double)v0;
    if (TWO) {
        __syncthreads();
        v1 = block_sum(v1);
        if (threadIdx.x == 0) p.s[p.k1] = (double)v1;
    }
}
