//! Every kernel compiles with NVRTC for sm_80 and sm_90 and its PTX holds the instructions the
//! kernel is built around. Needs only libnvrtc (CI installs the `nvidia-cuda-nvrtc` wheel); when
//! NVRTC is absent the test says so and passes, unless `SPARSE_REQUIRE_NVRTC=1`.

use sparse_cuda::compile::{compile, sources};

/// (kernel file, entry points and instructions its PTX must contain)
const EXPECTED: &[(&str, &[&str])] = &[(
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
)];

#[test]
fn every_kernel_compiles_for_ampere_and_hopper() {
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
