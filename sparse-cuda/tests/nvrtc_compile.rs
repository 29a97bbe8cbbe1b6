//! Every kernel compiles with NVRTC for sm_80 and sm_90 and its PTX holds the instructions the
//! kernel is built around. Needs only libnvrtc (CI installs the `nvidia-cuda-nvrtc` wheel); when
//! NVRTC is absent the test says so and passes, unless `SPARSE_REQUIRE_NVRTC=1`.

use sparse_cuda::compile::{compile, sources};

/// (kernel file, entry points and instructions its PTX must contain)
const EXPECTED: &[(&str, &[&str])] = &[
    (
        "spmv",
        &[
            ".entry spmv_csr_scalar_f32",
            ".entry spmv_csr_vector_f64_w32",
            ".entry spmv_csr_vector_f16_w2",
            ".entry spmv_csr_merge_f16",
            ".entry spmv_merge_fixup_f64",
            ".entry spmv_merge_partition",
            ".entry spmv_coo_f64",
            "shfl.sync.down",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
            "ld.global.nc",
            "atom.global.add.f64",
        ],
    ),
    (
        "spmm",
        &[
            ".entry spmm_csr_rowmajor_f32_w32_v4",
            ".entry spmm_csr_rowmajor_f64_w8_v2",
            ".entry spmm_csr_rowmajor_f16_w4_v1",
            ".entry spmm_csr_colmajor_f32_w16",
            ".entry spmm_csr_colmajor_f16_w4",
            ".entry scale_matrix_f64",
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
            ".entry sddmm_csr_f32_w8_v4",
            ".entry sddmm_csr_f64_w32_v2",
            ".entry sddmm_csr_f16_w16_v1",
            "shfl.sync.idx",
            "shfl.sync.bfly",
            "ld.global.nc.v4.f32",
            "ld.global.nc.v2.f64",
            "cvt.f32.f16",
            "cvt.rn.f16.f32",
        ],
    ),
    (
        "blas1",
        &[
            ".entry dot_partial_f16",
            ".entry nrm2_partial_f64",
            ".entry sum_partials_f32",
            ".entry axpy_f64",
            ".entry scal_f16",
            // block reduction: warp shuffles, then one warp over the per-warp sums
            "shfl.sync.down",
            "bar.sync",
            "cvt.f32.f16",
        ],
    ),
    (
        "rode",
        &[
            ".entry rode_preprocess_count",
            ".entry rode_preprocess_scan",
            ".entry rode_preprocess_fill",
            ".entry rode_spmm_f32_v4",
            ".entry rode_spmm_f64_v2",
            ".entry rode_spmm_f16_v1",
            ".entry rode_spmm_f16_v4",
            ".entry rode_scale_rows_f64",
            ".entry rode_sddmm_f32_v4",
            ".entry rode_sddmm_f16_v2",
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
        "flashsparse",
        &[
            ".entry fs_spmm_f16_h8_p2_g1_vec",
            ".entry fs_spmm_f16_h8_p8_g2_vec",
            ".entry fs_spmm_f32_h8_p4_g4_vec",
            ".entry fs_spmm_f16_h16_p8_g1_vec",
            ".entry fs_spmm_f32_h16_p4_g2_elem",
            ".entry fs_spmm_combine_f16",
            ".entry fs_sddmm_f16_h8_vec",
            ".entry fs_sddmm_f32_h16_elem",
            ".entry fs_build_first",
            ".entry fs_scan_tiles",
            ".entry fs_scan_offsets",
            ".entry fs_scan_apply",
            ".entry fs_build_window_ptr",
            ".entry fs_build_fill_f32",
            // the tensor-core MMAs: f16 inputs and tf32 inputs, both accumulating in f32
            "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32",
            "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32",
            "cvt.rna.tf32.f32",
            // runs of adjacent X and Y elements (16 bytes a lane) and of C, the loads
            // predicated rather than branched around, so they stay in flight
            "@q ld.global.nc.v4.b32",
            "st.global.v2.f32",
            "st.global.v4.f32",
            "shfl.sync.up",
            // the SpMM pipeline: B runs and values copied to shared memory asynchronously
            "cp.async.ca.shared.global",
            "cp.async.wait_group",
        ],
    ),
];

#[test]
fn every_kernel_compiles_for_ampere_and_hopper() {
    // A fresh cache directory, so NVRTC really compiles every file.
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
    assert_eq!(
        sources::ALL.len(),
        EXPECTED.len(),
        "every kernel file has its expectations"
    );
    for arch in ["sm_80", "sm_90"] {
        for source in sources::ALL {
            let ptx = compile(*source, arch)
                .unwrap_or_else(|e| panic!("{}.cu for {arch}: {e}", source.name));
            let (_, needles) = EXPECTED
                .iter()
                .find(|(name, _)| *name == source.name)
                .expect("expectations listed");
            for needle in *needles {
                assert!(
                    ptx.contains(needle),
                    "{}.cu for {arch}: PTX lacks `{needle}`",
                    source.name
                );
            }
            assert!(
                ptx.contains(&format!(".target {arch}")),
                "{}.cu: PTX not for {arch}",
                source.name
            );
        }
    }
}
