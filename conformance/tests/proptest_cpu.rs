//! The CPU backend against the oracle on random small cases, every precision and algorithm.

use conformance::{run_suite, strategies, Case, Filter, Style};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use sparse_blas::{Backend, OpKind};

fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_cpu.txt",
        ))),
        ..ProptestConfig::with_cases(64)
    }
}

fn conforms(case: Case) -> Result<(), TestCaseError> {
    let backend = Backend::from_name("cpu").map_err(|e| TestCaseError::fail(e.to_string()))?;
    let report = run_suite(&backend, &[case], &Filter::default());
    prop_assert!(report.passed(), "{}", report.render(Style::Text, false));
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn spmv_matches_the_oracle(case in strategies::case(OpKind::Spmv)) {
        conforms(case)?;
    }

    #[test]
    fn spmm_matches_the_oracle(case in strategies::case(OpKind::Spmm)) {
        conforms(case)?;
    }

    #[test]
    fn sddmm_matches_the_oracle(case in strategies::case(OpKind::Sddmm)) {
        conforms(case)?;
    }

    #[test]
    fn attention_matches_the_oracle(case in strategies::case(OpKind::Attention)) {
        conforms(case)?;
    }
}
