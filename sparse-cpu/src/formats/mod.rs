//! rayon kernels for the formats other than CSR, one file per format. The executor has checked
//! shapes and that `alpha != 0`; with `beta == 0` an output is written without being read.

pub(crate) mod bsr;
pub(crate) mod coo;
pub(crate) mod ell;
pub(crate) mod hyb;
pub(crate) mod me_bcrs;
pub(crate) mod sr_bcrs;
pub(crate) mod tiled16;
