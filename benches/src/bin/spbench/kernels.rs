//! The kernels a case runs: per backend and format, the algorithms its table lists for the
//! (operation, precision); and the CPU baselines. A combination the backend refuses at plan
//! time is reported as refused.

use sparse_blas::{Algorithm, Backend, BackendKind, Executor, Format, OpKind, Precision};

/// One kernel of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// A plan of a backend: ours, or cuSPARSE's through the `cusparse` backend.
    Plan {
        backend: BackendKind,
        format: Format,
        algorithm: Algorithm,
    },
    /// sprs's serial CSR kernel (SpMV, SpMM), the CPU baseline.
    Sprs,
    /// faer's dense GEMM on A made dense (SpMM): where sparsity stops paying.
    FaerDense,
}

impl Kernel {
    pub fn backend(&self) -> &'static str {
        match self {
            Kernel::Plan { backend, .. } => backend.name(),
            Kernel::Sprs => "sprs",
            Kernel::FaerDense => "faer",
        }
    }

    pub fn format(&self) -> &'static str {
        match self {
            Kernel::Plan { format, .. } => format.name(),
            Kernel::Sprs => "csr",
            Kernel::FaerDense => "dense",
        }
    }

    /// The algorithm asked for (a plan reports the one `auto` chose).
    pub fn algorithm(&self) -> &'static str {
        match self {
            Kernel::Plan { algorithm, .. } => algorithm.name(),
            Kernel::Sprs => "serial",
            Kernel::FaerDense => "gemm",
        }
    }

    /// Runs on the host (timed with the host clock).
    pub fn on_host(&self) -> bool {
        !matches!(
            self,
            Kernel::Plan {
                backend: BackendKind::Cuda | BackendKind::Cusparse,
                ..
            }
        )
    }
}

use Algorithm as A;
use OpKind as O;

/// What besides the backends' own kernels a case runs.
pub struct Extras {
    /// The serial reference, where a backend's table lists it (the CPU's, on CSR).
    pub reference: bool,
    /// sprs and faer: they compute `C = A*B` only, so only for alpha = 1, beta = 0.
    pub baselines: bool,
    /// faer's dense copy of A fits the limit.
    pub dense_fits: bool,
}

/// The kernels of `op` in `precision` on `backends`, in a fixed order: `auto` on CSR, then every
/// algorithm each backend's table lists, the serial reference only when `extras` asks for it.
pub fn kernels(
    backends: &[Backend],
    op: OpKind,
    precision: Precision,
    extras: &Extras,
) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    for backend in backends {
        let kind = backend.kind();
        for &format in Format::ALL {
            let offers = backend.algorithms(op, format, precision);
            // What a user who names no algorithm gets, on the format every backend takes.
            let auto = (format == Format::Csr && !offers.is_empty()).then_some(A::Auto);
            kernels.extend(
                auto.into_iter()
                    .chain(offers.into_iter().map(|offer| offer.algorithm))
                    .filter(|&algorithm| algorithm != A::Reference || extras.reference)
                    .map(|algorithm| Kernel::Plan {
                        backend: kind,
                        format,
                        algorithm,
                    }),
            );
        }
        if kind == BackendKind::Cpu && extras.baselines {
            let native = precision == Precision::F64 || precision == Precision::F32;
            if native && matches!(op, O::Spmv | O::Spmm) {
                kernels.push(Kernel::Sprs);
            }
            if native && op == O::Spmm && extras.dense_fits {
                kernels.push(Kernel::FaerDense);
            }
        }
    }
    kernels
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_blas::CpuBackend;

    #[test]
    fn the_cpu_runs_every_format_it_supports_and_its_baselines() {
        let cpu = [Backend::Cpu(CpuBackend::new())];
        let extras = Extras {
            reference: true,
            baselines: true,
            dense_fits: true,
        };
        let spmm = kernels(&cpu, OpKind::Spmm, Precision::F32, &extras);
        assert!(spmm.contains(&Kernel::Plan {
            backend: BackendKind::Cpu,
            format: Format::Csr,
            algorithm: Algorithm::RowSplit
        }));
        assert!(spmm.contains(&Kernel::Plan {
            backend: BackendKind::Cpu,
            format: Format::Csr,
            algorithm: Algorithm::Reference
        }));
        assert!(spmm.contains(&Kernel::Sprs) && spmm.contains(&Kernel::FaerDense));
        assert_eq!(
            spmm[0],
            Kernel::Plan {
                backend: BackendKind::Cpu,
                format: Format::Csr,
                algorithm: Algorithm::Auto
            }
        );
        let f16 = kernels(&cpu, OpKind::Spmv, Precision::F16, &extras);
        assert!(!f16.contains(&Kernel::Sprs));
        let without_reference = Extras {
            reference: false,
            ..extras
        };
        let spmv = kernels(&cpu, OpKind::Spmv, Precision::F64, &without_reference);
        assert!(spmv.contains(&Kernel::Plan {
            backend: BackendKind::Cpu,
            format: Format::Tiled16,
            algorithm: Algorithm::RowSplit
        }));
        assert!(!spmv.iter().any(
            |k| matches!(k, Kernel::Plan { algorithm, .. } if *algorithm == Algorithm::Reference)
        ));
        assert!(kernels(&cpu, OpKind::Spmv, Precision::TF32, &without_reference).is_empty());
        let attention = kernels(&cpu, OpKind::Attention, Precision::F64, &extras);
        assert!(!attention.is_empty() && !attention.contains(&Kernel::Sprs));
    }
}
