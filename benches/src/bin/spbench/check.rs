//! The check beside every timing: the oracle's result for a case, computed once on first use
//! and shared by all of the case's kernels, and the comparison with a kernel's output.

use sparse_blas::bound::{self, Expectation, Verdict};
use sparse_blas::{AttentionDesc, Dense, Result, Scalar};

use crate::ops::{Case, Op};

/// The oracle of one case.
pub struct Oracle<'c, 'a, T: Scalar> {
    case: &'c Case<'a, T>,
    expectation: Option<Expectation>,
}

impl<'c, 'a, T: Scalar> Oracle<'c, 'a, T> {
    pub fn new(case: &'c Case<'a, T>) -> Self {
        Oracle {
            case,
            expectation: None,
        }
    }

    /// Compares a kernel's output (in the oracle's order) with the expected result and its
    /// per-entry error bound; the first call runs the serial reference.
    pub fn check(&mut self, got: &[f64]) -> Result<Verdict> {
        let expectation = match self.expectation.take() {
            Some(e) => e,
            None => expect(self.case)?,
        };
        let verdict = expectation.check(got);
        self.expectation = Some(expectation);
        verdict
    }
}

fn expect<T: Scalar>(case: &Case<'_, T>) -> Result<Expectation> {
    let a = case.a.as_ref();
    let input = |i: usize| case.inputs[i].as_ref();
    let prior = case.prior.as_ref().map(Dense::as_ref);
    let (p, alpha, beta) = (case.precision, case.alpha, case.beta);
    match case.op {
        Op::Spmv => bound::spmv(a, p, alpha, input(0), beta, prior),
        Op::Spmm => bound::spmm(a, p, alpha, input(0), beta, prior),
        Op::Sddmm => bound::sddmm(a, p, alpha, input(0), input(1), beta, prior, false),
        Op::Attention => {
            let w = case.width * case.heads;
            let shape = AttentionDesc::new(p).heads(case.heads).shape(w, w)?;
            bound::attention(a, p, input(0), input(1), input(2), &shape)
        }
    }
}
