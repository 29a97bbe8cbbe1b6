//! The conformance suite, written once for every backend and every scalar type.
//!
//! For each case the suite asks the backend which (format, precision) pairs it supports,
//! rounds the matrix and dense operands to the precision's host type (and TF32 when that is
//! the compute mode), computes the oracle's result and a per-entry bound (see [`crate::bound`]),
//! then for each algorithm: plans, runs twice on freshly staged operands, and compares. A check
//! also fails when the plan misreports itself, writes into the padding of its output, or
//! claims to be deterministic while its two runs differ. Every combination the backend calls
//! Unsupported must refuse to plan with `Error::Unsupported`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use sparse_blas::{
    bf16, f16, reference, Accumulator, Algorithm, AttentionDesc, AttentionPlan, Backend,
    BackendKind, Csr, CsrRef, DType, Dense, DenseMut, DenseRef, Error, Executor, Format, Layout,
    OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SddmmPlan, SpmmDesc, SpmmPlan,
    SpmvDesc, SpmvPlan, Support, ValueOrder,
};

use crate::bound::{overflow_threshold, AttentionTerms, Comparison, ErrorModel};
use crate::case::{Case, MatrixSource};
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

/// The algorithms the suite runs for `op` on `format` on a backend of this kind: `Auto`, then
/// every algorithm the backend offers for them. A new backend or kernel adds its entry here.
pub fn algorithms(kind: BackendKind, op: OpKind, format: Format) -> Vec<Algorithm> {
    let offered: &[Algorithm] = match (kind, op, format) {
        (BackendKind::Cpu, OpKind::Spmv, Format::Csr) => {
            &[Algorithm::NnzSplit, Algorithm::Reference]
        }
        (BackendKind::Cpu, _, Format::Csr) => &[Algorithm::RowSplit, Algorithm::Reference],
        (BackendKind::Cpu, _, _) => &[Algorithm::RowSplit],
        (BackendKind::Cuda, OpKind::Spmv, Format::Csr) => &[
            Algorithm::Scalar,
            Algorithm::Vector,
            Algorithm::VectorSplit,
            Algorithm::MergePath,
        ],
        (BackendKind::Cuda, OpKind::Spmv, Format::Coo) => &[Algorithm::Atomic],
        (BackendKind::Cuda, OpKind::Spmm | OpKind::Sddmm, Format::Csr) => &[
            Algorithm::Vector,
            Algorithm::Rode,
            Algorithm::RodeDeterministic,
        ],
        (BackendKind::Cuda, OpKind::Spmm | OpKind::Sddmm, Format::MeBcrs) => {
            &[Algorithm::FlashSparse, Algorithm::FlashSparse16x1]
        }
        (BackendKind::Cusparse, OpKind::Spmv, Format::Csr | Format::Coo) => &[
            Algorithm::VendorDefault,
            Algorithm::VendorAlg1,
            Algorithm::VendorAlg2,
        ],
        (BackendKind::Cusparse, OpKind::Spmm, Format::Csr) => &[
            Algorithm::VendorDefault,
            Algorithm::VendorAlg1,
            Algorithm::VendorAlg2,
            Algorithm::VendorAlg3,
        ],
        (BackendKind::Cusparse, OpKind::Sddmm, Format::Csr) => &[Algorithm::VendorDefault],
        _ => &[],
    };
    std::iter::once(Algorithm::Auto)
        .chain(offered.iter().copied())
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
                    &SpmmDesc::new(r.precision)
                        .format(r.format)
                        .algorithm(r.algorithm),
                )?,
            ),
            OpKind::Sddmm => Plan::Sddmm(
                backend.plan_sddmm(
                    a,
                    &SddmmDesc::new(r.precision)
                        .format(r.format)
                        .algorithm(r.algorithm)
                        .scale_by_values(r.scale_by_values),
                )?,
            ),
            OpKind::Attention => Plan::Attention(
                backend.plan_attention(
                    a,
                    &AttentionDesc::new(r.precision)
                        .format(r.format)
                        .algorithm(r.algorithm),
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
}

impl Outcome {
    fn refused() -> Self {
        Outcome {
            chosen: None,
            worst: 0.0,
            failure: None,
            refused: true,
        }
    }
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
                None => algorithms(self.backend.kind(), self.case.op, format),
            };
            for algorithm in algorithms {
                let request = PlanRequest {
                    op: self.case.op,
                    format,
                    precision: self.precision,
                    algorithm,
                    scale_by_values: self.case.scale_by_values,
                };
                let outcome = catch_unwind(AssertUnwindSafe(|| self.check(&prepared, &request)))
                    .unwrap_or_else(|panic| Outcome {
                        chosen: None,
                        worst: f64::INFINITY,
                        failure: Some(format!("panicked: {}", panic_message(panic.as_ref()))),
                        refused: false,
                    });
                if outcome.refused {
                    report.refused += 1;
                    continue;
                }
                report.rows.push(Row {
                    format,
                    algorithm,
                    chosen: outcome.chosen,
                    entries: prepared.expected.len(),
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
            *v = tested_value(original, self.precision);
        }
        let operands =
            Operands::<T>::generate(self.case, (a.rows(), a.cols(), a.nnz()), self.precision);
        let model = ErrorModel::new(self.precision, <T::Out as Scalar>::DTYPE);
        let expectation = match self.case.op {
            OpKind::Spmv | OpKind::Spmm => self.expect_linear(&a, &operands, &model)?,
            OpKind::Sddmm => self.expect_sddmm(&a, &operands, &model)?,
            _ => self.expect_attention(&a, &operands, &model)?,
        };
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
        let (d, dv) = (q.shape().1, v.shape().1);
        let scale = AttentionDesc::new(self.precision).resolved_scale(d)?;
        let values = reference::attention(a.as_ref(), q.view()?, k.view()?, v.view()?, scale)?
            .into_host_vec()?;
        let scores = reference::sddmm(
            a.as_ref(),
            1.0,
            q.abs().view()?,
            k.abs().view()?,
            0.0,
            None,
            false,
        )?;
        let a = a.as_ref();
        let mut bounds = Vec::with_capacity(values.len());
        for i in 0..a.rows() {
            let range = a.row_range(i);
            let score_magnitude = scale.abs()
                * scores[range.clone()]
                    .iter()
                    .fold(0.0, |m: f64, &s| m.max(s));
            for t in 0..dv {
                let v_max = range.clone().fold(0.0, |m: f64, e| {
                    m.max(v.get(a.col_idx()[e] as usize, t).to_f64().abs())
                });
                let terms = AttentionTerms {
                    entries: range.len(),
                    width: d,
                    score_magnitude,
                    v_max,
                };
                bounds.push(model.attention(terms, values[i * dv + t]));
            }
        }
        Ok(Expectation {
            values,
            bounds,
            alpha: 1.0,
            beta: 0.0,
        })
    }

    /// Plans, runs twice, compares.
    fn check<T: Scalar>(&self, p: &Prepared<T>, request: &PlanRequest) -> Outcome {
        let failed = |chosen, failure: String| Outcome {
            chosen,
            worst: f64::INFINITY,
            failure: Some(failure),
            refused: false,
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
        let order = plan.value_order();
        let runs = self
            .execute(&mut plan, p, order.as_ref())
            .and_then(|first| Ok((first, self.execute(&mut plan, p, order.as_ref())?)));
        let (first, second) = match runs {
            Ok(runs) => runs,
            // A plan may refuse operand shapes its library cannot take (see the cusparse table).
            Err(Error::Unsupported { .. }) => return Outcome::refused(),
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
        Outcome {
            chosen,
            worst: comparison.worst,
            failure,
            refused: false,
        }
    }

    /// One run on freshly staged operands (see [`reads_host_memory`]); an output in a blocked
    /// format's value `order` is staged in that order and read back in CSR order.
    fn execute<T: Scalar>(
        &self,
        plan: &mut Plan<'_, T>,
        p: &Prepared<T>,
        order: Option<&ValueOrder>,
    ) -> Result<Execution> {
        let Some(order) = order else {
            return self.execute_staged(plan, p, &p.operands.prior);
        };
        let prior = &p.operands.prior;
        // Padding slots start nonzero so that a kernel that leaves them alone is caught.
        let staged = HostDense::new((order.len(), 1), Layout::ColMajor, false, |s| {
            order
                .entry(s)
                .map_or(<T::Out as Scalar>::from_f64(1.0), |e| prior.get(e, 0))
        });
        let run = self.execute_staged(plan, p, &staged)?;
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
    ) -> Result<Execution> {
        if reads_host_memory(self.backend.kind()) {
            let inputs = p
                .operands
                .inputs
                .iter()
                .map(HostDense::view)
                .collect::<Result<Vec<_>>>()?;
            let mut out = prior.clone();
            plan.run(p.alpha, p.beta, &inputs, out.view_mut()?)?;
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
            plan.run(p.alpha, p.beta, &inputs, out.as_mut())?;
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

/// Where a plan's description of itself contradicts what it was asked to be.
fn info_problem(info: &PlanInfo, backend: BackendKind, r: &PlanRequest) -> Option<String> {
    let mismatch = |what: &str, asked: String, reported: String| {
        (asked != reported)
            .then(|| format!("asked for {what} {asked}, the plan reports {reported}"))
    };
    mismatch("backend", backend.to_string(), info.backend.to_string())
        .or_else(|| mismatch("op", r.op.to_string(), info.op.to_string()))
        .or_else(|| mismatch("format", r.format.to_string(), info.format.to_string()))
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
    fn algorithm_lists_start_with_auto_and_follow_the_backend() {
        let spmv = algorithms(BackendKind::Cpu, OpKind::Spmv, Format::Csr);
        assert_eq!(spmv[0], Algorithm::Auto);
        assert!(spmv.contains(&Algorithm::NnzSplit) && spmv.contains(&Algorithm::Reference));
        let spmm = algorithms(BackendKind::Cpu, OpKind::Spmm, Format::Csr);
        assert!(!spmm.contains(&Algorithm::NnzSplit));
        let coo = algorithms(BackendKind::Cuda, OpKind::Spmv, Format::Coo);
        assert_eq!(coo, [Algorithm::Auto, Algorithm::Atomic]);
    }

    #[test]
    fn differences_ignore_nan_payloads_only() {
        assert_eq!(first_difference(&[1.0, f64::NAN], &[1.0, -f64::NAN]), None);
        assert_eq!(first_difference(&[0.0, 1.0], &[-0.0, 1.0]), Some(0));
        assert_eq!(first_difference(&[1.0], &[]), Some(0));
    }
}
