//! Every kernel instantiation Rust can ask for compiles with NVRTC to machine code for sm_80
//! and sm_90, its entry takes the parameter struct Rust passes (the compiled checks), and the
//! PTX of each file holds the instructions its kernels are built around. Needs only libnvrtc
//! (CI installs the `nvidia-cuda-nvrtc` wheel); when NVRTC is absent the test says so and
//! passes, unless `SPARSE_REQUIRE_NVRTC=1`.

use std::collections::BTreeMap;

use sparse_cuda::compile::{compile_all, Target};
use sparse_cuda::every_kernel;

/// (kernel file, instructions the PTX of its kernels must contain, together)
const EXPECTED: &[(&str, &[&str])] = &[
    ("plan", &["st.global", "ld.global"]),
    (
        "spmv",
        &[
            "shfl.sync.down",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
            "ld.global.nc",
            "atom.global.add.f64",
        ],
    ),
    (
        "ell",
        &[
            // coalesced slot loads; HYB's overflow rows reduced across a warp
            "ld.global.nc.u32",
            "shfl.sync.down",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
        ],
    ),
    (
        "bsr",
        &[
            // chunks of a block row read by one vector load
            "ld.global.nc.v4.b32",
            "shfl.sync.down",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
        ],
    ),
    (
        "spmm",
        &[
            // (column, value) pairs broadcast from the lane that loaded them
            "shfl.sync.idx",
            // column-major partial sums reduced by a butterfly
            "shfl.sync.bfly",
            // vector loads of B rows and vector updates of C rows
            "ld.global.nc.v4.f32",
            "ld.global.nc.v2.f64",
            "ld.global.nc.v2.u32",
            "st.global.v4.f32",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
        ],
    ),
    (
        "sddmm",
        &[
            "shfl.sync.idx",
            "shfl.sync.bfly",
            "ld.global.nc.v4.f32",
            "ld.global.nc.v2.f64",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
        ],
    ),
    (
        "rode",
        &[
            // sparse tiles staged in shared memory by asynchronous copies, one tile ahead
            "cp.async.ca.shared.global",
            "cp.async.commit_group",
            "cp.async.wait_group 1",
            "cp.async.wait_group 0",
            // segments of one row combined by atomics (`rode`)
            "atom.global.add.f32",
            "atom.global.add.f64",
            // ... or by the last segment to arrive, counted with an integer atomic after a fence
            "atom.global.add.u32",
            "membar.gl",
            "ld.global.cg.f32",
            // SDDMM's scatter reduction, and the preprocessing scans
            "shfl.sync.bfly",
            "shfl.sync.up",
            "bar.sync",
            // whole spans of B rows as predicated loads (several in flight per thread)
            "@q ld.global.nc.v4.b32",
            "ld.global.nc.v4.f32",
            "ld.global.nc.v2.f64",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
        ],
    ),
    (
        "blas1",
        &[
            // block reduction: warp shuffles, then one warp over the per-warp sums
            "shfl.sync.down",
            "bar.sync",
            "cvt.f32.f16",
        ],
    ),
    (
        "vector_ops",
        &[
            // reductions into the scalar workspace, the f64/f32 conversions, no atomics
            "shfl.sync.down",
            "bar.sync",
            "cvt.rn.f32.f64",
            "cvt.f64.f32",
            "div.rn.f64",
        ],
    ),
    (
        "flashsparse",
        &[
            // the tensor-core MMAs: f16 inputs and tf32 inputs, both accumulating in f32
            "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
            "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32",
            "cvt.rna.tf32.f32",
            // runs of adjacent X and Y elements (16 bytes a lane) and of C, the loads
            // predicated rather than branched around, so they stay in flight
            "@q ld.global.nc.v4.b32",
            "st.global.v2.f32",
            "st.global.v4.f32",
            // the device builder's scans
            "shfl.sync.up",
            // the SpMM pipeline: B runs and values copied to shared memory asynchronously
            "cp.async.ca.shared.global",
            "cp.async.wait_group",
        ],
    ),
    (
        "magicube",
        &[
            // the integer MMA: s8 inputs, exact s32 accumulation; and the s4 one the rate probe
            // measures
            "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
            "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
            // B rows transposed in registers by byte permutes
            "prmt.b32",
            // runs of B rows, X and Y rows, loaded whole (predicated, so they stay in flight),
            // and vector stores of C rows
            "@q ld.global.nc.v4.b32",
            "@q ld.global.nc.v2.b32",
            "ld.global.nc.v4.u32",
            "st.global.v4.u32",
        ],
    ),
    (
        "tilespmv",
        &[
            // tile metadata loaded a lane per tile and broadcast
            "shfl.sync.idx",
            // the two halves of a row added once per tile row
            "shfl.sync.down",
            // payload bytes and nibbles; each half-warp's longest row, which its lanes step
            // through together
            "ld.global.nc.u8",
            "popc",
            "redux.sync.max.u32",
            // the device conversion: warp reductions over a tile's rows, payload bytes OR-ed
            // into their words
            "redux.sync.min.u32",
            "atom.global.or.b32",
        ],
    ),
    (
        "attention",
        &[
            // a score per entry summed by a butterfly, its column and weight broadcast
            "shfl.sync.bfly",
            "shfl.sync.idx",
            // the warps of a long row combined through shared memory
            "bar.sync",
            "st.shared.f32",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
            "cvt.rn.bf16.f32",
        ],
    ),
    (
        "attention_tc",
        &[
            // scores and the weighted sum on tensor cores, in f16 and bf16
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
            // 16-byte operand loads and output stores
            "ld.global.nc.v4",
            "st.global.v4",
            // a row's maximum over its quad; the vote for non-finite V rows
            "shfl.sync.bfly",
            "vote.sync.any",
        ],
    ),
];

#[test]
fn every_kernel_compiles_for_ampere_and_hopper() {
    // A fresh cache directory, so NVRTC really compiles every instantiation.
    let cache = std::env::temp_dir().join(format!("sparse-nvrtc-check-{}", std::process::id()));
    std::env::set_var(sparse_cuda::compile::CACHE_DIR_ENV, &cache);
    if let Err(e) = sparse_cuda::probe::load_nvrtc() {
        assert!(
            std::env::var("SPARSE_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "NVRTC required but missing: {e}"
        );
        eprintln!("skipped: {e}");
        return;
    }
    let specs = every_kernel().expect("every entry names a kernel type");
    let refs: Vec<_> = specs.iter().collect();
    for target in [Target::Cubin(80), Target::Cubin(90)] {
        let compiled = compile_all(&refs, target).unwrap_or_else(|e| panic!("{target}: {e}"));
        for (spec, c) in specs.iter().zip(&compiled) {
            assert!(
                !c.image.is_empty() && !c.symbol.is_empty(),
                "{} for {target}: empty",
                spec.expression
            );
        }
    }
    let ptx = compile_all(&refs, Target::Ptx(90)).unwrap_or_else(|e| panic!("PTX: {e}"));
    let mut by_file: BTreeMap<&str, String> = BTreeMap::new();
    for (spec, c) in specs.iter().zip(&ptx) {
        by_file.entry(spec.source).or_default().push_str(c.ptx());
    }
    let files: Vec<&str> = by_file.keys().copied().collect();
    let listed: Vec<&str> = EXPECTED.iter().map(|(f, _)| *f).collect();
    assert_eq!(
        files,
        {
            let mut l = listed.clone();
            l.sort();
            l
        },
        "every kernel file has its expectations"
    );
    for (file, needles) in EXPECTED {
        for needle in *needles {
            assert!(
                by_file[file].contains(needle),
                "{file}.cu: PTX lacks `{needle}`"
            );
        }
    }
    let _ = std::fs::remove_dir_all(cache);
}
