// What every plan launches beside its family's kernels: the output of alpha == 0, and value
// updates. Parameters: ScaleDense<T>, ScatterValues<T> (src/plan.rs).

// out = beta*out over `outer` runs of `inner` contiguous elements, `ld` apart, never reading
// `out` when beta == 0. A grid-stride loop, so any shape fits any grid.
template <typename T>
__global__ void __launch_bounds__(PLAN_BLOCK) scale_dense(const ScaleDense<T> p) {
    typedef typename acc_of<T>::type A;
    const u64 total = (u64)p.inner * p.outer;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (u64)gridDim.x * blockDim.x)
        update(p.out + i / p.inner * p.ld + i % p.inner, A(0), A(0), p.beta);
}

// dst[slot] = src[e * inc] for each entry e < n, its slot slots[e] (or e when slots is null):
// new values in CSR entry order moved into a plan's own order.
template <typename T>
__global__ void __launch_bounds__(PLAN_BLOCK) scatter_values(const ScatterValues<T> p) {
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < p.n; e += (u64)gridDim.x * blockDim.x)
        p.dst[p.slots ? p.slots[e] : e] = p.src[e * p.inc];
}
