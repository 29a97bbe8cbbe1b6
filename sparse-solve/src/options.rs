//! What a solve is asked to do, and what it reports.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use sparse_core::{Error, Result, SpmvDesc};

/// The iterative method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Method {
    /// Conjugate gradient: symmetric positive definite matrices; one SpMV per iteration.
    #[default]
    Cg,
    /// BiCGSTAB: any nonsingular matrix; two SpMVs per iteration.
    Bicgstab,
}

/// The preconditioner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precond {
    #[default]
    None,
    /// Jacobi: multiplies by the inverse of the diagonal.
    Jacobi,
}

macro_rules! names {
    ($t:ty, $what:literal, [$(($v:ident, $name:literal)),*]) => {
        impl $t {
            pub const ALL: &'static [$t] = &[$(<$t>::$v),*];
            pub fn name(self) -> &'static str {
                match self {
                    $(<$t>::$v => $name,)*
                }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
                    Error::invalid(format!(
                        concat!("unknown ", $what, " '{}' (expected one of {})"),
                        s,
                        names.join(" ")
                    ))
                })
            }
        }
    };
}
names!(Method, "method", [(Cg, "cg"), (Bicgstab, "bicgstab")]);
names!(
    Precond,
    "preconditioner",
    [(None, "none"), (Jacobi, "jacobi")]
);

impl Method {
    /// SpMVs per iteration.
    pub fn spmvs_per_iteration(self) -> usize {
        match self {
            Method::Cg => 1,
            Method::Bicgstab => 2,
        }
    }
}

/// Options of a solve.
#[derive(Clone, Debug, PartialEq)]
pub struct SolveOptions {
    pub method: Method,
    pub precond: Precond,
    /// Stop when ‖b - Ax‖ <= tol·‖b‖ (the residual the recurrence updates).
    pub tol: f64,
    pub max_iter: usize,
    /// Test for convergence every this many iterations (at least 1): each test is one host
    /// read of the scalars. Breakdown is found at the test after it happens.
    pub check_every: usize,
    /// Keep the relative residual of every test in [`SolveReport::history`] (a test of the
    /// recurrence's residual, or of b - Ax when the recurrence met the tolerance).
    pub history: bool,
    /// The SpMV plan's descriptor; `None` plans `auto` on CSR in the vectors' precision.
    pub spmv: Option<SpmvDesc>,
}

impl Default for SolveOptions {
    fn default() -> Self {
        SolveOptions {
            method: Method::Cg,
            precond: Precond::None,
            tol: 1e-10,
            max_iter: 10_000,
            check_every: 1,
            history: false,
            spmv: None,
        }
    }
}

impl SolveOptions {
    pub fn method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }
    pub fn precond(mut self, precond: Precond) -> Self {
        self.precond = precond;
        self
    }
    pub fn tol(mut self, tol: f64) -> Self {
        self.tol = tol;
        self
    }
    pub fn max_iter(mut self, max_iter: usize) -> Self {
        self.max_iter = max_iter;
        self
    }
    pub fn check_every(mut self, check_every: usize) -> Self {
        self.check_every = check_every;
        self
    }
    pub fn history(mut self, history: bool) -> Self {
        self.history = history;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !(self.tol >= 0.0 && self.tol.is_finite()) {
            return Err(Error::invalid(format!(
                "the tolerance must be finite and not negative, not {}",
                self.tol
            )));
        }
        if self.check_every == 0 {
            return Err(Error::invalid("check_every must be at least 1"));
        }
        Ok(())
    }
}

/// What a solve did.
#[derive(Clone, Debug, PartialEq)]
pub struct SolveReport {
    pub method: Method,
    pub precond: Precond,
    pub iterations: usize,
    /// The updated residual met the tolerance; when false, x holds the last iterate.
    pub converged: bool,
    /// ‖b - Ax‖/‖b‖ of the x returned, recomputed from x (not the recurrence's residual).
    pub relative_residual: f64,
    /// The iterations, from the first residual to the last test (planning excluded).
    pub time: Duration,
    pub time_per_iteration: Duration,
    /// One SpMV of the plan, timed apart after the solve.
    pub spmv_time: Duration,
    /// The iterations' SpMVs over the time per iteration, from `spmv_time` (at most 1).
    pub spmv_share: f64,
    /// The updated residual's relative norm at each test, when asked for.
    pub history: Vec<f64>,
}

impl fmt::Display for SolveReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {} after {} iterations, relative residual {:.3e}, \
             {:.3} ms ({:.1} us per iteration, SpMV {:.0}%)",
            self.method,
            match self.precond {
                Precond::None => "no preconditioner",
                Precond::Jacobi => "jacobi preconditioner",
            },
            if self.converged {
                "converged"
            } else {
                "not converged"
            },
            self.iterations,
            self.relative_residual,
            self.time.as_secs_f64() * 1e3,
            self.time_per_iteration.as_secs_f64() * 1e6,
            self.spmv_share * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_bad_options_are_refused() {
        assert_eq!("bicgstab".parse::<Method>().unwrap(), Method::Bicgstab);
        assert_eq!("jacobi".parse::<Precond>().unwrap(), Precond::Jacobi);
        assert!("gmres"
            .parse::<Method>()
            .unwrap_err()
            .to_string()
            .contains("cg bicgstab"));
        assert!(SolveOptions::default().tol(-1.0).validate().is_err());
        assert!(SolveOptions::default().check_every(0).validate().is_err());
    }
}
