//! The conformance suite, written once for every backend and every scalar type.
//!
//! For each case the suite asks the backend which (format, precision) pairs it supports,
//! rounds the matrix and dense operands to the precision's host type (and TF32 when that is
//! the compute mode), computes the oracle's result and a per-entry bound (see [`crate::bound`]),
//! then for `auto` and each algorithm of the backend's table: plans, runs twice on freshly
//! staged operands, and compares. A check also fails when the plan misreports itself, writes
//! into the padding of its output, claims to be deterministic while its two runs differ, or
//! breaks the plan contract:
//! - widths (SpMM, SDDMM): planned for one less than the case's width, a run fails with
//!   `Error::WidthExceeded` until `reserve` makes room;
//! - the plan's bytes, reserved width and algorithm stay as they were over the runs;
//! - value updates (SpMV, SpMM, SDDMM): after the compared runs, a run with `-alpha`, then
//!   `update_values` with the negated values and a run with `alpha`, which must agree;
//! - the attention backward, where the plan has one and the inputs are not extreme: after a
//!   forward run, dQ, dK, dV and the bias gradient for a fixed dL/dO, within the oracle's
//!   backward bound (`bound::attention_backward`), and the same twice from a deterministic
//!   plan. The case column of such a check ends in `+ backward`.
//!
//! Every combination the backend calls Unsupported must refuse to plan with
//! `Error::Unsupported`.

use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use sparse_blas::{
    bf16, bound, f16, reference, Accumulator, Algorithm, AttentionBackward, AttentionDesc,
    AttentionPlan, Backend, BackendKind, Csr, CsrRef, DType, Dense, DenseMut, DenseRef, Error,
    Executor, Format, Layout, OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SddmmPlan,
    SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan, Support, ValueOrder,
};

use crate::bound::{overflow_threshold, AttentionTerms, Comparison, ErrorModel};
use crate::case::{Case, Fill, MatrixSource, Strides};
use crate::corpus::{self, Loaded};
use crate::operands::{tested_value, HostDense, Operands};
use crate::report::{Report, Row};

/// Runs `$body` with `$t` naming the host type of storage type `$dtype`, or gives `$none`
/// when there is none (i4 has no host scalar type).
macro_rules! with_host_type {
    ($dtype:expr, $t:ident => $body:expr, none => $none:expr) => {
        match $dtype {
            DType::F64 => {
                type $t = f64;
                $body
            }
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::F16 => {
                type $t = f16;
                $body
            }
            DType::BF16 => {
                type $t = bf16;
                $body
            }
            DType::I8 => {
                type $t = i8;
                $body
            }
            DType::I16 => {
                type $t = i16;
                $body
            }
            _ => $none,
        }
    };
}

/// Which part of the cases to run.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these operations (all when empty).
    pub ops: Vec<OpKind>,
    /// Only these precisions (all when empty).
    pub precisions: Vec<Precision>,
    /// Skip matrices with more stored entries.
    pub max_nnz: Option<usize>,
}

impl Filter {
    fn op(&self, op: OpKind) -> bool {
        self.ops.is_empty() || self.ops.contains(&op)
    }

    fn precision(&self, precision: Precision) -> bool {
        self.precisions.is_empty() || self.precisions.contains(&precision)
    }
}

/// The algorithms the suite runs for `op` on `format` in `precision` on `backend`: `Auto`, then
/// every algorithm its table lists (none when it runs nothing there).
pub fn algorithms(
    backend: &impl Executor,
    op: OpKind,
    format: Format,
    precision: Precision,
) -> Vec<Algorithm> {
    let offers = backend.algorithms(op, format, precision);
    if offers.is_empty() {
        return Vec::new();
    }
    std::iter::once(Algorithm::Auto)
        .chain(offers.iter().map(|o| o.algorithm))
        .collect()
}

/// Whether plans of this backend kind read host memory. They are then handed the caller's
/// buffers as they are, padding included (an upload would make a tight copy and hide
/// the padding from the kernel); other backends get copies made by `upload` and their
/// results come back through `download`.
pub fn reads_host_memory(kind: BackendKind) -> bool {
    kind == BackendKind::Cpu
}

/// Runs `cases` on `backend`, compares every result with the oracle, and reports.
pub fn run_suite(backend: &Backend, cases: &[Case], filter: &Filter) -> Report {
    let mut report = Report::new(backend.description());
    let ops: Vec<OpKind> = OpKind::ALL
        .iter()
        .copied()
        .filter(|&op| filter.op(op) && cases.iter().any(|c| c.op == op))
        .collect();
    check_refusals(backend, &ops, filter, &mut report);
    let mut loader = Loader::default();
    for case in cases.iter().filter(|c| filter.op(c.op)) {
        let Some(matrix) = loader.get(&case.matrix, filter.max_nnz, &mut report) else {
            continue;
        };
        let precisions = Precision::ALL
            .into_iter()
            .filter(|&p| filter.precision(p) && case.precision.is_none_or(|only| only == p));
        for precision in precisions {
            let formats: Vec<Format> = Format::ALL
                .iter()
                .copied()
                .filter(|&f| backend.capability(case.op, f, precision) != Support::Unsupported)
                .collect();
            if formats.is_empty() {
                continue;
            }
            let run = CaseRun {
                backend,
                case,
                matrix: &matrix,
                precision,
                formats: &formats,
            };
            with_host_type!(precision.storage, T => run.run::<T>(&mut report), none => report.note(
                format!("{precision}: supported, but has no host scalar type to test it with")
            ));
        }
    }
    report
}

/// Checks that every combination the backend calls Unsupported refuses to plan.
fn check_refusals(backend: &Backend, ops: &[OpKind], filter: &Filter, report: &mut Report) {
    for &op in ops {
        for &format in Format::ALL {
            for precision in Precision::ALL.into_iter().filter(|&p| filter.precision(p)) {
                if backend.capability(op, format, precision) != Support::Unsupported {
                    continue;
                }
                let problem = with_host_type!(precision.storage,
                    T => refusal_problem::<T>(backend, op, format, precision),
                    none => {
                        report.note(format!(
                            "{precision}: no host scalar type, so its unsupported combinations \
                             were not planned"
                        ));
                        continue;
                    }
                );
                match problem {
                    None => report.refused += 1,
                    Some(failure) => report.rows.push(Row {
                        backend: backend.kind(),
                        op,
                        format,
                        precision,
                        algorithm: Algorithm::Auto,
                        chosen: None,
                        matrix: "empty 2x2".to_string(),
                        case: "capability says unsupported".to_string(),
                        shape: "2x2 nnz=0".to_string(),
                        entries: 0,
                        worst: 0.0,
                        failure: Some(failure),
                    }),
                }
            }
        }
    }
}

/// `None` when planning fails with `Error::Unsupported`, as it must; else what happened.
fn refusal_problem<T: Scalar>(
    backend: &Backend,
    op: OpKind,
    format: Format,
    precision: Precision,
) -> Option<String> {
    let a = Csr::<T>::zeros(2, 2);
    let request = PlanRequest {
        op,
        format,
        precision,
        algorithm: Algorithm::Auto,
        scale_by_values: false,
        heads: 1,
        bias: false,
        max_width: None,
    };
    let planned = Plan::new(backend, a.as_ref(), &request).map(drop);
    match planned {
        Err(Error::Unsupported { .. }) => None,
        Err(e) => Some(format!(
            "capability says unsupported, but planning fails with another error: {e}"
        )),
        Ok(()) => Some("capability says unsupported, but planning succeeds".to_string()),
    }
}

/// Loads each matrix file once while its cases (which are adjacent) run.
#[derive(Default)]
struct Loader {
    path: Option<PathBuf>,
    matrix: Option<Arc<Csr<f64>>>,
}

impl Loader {
    fn get(
        &mut self,
        source: &MatrixSource,
        max_nnz: Option<usize>,
        report: &mut Report,
    ) -> Option<Arc<Csr<f64>>> {
        let limit = max_nnz.unwrap_or(usize::MAX);
        match source {
            MatrixSource::Generated { name, matrix } => {
                if matrix.nnz() > limit {
                    report.note(format!(
                        "skipped {name}: {} entries > {limit}",
                        matrix.nnz()
                    ));
                    return None;
                }
                Some(matrix.clone())
            }
            MatrixSource::File(path) => {
                if self.path.as_ref() != Some(path) {
                    self.path = Some(path.clone());
                    self.matrix = match corpus::load(path, max_nnz) {
                        Ok(Loaded::Matrix(a)) => Some(Arc::new(a)),
                        Ok(Loaded::TooLarge(n)) => {
                            report
                                .note(format!("skipped {}: {n} entries > {limit}", source.name()));
                            None
                        }
                        Err(e) => {
                            report
                                .errors
                                .push(format!("cannot load {}: {e}", path.display()));
                            None
                        }
                    };
                }
                self.matrix.clone()
            }
        }
    }
}

/// What a plan is asked to be.
struct PlanRequest {
    op: OpKind,
    format: Format,
    precision: Precision,
    algorithm: Algorithm,
    scale_by_values: bool,
    /// Attention's heads and edge bias.
    heads: usize,
    bias: bool,
    /// The `max_width` of an SpMM or SDDMM descriptor (`None`: the default).
    max_width: Option<usize>,
}

/// A plan of any operation.
enum Plan<'a, T: Scalar> {
    Spmv(Box<dyn SpmvPlan<T> + 'a>),
    Spmm(Box<dyn SpmmPlan<T> + 'a>),
    Sddmm(Box<dyn SddmmPlan<T> + 'a>),
    Attention(Box<dyn AttentionPlan<T> + 'a>),
}

impl<'a, T: Scalar> Plan<'a, T> {
    fn new(backend: &Backend, a: CsrRef<'a, T>, r: &PlanRequest) -> Result<Self> {
        Ok(match r.op {
            OpKind::Spmv => Plan::Spmv(
                backend.plan_spmv(
                    a,
                    &SpmvDesc::new(r.precision)
                        .format(r.format)
                        .algorithm(r.algorithm),
                )?,
            ),
            OpKind::Spmm => Plan::Spmm(
                backend.plan_spmm(
                    a,
                    &SpmmDesc {
                        max_width: r.max_width,
                        ..SpmmDesc::new(r.precision)
                            .format(r.format)
                            .algorithm(r.algorithm)
                    },
                )?,
            ),
            OpKind::Sddmm => Plan::Sddmm(
                backend.plan_sddmm(
                    a,
                    &SddmmDesc {
                        max_width: r.max_width,
                        ..SddmmDesc::new(r.precision)
                            .format(r.format)
                            .algorithm(r.algorithm)
                            .scale_by_values(r.scale_by_values)
                    },
                )?,
            ),
            OpKind::Attention => Plan::Attention(
                backend.plan_attention(
                    a,
                    &AttentionDesc::new(r.precision)
                        .format(r.format)
                        .algorithm(r.algorithm)
                        .heads(r.heads)
                        .bias_from_values(r.bias),
                )?,
            ),
            other => {
                return Err(Error::invalid(format!(
                    "the conformance suite cannot run {other}"
                )))
            }
        })
    }

    /// The order an SDDMM plan writes its values in, when not S's CSR order.
    fn value_order(&self) -> Option<ValueOrder> {
        match self {
            Plan::Sddmm(p) => p.value_order().cloned(),
            _ => None,
        }
    }

    fn info(&self) -> &PlanInfo {
        match self {
            Plan::Spmv(p) => p.info(),
            Plan::Spmm(p) => p.info(),
            Plan::Sddmm(p) => p.info(),
            Plan::Attention(p) => p.info(),
        }
    }

    /// Makes room for runs of `width` (SpMM, SDDMM).
    fn reserve(&mut self, width: usize) -> Result<()> {
        match self {
            Plan::Spmm(p) => p.reserve(width),
            Plan::Sddmm(p) => p.reserve(width),
            _ => Err(Error::invalid("only SpMM and SDDMM plans reserve a width")),
        }
    }

    /// New values for the matrix, in its CSR entry order (SpMV, SpMM, SDDMM).
    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        match self {
            Plan::Spmv(p) => p.update_values(values),
            Plan::Spmm(p) => p.update_values(values),
            Plan::Sddmm(p) => p.update_values(values),
            Plan::Attention(_) => Err(Error::invalid("attention plans take no new values")),
        }
    }

    /// `inputs` are x; B; X and Y; or Q, K and V.
    fn run(
        &mut self,
        alpha: T::Acc,
        beta: T::Acc,
        inputs: &[DenseRef<'_, T>],
        out: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        match (self, inputs) {
            (Plan::Spmv(p), &[x]) => p.run(alpha, x, beta, out),
            (Plan::Spmm(p), &[b]) => p.run(alpha, b, beta, out),
            (Plan::Sddmm(p), &[x, y]) => p.run(alpha, x, y, beta, out),
            (Plan::Attention(p), &[q, k, v]) => p.run(q, k, v, out),
            _ => Err(Error::invalid(
                "wrong number of dense operands for the plan",
            )),
        }
    }
}

/// One case in one precision, on every supported format and every algorithm.
struct CaseRun<'r> {
    backend: &'r Backend,
    case: &'r Case,
    matrix: &'r Csr<f64>,
    precision: Precision,
    formats: &'r [Format],
}

/// The case in the tested type, with the oracle's result and the bounds.
struct Prepared<T: Scalar> {
    a: Csr<T>,
    operands: Operands<T>,
    alpha: T::Acc,
    beta: T::Acc,
    expected: Vec<f64>,
    bounds: Vec<f64>,
    model: ErrorModel,
}

/// What one run of a plan produced.
struct Execution {
    /// The output's entries in row-major order.
    values: Vec<f64>,
    /// Whether the output's padding is as before the run, as far as the result shows it.
    padding_intact: bool,
    /// A padding slot of a blocked format's value order the run left nonzero.
    unzeroed_slot: Option<usize>,
}

/// The result of one check, before it becomes a row.
struct Outcome {
    chosen: Option<Algorithm>,
    worst: f64,
    failure: Option<String>,
    /// The backend refused the request with `Error::Unsupported`, as it may for an option.
    refused: bool,
    /// Gradient entries compared by the attention backward's check (0: not checked).
    backward_entries: usize,
}

impl Outcome {
    fn refused() -> Self {
        Outcome {
            chosen: None,
            worst: 0.0,
            failure: None,
            refused: true,
            backward_entries: 0,
        }
    }
}

/// What the check of an attention plan's backward found: the gradient entries it compared,
/// their largest error/bound ratio, and what failed. Empty where the plan has no backward.
#[derive(Default)]
struct BackwardCheck {
    entries: usize,
    worst: f64,
    failure: Option<String>,
}

impl CaseRun<'_> {
    fn run<T: Scalar>(&self, report: &mut Report) {
        let (rows, cols, nnz) = (self.matrix.rows(), self.matrix.cols(), self.matrix.nnz());
        let width = match self.case.op {
            OpKind::Spmv => String::new(),
            OpKind::Spmm => format!(" n={}", self.case.width),
            OpKind::Sddmm => format!(" k={}", self.case.width),
            _ => format!(" d={}", self.case.width),
        };
        let template = Row {
            backend: self.backend.kind(),
            op: self.case.op,
            format: self.formats[0],
            precision: self.precision,
            algorithm: Algorithm::Auto,
            chosen: None,
            matrix: self.case.matrix.name(),
            case: self.case.describe(),
            shape: format!("{rows}x{cols} nnz={nnz}{width}"),
            entries: 0,
            worst: 0.0,
            failure: None,
        };
        let prepared = match self.prepare::<T>() {
            Ok(p) => p,
            Err(e) => {
                report.rows.push(Row {
                    failure: Some(format!("the oracle failed: {e}")),
                    ..template
                });
                return;
            }
        };
        for &format in self.formats {
            let algorithms = match self.case.algorithm {
                Some(only) => vec![only],
                None => algorithms(self.backend, self.case.op, format, self.precision),
            };
            let max_width = matches!(self.case.op, OpKind::Spmm | OpKind::Sddmm)
                .then(|| self.case.width.saturating_sub(1));
            for algorithm in algorithms {
                let request = PlanRequest {
                    op: self.case.op,
                    format,
                    precision: self.precision,
                    algorithm,
                    scale_by_values: self.case.scale_by_values,
                    heads: self.case.heads,
                    bias: self.case.bias,
                    max_width,
                };
                let outcome = catch_unwind(AssertUnwindSafe(|| self.check(&prepared, &request)))
                    .unwrap_or_else(|panic| Outcome {
                        chosen: None,
                        worst: f64::INFINITY,
                        failure: Some(format!("panicked: {}", panic_message(panic.as_ref()))),
                        refused: false,
                        backward_entries: 0,
                    });
                if outcome.refused {
                    report.refused += 1;
                    continue;
                }
                let case = if outcome.backward_entries > 0 {
                    format!("{} + backward", template.case)
                } else {
                    template.case.clone()
                };
                report.rows.push(Row {
                    format,
                    algorithm,
                    chosen: outcome.chosen,
                    case,
                    entries: prepared.expected.len() + outcome.backward_entries,
                    worst: outcome.worst,
                    failure: outcome.failure,
                    ..template.clone()
                });
            }
        }
    }

    /// Rounds the case to `T`, computes the oracle's result and the bounds.
    fn prepare<T: Scalar>(&self) -> Result<Prepared<T>> {
        let mut a = self.matrix.cast::<T>();
        for (v, &original) in a.values_mut().iter_mut().zip(self.matrix.values()) {
            *v = tested_value(original, self.precision, false);
        }
        let operands =
            Operands::<T>::generate(self.case, (a.rows(), a.cols(), a.nnz()), self.precision);
        let model = ErrorModel::new(self.precision, <T::Out as Scalar>::DTYPE);
        let mut expectation = match self.case.op {
            OpKind::Spmv | OpKind::Spmm => self.expect_linear(&a, &operands, &model)?,
            OpKind::Sddmm => self.expect_sddmm(&a, &operands, &model)?,
            _ => self.expect_attention(&a, &operands, &model)?,
        };
        if model.exact {
            expectation
                .values
                .iter_mut()
                .for_each(|v| *v = wrap_i32(*v));
        }
        Ok(Prepared {
            a,
            operands,
            alpha: T::Acc::from_f64(expectation.alpha),
            beta: T::Acc::from_f64(expectation.beta),
            expected: expectation.values,
            bounds: expectation.bounds,
            model,
        })
    }

    /// alpha (fitted, see [`fit_alpha`]) and beta as the kernel will see them, in f64.
    fn coefficients<T: Scalar>(&self, magnitudes: &[f64], model: &ErrorModel) -> (f64, f64) {
        let largest = magnitudes.iter().fold(0.0, |m: f64, &v| m.max(v));
        let alpha = fit_alpha(self.case.alpha, largest, model);
        (
            T::Acc::from_f64(alpha).to_f64(),
            T::Acc::from_f64(self.case.beta).to_f64(),
        )
    }

    /// SpMV and SpMM (SpMV is SpMM with one column, which the magnitudes use).
    fn expect_linear<T: Scalar>(
        &self,
        a: &Csr<T>,
        operands: &Operands<T>,
        model: &ErrorModel,
    ) -> Result<Expectation> {
        let x = &operands.inputs[0];
        let magnitudes =
            reference::spmm(abs(a).as_ref(), 1.0, x.abs().view()?, 0.0, None)?.into_host_vec()?;
        let (alpha, beta) = self.coefficients::<T>(&magnitudes, model);
        let prior = operands.prior.view()?;
        let values = if self.case.op == OpKind::Spmv {
            reference::spmv(a.as_ref(), alpha, x.view()?, beta, Some(prior))?
        } else {
            reference::spmm(a.as_ref(), alpha, x.view()?, beta, Some(prior))?.into_host_vec()?
        };
        let n = x.shape().1;
        let bounds = values
            .iter()
            .enumerate()
            .map(|(e, &r)| {
                let (i, j) = (e / n, e % n);
                model.linear(
                    a.as_ref().row_len(i),
                    scaled(alpha, magnitudes[e]),
                    prior_term(beta, operands.prior.get(i, j)),
                    r,
                )
            })
            .collect();
        Ok(Expectation {
            values,
            bounds,
            alpha,
            beta,
        })
    }

    fn expect_sddmm<T: Scalar>(
        &self,
        s: &Csr<T>,
        operands: &Operands<T>,
        model: &ErrorModel,
    ) -> Result<Expectation> {
        let (x, y) = (&operands.inputs[0], &operands.inputs[1]);
        let by_values = self.case.scale_by_values;
        let magnitudes = reference::sddmm(
            abs(s).as_ref(),
            1.0,
            x.abs().view()?,
            y.abs().view()?,
            0.0,
            None,
            by_values,
        )?;
        let (alpha, beta) = self.coefficients::<T>(&magnitudes, model);
        let values = reference::sddmm(
            s.as_ref(),
            alpha,
            x.view()?,
            y.view()?,
            beta,
            Some(operands.prior.view()?),
            by_values,
        )?;
        let terms = x.shape().1 + usize::from(by_values);
        let bounds = values
            .iter()
            .enumerate()
            .map(|(e, &r)| {
                model.linear(
                    terms,
                    scaled(alpha, magnitudes[e]),
                    prior_term(beta, operands.prior.get(e, 0)),
                    r,
                )
            })
            .collect();
        Ok(Expectation {
            values,
            bounds,
            alpha,
            beta,
        })
    }

    fn expect_attention<T: Scalar>(
        &self,
        a: &Csr<T>,
        operands: &Operands<T>,
        model: &ErrorModel,
    ) -> Result<Expectation> {
        let (q, k, v) = (
            &operands.inputs[0],
            &operands.inputs[1],
            &operands.inputs[2],
        );
        let shape = self
            .case
            .attention_desc(self.precision)
            .shape(q.shape().1, v.shape().1)?;
        let (heads, d, dv) = (shape.heads, shape.d, shape.dv);
        let values = reference::attention(a.as_ref(), q.view()?, k.view()?, v.view()?, &shape)?
            .into_host_vec()?;
        let a = a.as_ref();
        let magnitudes = bound::score_magnitudes(a, q.view()?, k.view()?, &shape)?;
        let mut bounds = Vec::with_capacity(values.len());
        for i in 0..a.rows() {
            let range = a.row_range(i);
            for h in 0..heads {
                let score_magnitude = magnitudes[i * heads + h];
                for t in h * dv..(h + 1) * dv {
                    let v_max = range.clone().fold(0.0, |m: f64, e| {
                        m.max(v.get(a.col_idx()[e] as usize, t).to_f64().abs())
                    });
                    let terms = AttentionTerms {
                        entries: range.len(),
                        width: d,
                        score_magnitude,
                        v_max,
                    };
                    bounds.push(model.attention(terms, values[i * heads * dv + t]));
                }
            }
        }
        Ok(Expectation {
            values,
            bounds,
            alpha: 1.0,
            beta: 0.0,
        })
    }

    /// Plans, checks the width contract, runs twice and compares, then checks that the runs
    /// left the plan as it was and that a value update computes with the new values.
    fn check<T: Scalar>(&self, p: &Prepared<T>, request: &PlanRequest) -> Outcome {
        let failed = |chosen, failure: String| Outcome {
            chosen,
            worst: f64::INFINITY,
            failure: Some(failure),
            refused: false,
            backward_entries: 0,
        };
        let mut plan = match Plan::new(self.backend, p.a.as_ref(), request) {
            Ok(plan) => plan,
            // Capability answers for an (op, format, precision) as a whole; one named
            // algorithm, or a descriptor option such as scaling by S's values, may still be
            // refused, and must be with the typed error.
            Err(Error::Unsupported { .. })
                if request.scale_by_values || request.algorithm != Algorithm::Auto =>
            {
                return Outcome::refused()
            }
            // A padded format may refuse a matrix it would store with too much padding.
            Err(Error::FillLimit { .. }) => return Outcome::refused(),
            Err(e) => return failed(None, format!("planning failed: {e}")),
        };
        let info = plan.info().clone();
        let chosen = Some(info.algorithm);
        if let Some(problem) = info_problem(&info, self.backend.kind(), request) {
            return failed(chosen, problem);
        }
        let output = Output::new(&p.operands.prior, plan.value_order());
        if let Some(problem) = self.width_problem(&mut plan, p, &output) {
            return failed(chosen, format!("width contract: {problem}"));
        }
        let reserved = plan.info().clone();
        let runs = self
            .execute(&mut plan, p, &output, p.alpha)
            .and_then(|first| {
                let second = self.execute(&mut plan, p, &output, p.alpha)?;
                Ok((first, second))
            });
        let (first, second) = match runs {
            Ok(runs) => runs,
            Err(e) if is_refusal(&e) => return Outcome::refused(),
            Err(e) => return failed(chosen, format!("run failed: {e}")),
        };
        let comparison = p.model.compare(&first.values, &p.expected, &p.bounds);
        let failure = if !comparison.passed() {
            Some(describe_mismatch(&comparison, p.operands.prior.shape().1))
        } else if !first.padding_intact {
            Some("wrote into the padding of its output".to_string())
        } else if let Some(slot) = first.unzeroed_slot {
            Some(format!(
                "left padding slot {slot} of its value order nonzero (must be written 0)"
            ))
        } else if info.deterministic {
            first_difference(&first.values, &second.values)
                .map(|e| format!("claims to be deterministic, but two runs differ at entry {e}"))
        } else {
            None
        };
        let failure = failure
            .or_else(|| {
                info_change(&reserved, plan.info())
                    .map(|change| format!("plan info contract: {change} over the runs"))
            })
            .or_else(|| {
                self.update_problem(&mut plan, p, &output, &first)
                    .map(|problem| format!("value update contract: {problem}"))
            });
        let backward = match &mut plan {
            // The backward's bound is first order in the rounding errors. Extreme inputs make
            // scores near 10^9, where one unit of rounding in a score moves a softmax weight
            // past what first order allows: those cases check the forward only.
            Plan::Attention(attention)
                if failure.is_none() && self.case.inputs != Fill::Extreme =>
            {
                self.check_backward(attention.as_mut(), p)
            }
            _ => BackwardCheck::default(),
        };
        Outcome {
            chosen,
            worst: comparison.worst.max(backward.worst),
            failure: failure.or(backward.failure),
            refused: false,
            backward_entries: backward.entries,
        }
    }

    /// The attention backward against the oracle's backward bound (`bound::attention_backward`,
    /// given the forward's output as the plan stored it), for a dL/dO of the case's size; a
    /// plan that claims to be deterministic must give the same gradients bit for bit twice.
    /// Nothing is checked where the plan has no backward (`Error::Unsupported`).
    fn check_backward<T: Scalar>(
        &self,
        plan: &mut (dyn AttentionPlan<T> + '_),
        p: &Prepared<T>,
    ) -> BackwardCheck {
        let failed = |failure: String| BackwardCheck {
            entries: 0,
            worst: f64::INFINITY,
            failure: Some(failure),
        };
        let (first, second, expected) = match self.run_backward(plan, p) {
            Ok(Some(runs)) => runs,
            Ok(None) => return BackwardCheck::default(),
            Err(e) => return failed(format!("backward failed: {e}")),
        };
        let named = [
            ("dQ", &expected.dq),
            ("dK", &expected.dk),
            ("dV", &expected.dv),
            ("dbias", &expected.dbias),
        ];
        let mut check = BackwardCheck::default();
        for ((name, expectation), got) in named.into_iter().zip(&first) {
            let verdict = match expectation.check(got) {
                Ok(v) => v,
                Err(e) => return failed(format!("backward {name}: {e}")),
            };
            check.entries += verdict.entries;
            check.worst = check.worst.max(verdict.max_ratio);
            if let (None, Some((e, got, want))) = (&check.failure, verdict.first_failure) {
                check.failure = Some(format!(
                    "backward {name}: {} of {} entries outside the bound, the first at entry \
                     {e}: got {got}, expected {want}",
                    verdict.failures, verdict.entries
                ));
            }
        }
        if check.failure.is_none() && plan.info().deterministic {
            let bits = |runs: &[Vec<f64>; 4]| -> Vec<u64> {
                runs.iter().flatten().map(|v| v.to_bits()).collect()
            };
            if bits(&first) != bits(&second) {
                check.failure = Some(
                    "the backward claims to be deterministic, but two runs differ".to_string(),
                );
            }
        }
        check
    }

    /// A forward run on the case's Q, K and V, then the backward twice from the same dL/dO:
    /// both sets of gradients (dQ, dK, dV, dbias, each row-major) and the oracle's
    /// expectation; `None` where the plan has no backward.
    #[allow(clippy::type_complexity)]
    fn run_backward<T: Scalar>(
        &self,
        plan: &mut (dyn AttentionPlan<T> + '_),
        p: &Prepared<T>,
    ) -> Result<
        Option<(
            [Vec<f64>; 4],
            [Vec<f64>; 4],
            bound::AttentionGradsExpectation,
        )>,
    > {
        let backend = self.backend;
        let [q, k, v] = &p.operands.inputs[..] else {
            return Err(Error::invalid("attention takes Q, K and V"));
        };
        let (rows, width) = (p.a.rows(), v.shape().1);
        let d_o = HostDense::<T::Out>::new((rows, width), Layout::ColMajor, Strides::Tight, |e| {
            T::Out::from_f64(gradient_value(e))
        });
        let up = |h: &HostDense<T>| backend.upload(h.view()?);
        let (q_d, k_d, v_d) = (up(q)?, up(k)?, up(v)?);
        let g = backend.upload(d_o.view()?)?;
        let mut o = backend.upload(p.operands.prior.view()?)?;
        plan.run(q_d.as_ref(), k_d.as_ref(), v_d.as_ref(), o.as_mut())?;
        // Gradients start as NaN, so that an entry a backward leaves unwritten fails.
        let unwritten = |shape: (usize, usize)| {
            let nan = HostDense::<T::Out>::new(shape, Layout::RowMajor, Strides::Tight, |_| {
                T::Out::from_f64(f64::NAN)
            });
            backend.upload(nan.view()?)
        };
        let mut once = || -> Result<[Vec<f64>; 4]> {
            let (mut dq, mut dk, mut dv) = (
                unwritten(q.shape())?,
                unwritten(k.shape())?,
                unwritten(v.shape())?,
            );
            let mut dbias = unwritten((p.a.nnz(), 1))?;
            plan.backward(AttentionBackward {
                q: q_d.as_ref(),
                k: k_d.as_ref(),
                v: v_d.as_ref(),
                o: o.as_ref(),
                d_o: g.as_ref(),
                dq: dq.as_mut(),
                dk: dk.as_mut(),
                dv: dv.as_mut(),
                dbias: Some(dbias.as_mut()),
            })?;
            backend.synchronize()?;
            let host = |d: &Dense<T::Out>| -> Result<Vec<f64>> {
                Ok(HostDense::from_dense(backend.download(d)?)?.values())
            };
            Ok([host(&dq)?, host(&dk)?, host(&dv)?, host(&dbias)?])
        };
        let first = match once() {
            Err(Error::Unsupported { .. }) => return Ok(None),
            other => other?,
        };
        let second = once()?;
        let o_host = HostDense::from_dense(backend.download(&o)?)?;
        let shape = self
            .case
            .attention_desc(self.precision)
            .shape(q.shape().1, width)?;
        let expected = bound::attention_backward(
            p.a.as_ref(),
            self.precision,
            q.view()?,
            k.view()?,
            v.view()?,
            o_host.view()?,
            d_o.view()?,
            &shape,
        )?;
        Ok(Some((first, second, expected)))
    }

    /// What breaks the width contract of an SpMM or SDDMM plan made for one less than the
    /// case's width: its first run must fail with `Error::WidthExceeded`, and after
    /// `reserve(width)` the plan must report that width. Nothing to check for other
    /// operations, or at width 0.
    fn width_problem<T: Scalar>(
        &self,
        plan: &mut Plan<'_, T>,
        p: &Prepared<T>,
        output: &Output<'_, T::Out>,
    ) -> Option<String> {
        let width = self.case.width;
        if !matches!(plan, Plan::Spmm(_) | Plan::Sddmm(_)) || width == 0 {
            return None;
        }
        let narrower = width - 1;
        let run = format!("a run of width {width} on a plan reserved for {narrower}");
        match self.execute(plan, p, output, p.alpha) {
            Err(Error::WidthExceeded {
                width: w,
                reserved: r,
                ..
            }) if (w, r) == (width, narrower) => {}
            Err(Error::WidthExceeded {
                width: w,
                reserved: r,
                ..
            }) => return Some(format!("{run} was refused as width {w} past {r}")),
            Err(e) => {
                return Some(format!(
                    "{run} failed with another error than WidthExceeded: {e}"
                ))
            }
            Ok(_) => return Some(format!("{run} ran instead of failing with WidthExceeded")),
        }
        if let Err(e) = plan.reserve(width) {
            return Some(format!("reserve({width}) failed: {e}"));
        }
        let reserved = plan.info().reserved_width;
        (reserved != width)
            .then(|| format!("after reserve({width}) the plan reports reserved_width {reserved}"))
    }

    /// What breaks the value-update contract: after a run with `-alpha` (R_neg), the plan is
    /// given the matrix's values negated and runs with `alpha` (R_upd), which must equal R_neg
    /// (or, for SDDMM without `scale_by_values`, where the values do not enter, the `first`
    /// run): bit for bit when the plan is deterministic, else within twice each entry's
    /// bound. Skipped for attention, and where a negated value is not representable.
    fn update_problem<T: Scalar>(
        &self,
        plan: &mut Plan<'_, T>,
        p: &Prepared<T>,
        output: &Output<'_, T::Out>,
        first: &Execution,
    ) -> Option<String> {
        if matches!(plan, Plan::Attention(_)) {
            return None;
        }
        let negated = negated(p.a.values())?;
        let minus_alpha = T::Acc::from_f64(-p.alpha.to_f64());
        let r_neg = match self.execute(plan, p, output, minus_alpha) {
            Ok(r) => r,
            Err(e) => return Some(format!("the run with -alpha failed: {e}")),
        };
        if let Err(e) = self.update_values(plan, &negated) {
            return Some(format!("update_values failed: {e}"));
        }
        let updated = plan.info().clone();
        let r_upd = match self.execute(plan, p, output, p.alpha) {
            Ok(r) => r,
            Err(e) => return Some(format!("the run after update_values failed: {e}")),
        };
        if let Some(change) = info_change(&updated, plan.info()) {
            return Some(format!("{change} over the run after update_values"));
        }
        let (target, what) = if self.case.op == OpKind::Sddmm && !self.case.scale_by_values {
            (first, "the first run (S's values do not enter)")
        } else {
            (&r_neg, "the run with -alpha before it")
        };
        let exact = updated.deterministic;
        disagreement(&r_upd.values, &target.values, &p.bounds, exact).map(|e| {
            format!(
                "the run with the negated values differs from {what} at entry {e}: {} vs {}{}",
                r_upd.values.get(e).copied().unwrap_or(f64::NAN),
                target.values.get(e).copied().unwrap_or(f64::NAN),
                if exact {
                    " (the plan is deterministic)"
                } else {
                    ""
                }
            )
        })
    }

    /// Hands `values` to the plan in host memory where the backend reads it, else uploaded.
    fn update_values<T: Scalar>(&self, plan: &mut Plan<'_, T>, values: &[T]) -> Result<()> {
        let host = DenseRef::vector(values);
        if reads_host_memory(self.backend.kind()) {
            plan.update_values(host)
        } else {
            let uploaded = self.backend.upload(host)?;
            plan.update_values(uploaded.as_ref())
        }
    }

    /// One run on freshly staged operands (see [`reads_host_memory`]), from `output`'s prior;
    /// a result in a blocked format's value order is read back in CSR order.
    fn execute<T: Scalar>(
        &self,
        plan: &mut Plan<'_, T>,
        p: &Prepared<T>,
        output: &Output<'_, T::Out>,
        alpha: T::Acc,
    ) -> Result<Execution> {
        let run = self.execute_staged(plan, p, &output.prior, alpha)?;
        let Some(order) = &output.order else {
            return Ok(run);
        };
        let unzeroed_slot =
            (0..order.len()).find(|&s| order.entry(s).is_none() && run.values[s] != 0.0);
        Ok(Execution {
            values: order.to_csr_order(&run.values)?,
            padding_intact: run.padding_intact,
            unzeroed_slot,
        })
    }

    fn execute_staged<T: Scalar>(
        &self,
        plan: &mut Plan<'_, T>,
        p: &Prepared<T>,
        prior: &HostDense<T::Out>,
        alpha: T::Acc,
    ) -> Result<Execution> {
        if reads_host_memory(self.backend.kind()) {
            let inputs = p
                .operands
                .inputs
                .iter()
                .map(HostDense::view)
                .collect::<Result<Vec<_>>>()?;
            let mut out = prior.clone();
            plan.run(alpha, p.beta, &inputs, out.view_mut()?)?;
            Ok(Execution {
                values: out.values(),
                padding_intact: out.padding_unchanged(prior),
                unzeroed_slot: None,
            })
        } else {
            let uploaded = p
                .operands
                .inputs
                .iter()
                .map(|d| self.backend.upload(d.view()?))
                .collect::<Result<Vec<_>>>()?;
            let inputs: Vec<DenseRef<'_, T>> = uploaded.iter().map(Dense::as_ref).collect();
            let mut out = self.backend.upload(prior.view()?)?;
            plan.run(alpha, p.beta, &inputs, out.as_mut())?;
            self.backend.synchronize()?;
            let result = HostDense::from_dense(self.backend.download(&out)?)?;
            Ok(Execution {
                values: result.values(),
                padding_intact: result.padding_unchanged(prior),
                unzeroed_slot: None,
            })
        }
    }
}

/// The output every run of a plan starts from: the case's prior, in the plan's value order
/// when it has one (SDDMM in a blocked format), staged once for all the runs.
struct Output<'p, O: Scalar> {
    prior: Cow<'p, HostDense<O>>,
    order: Option<ValueOrder>,
}

impl<'p, O: Scalar> Output<'p, O> {
    fn new(prior: &'p HostDense<O>, order: Option<ValueOrder>) -> Self {
        let Some(order) = order else {
            return Output {
                prior: Cow::Borrowed(prior),
                order: None,
            };
        };
        // Padding slots start nonzero so that a kernel that leaves them alone is caught.
        let staged = HostDense::new((order.len(), 1), Layout::ColMajor, Strides::Tight, |s| {
            order.entry(s).map_or(O::from_f64(1.0), |e| prior.get(e, 0))
        });
        Output {
            prior: Cow::Owned(staged),
            order: Some(order),
        }
    }
}

/// The oracle's result for a case, its bounds, and the coefficients used.
struct Expectation {
    values: Vec<f64>,
    bounds: Vec<f64>,
    alpha: f64,
    beta: f64,
}

/// `alpha`, scaled by a power of two when needed so that `|alpha| * magnitude` stays within a
/// quarter of the output type's range: extreme values in f16 would otherwise overflow in
/// every correct kernel and test nothing. Integer alphas are left alone (they cannot shrink;
/// integer cases are sized not to overflow i32).
fn fit_alpha(alpha: f64, magnitude: f64, model: &ErrorModel) -> f64 {
    let excess = alpha.abs() * magnitude / (overflow_threshold(model.output) / 4.0);
    if model.exact || !excess.is_finite() || excess <= 1.0 {
        return alpha;
    }
    alpha * 2f64.powi(-(excess.log2().ceil() as i32))
}

/// Entry `e` of the dL/dO the attention backward is checked with: spread over [-1, 1], with
/// both signs in every row.
fn gradient_value(e: usize) -> f64 {
    ((e * 7919 + 13) % 257) as f64 / 128.0 - 1.0
}

/// An exact integer result (an f64 below 2^53) as the kernels' wrapping i32 arithmetic
/// stores it: modulo 2^32. The 16-bit modes overflow i32 after two products of extreme values.
fn wrap_i32(v: f64) -> f64 {
    if v.is_finite() && v.abs() < 2f64.powi(53) {
        f64::from(v as i64 as i32)
    } else {
        v
    }
}

/// `|alpha| * magnitude`, which is 0 when alpha is (A and x are then never read, and may be
/// NaN).
fn scaled(alpha: f64, magnitude: f64) -> f64 {
    if alpha == 0.0 {
        0.0
    } else {
        alpha.abs() * magnitude
    }
}

/// `|beta * y|`, which is 0 when beta is (y is then never read, and may be NaN).
fn prior_term<O: Scalar>(beta: f64, y: O) -> f64 {
    if beta == 0.0 {
        0.0
    } else {
        (beta * y.to_f64()).abs()
    }
}

/// The matrix with every value `|v|`.
fn abs<T: Scalar>(a: &Csr<T>) -> Csr<T> {
    let mut m = a.clone();
    m.values_mut()
        .iter_mut()
        .for_each(|v| *v = T::from_f64(v.to_f64().abs()));
    m
}

/// Where a plan's description of itself contradicts what it was asked to be. `auto` of the cuda
/// backend may hand a CSR SpMV to cuSPARSE on the same device, or run it in a format it builds
/// from the CSR itself; the plan then says so, and the rest must still match.
fn info_problem(info: &PlanInfo, backend: BackendKind, r: &PlanRequest) -> Option<String> {
    let mismatch = |what: &str, asked: String, reported: String| {
        (asked != reported)
            .then(|| format!("asked for {what} {asked}, the plan reports {reported}"))
    };
    let cuda_auto = r.algorithm == Algorithm::Auto && backend == BackendKind::Cuda;
    let backend = if cuda_auto && info.backend == BackendKind::Cusparse {
        info.backend
    } else {
        backend
    };
    let format = if cuda_auto { info.format } else { r.format };
    mismatch("backend", backend.to_string(), info.backend.to_string())
        .or_else(|| mismatch("op", r.op.to_string(), info.op.to_string()))
        .or_else(|| mismatch("format", format.to_string(), info.format.to_string()))
        .or_else(|| {
            mismatch(
                "precision",
                r.precision.to_string(),
                info.precision.to_string(),
            )
        })
        .or_else(|| {
            (info.algorithm == Algorithm::Auto)
                .then(|| "the plan reports algorithm auto instead of the one it chose".to_string())
        })
        .or_else(|| {
            if r.algorithm == Algorithm::Auto {
                None
            } else {
                mismatch(
                    "algorithm",
                    r.algorithm.to_string(),
                    info.algorithm.to_string(),
                )
            }
        })
        .or_else(|| {
            r.max_width.and_then(|w| {
                mismatch(
                    "reserved width",
                    w.to_string(),
                    info.reserved_width.to_string(),
                )
            })
        })
}

/// The first entry over its bound, located in an output with `cols` columns.
fn describe_mismatch(c: &Comparison, cols: usize) -> String {
    let Some(m) = c.first_failure else {
        return format!("result has the wrong length ({} entries)", c.entries);
    };
    let at = if cols == 1 {
        format!("entry {}", m.index)
    } else {
        format!("entry ({}, {})", m.index / cols, m.index % cols)
    };
    format!(
        "{at}: got {}, expected {}, bound {:.3e} ({} of {} entries over their bound)",
        m.got, m.expected, m.bound, c.failures, c.entries
    )
}

/// The first entry where two runs differ bit for bit (two NaNs count as equal: their payloads
/// are not part of the result).
fn first_difference(a: &[f64], b: &[f64]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter()
        .zip(b)
        .position(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()))
}

/// The first entry where `got` and `want` disagree: in value when `exact` (bit for bit but for
/// the sign of zero, which a negation moves legitimately: an empty row gives `alpha * 0`),
/// else by more than twice the entry's bound. Two NaNs agree.
fn disagreement(got: &[f64], want: &[f64], bounds: &[f64], exact: bool) -> Option<usize> {
    if got.len() != want.len() {
        return Some(got.len().min(want.len()));
    }
    got.iter()
        .zip(want)
        .zip(bounds)
        .position(|((&g, &w), &bound)| {
            let agree =
                g == w || (g.is_nan() && w.is_nan()) || (!exact && (g - w).abs() <= 2.0 * bound);
            !agree
        })
}

/// `values` negated, or `None` when a negation is not exactly representable (`i8::MIN`).
fn negated<T: Scalar>(values: &[T]) -> Option<Vec<T>> {
    values
        .iter()
        .map(|v| {
            let minus = -v.to_f64();
            let n = T::from_f64(minus);
            (n.to_f64() == minus || minus.is_nan()).then_some(n)
        })
        .collect()
}

/// A run refusing operand shapes or strides its kernels cannot take, with a typed error that
/// names them (a cuSPARSE algorithm and an odd leading dimension; a stride past the index type).
fn is_refusal(e: &Error) -> bool {
    matches!(e, Error::Unsupported { .. } | Error::IndexOverflow { .. })
}

/// How the parts of [`PlanInfo`] that only `reserve` may change differ from `before`.
fn info_change(before: &PlanInfo, after: &PlanInfo) -> Option<String> {
    let parts = [
        ("bytes", before.bytes.to_string(), after.bytes.to_string()),
        (
            "reserved_width",
            before.reserved_width.to_string(),
            after.reserved_width.to_string(),
        ),
        (
            "algorithm",
            before.algorithm.to_string(),
            after.algorithm.to_string(),
        ),
    ];
    parts
        .into_iter()
        .find(|(_, b, a)| b != a)
        .map(|(what, b, a)| format!("{what} changed from {b} to {a}"))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cuda_auto_may_hand_a_plan_to_cusparse() {
        let request = |algorithm| PlanRequest {
            op: OpKind::Spmv,
            format: Format::Csr,
            precision: Precision::F64,
            algorithm,
            scale_by_values: false,
            heads: 1,
            bias: false,
            max_width: None,
        };
        let mut vendor = PlanInfo::new(
            BackendKind::Cusparse,
            OpKind::Spmv,
            Format::Coo,
            Precision::F64,
            Algorithm::VendorDefault,
            false,
        );
        let auto = request(Algorithm::Auto);
        assert_eq!(info_problem(&vendor, BackendKind::Cuda, &auto), None);
        assert!(info_problem(&vendor, BackendKind::Cpu, &auto).is_some());
        assert!(info_problem(&vendor, BackendKind::Cuda, &request(Algorithm::Scalar)).is_some());
        vendor.precision = Precision::F32;
        assert!(info_problem(&vendor, BackendKind::Cuda, &auto).is_some());
    }

    #[test]
    fn alpha_is_fitted_only_for_float_outputs_that_would_overflow() {
        let f16_out = ErrorModel::new(Precision::F16, DType::F16);
        let fitted = fit_alpha(-1.5, 1e9, &f16_out);
        assert!(
            fitted < 0.0 && fitted.abs() * 1e9 <= 65520.0 / 4.0,
            "{fitted}"
        );
        assert_eq!((fitted / -1.5).log2().fract(), 0.0);
        assert_eq!(fit_alpha(-1.5, 10.0, &f16_out), -1.5);
        assert_eq!(
            fit_alpha(2.0, 1e300, &ErrorModel::new(Precision::F64, DType::F64)),
            2.0
        );
        assert_eq!(
            fit_alpha(2.0, 1e12, &ErrorModel::new(Precision::I8, DType::I32)),
            2.0
        );
        assert_eq!(fit_alpha(1.0, f64::INFINITY, &f16_out), 1.0);
    }

    #[test]
    fn algorithm_lists_are_auto_and_the_backends_table() {
        let cpu = Backend::from_name("cpu").unwrap();
        let spmv = algorithms(&cpu, OpKind::Spmv, Format::Csr, Precision::F64);
        let table: Vec<Algorithm> = cpu
            .algorithms(OpKind::Spmv, Format::Csr, Precision::F64)
            .iter()
            .map(|o| o.algorithm)
            .collect();
        assert_eq!(spmv[0], Algorithm::Auto);
        assert_eq!(spmv[1..], table);
        assert!(spmv.contains(&Algorithm::Reference));
        assert!(algorithms(&cpu, OpKind::Spmv, Format::Csr, Precision::TF32).is_empty());
    }

    #[test]
    fn updates_agree_exactly_or_within_twice_the_bound() {
        let bounds = [0.5, 0.5, 0.5];
        let got = [1.0, 0.0, f64::NAN];
        assert_eq!(
            disagreement(&got, &[1.0, -0.0, f64::NAN], &bounds, true),
            None
        );
        assert_eq!(
            disagreement(&got, &[1.5, 0.0, f64::NAN], &bounds, true),
            Some(0)
        );
        assert_eq!(
            disagreement(&got, &[1.9, 0.0, f64::NAN], &bounds, false),
            None
        );
        assert_eq!(
            disagreement(&got, &[2.1, 0.0, f64::NAN], &bounds, false),
            Some(0)
        );
        assert_eq!(
            disagreement(&got, &[1.0, 0.0, 1.0], &bounds, false),
            Some(2)
        );
        assert_eq!(negated(&[1.5f32, -0.0]), Some(vec![-1.5, 0.0]));
        assert_eq!(negated(&[3i8, -127]), Some(vec![-3, 127]));
        assert_eq!(negated(&[3i8, i8::MIN]), None);
    }

    #[test]
    fn differences_ignore_nan_payloads_only() {
        assert_eq!(first_difference(&[1.0, f64::NAN], &[1.0, -f64::NAN]), None);
        assert_eq!(first_difference(&[0.0, 1.0], &[-0.0, 1.0]), Some(0));
        assert_eq!(first_difference(&[1.0], &[]), Some(0));
    }
}
