//! The CPU plans against the plan contract: the algorithm table is what plans (and what the
//! refusals name), new values reach every format without re-planning, and runs wider than the
//! reservation are refused until `reserve`.

use std::any::Any;

use sparse_core::{
    bf16, f16, supported_summary, Accumulator, Algorithm, AttentionDesc, BlockShape, Dense,
    DenseRef, DeviceMemory, Error, Executor, Format, Layout, Memory, OpKind, PlanInfo, Precision,
    Result, Scalar, SddmmDesc, SpmmDesc, SpmvDesc, Support, DEFAULT_MAX_WIDTH,
};
use sparse_cpu::CpuBackend;
use sparse_formats::{generate, Converted, Csr, FillLimit, Tiled16};

const CPU: CpuBackend = CpuBackend;

/// Patterns with ragged edges against every block shape, empty rows and a skewed row length.
fn patterns() -> Vec<Csr<f64>> {
    let mut sparse_rows: Vec<_> = (0..45)
        .filter(|r| r % 4 != 1)
        .flat_map(|r| (0..r % 6 + 1).map(move |k| (r, (r * 5 + 7 * k) % 39, 1.0)))
        .collect();
    sparse_rows.extend((0..39).map(|c| (10, c, 1.0)));
    vec![
        generate::uniform::<f64, u32>(53, 37, 4, 11).unwrap(),
        generate::rmat::<f64, u32>(6, 5, 2).unwrap(),
        Csr::from_triplets(45, 39, &sparse_rows).unwrap(),
    ]
}

/// `a`'s pattern with small integer values (exact in every precision), `seed` choosing them.
fn valued<T: Scalar>(a: &Csr<f64>, seed: usize) -> Csr<T> {
    let mut b = a.clone();
    for (e, v) in b.values_mut().iter_mut().enumerate() {
        *v = ((e * (2 * seed + 3) + seed) % 7) as f64 - 3.0;
    }
    b.cast()
}

fn dense<T: Scalar>(rows: usize, cols: usize, layout: Layout, seed: usize) -> Dense<T> {
    Dense::from_fn(rows, cols, layout, |i, j| {
        T::from_f64(((i * 3 + j * 5 + seed) % 5) as f64 - 2.0)
    })
}

fn bits<O: Scalar>(d: Dense<O>) -> Vec<u64> {
    let d = d.to_layout(Layout::ColMajor).unwrap();
    d.into_host_vec()
        .unwrap()
        .iter()
        .map(|v| v.to_f64().to_bits())
        .collect()
}

fn acc<T: Scalar>(v: f64) -> T::Acc {
    T::Acc::from_f64(v)
}

/// One planned operation with update and run behind one interface, so the checks below run
/// over SpMV, SpMM and SDDMM alike.
trait Planned<T: Scalar> {
    fn info(&self) -> &PlanInfo;
    fn update(&mut self, values: DenseRef<'_, T>) -> Result<()>;
    /// The output of a run with fixed operands of `width` columns (1 for SpMV), beta != 0.
    fn run(&mut self, width: usize) -> Result<Vec<u64>>;
    fn reserve(&mut self, width: usize) -> Result<()>;
}

struct Spmv<'a, T: Scalar>(Box<dyn sparse_core::SpmvPlan<T> + 'a>, (usize, usize));
struct Spmm<'a, T: Scalar>(Box<dyn sparse_core::SpmmPlan<T> + 'a>, (usize, usize));
struct Sddmm<'a, T: Scalar>(
    Box<dyn sparse_core::SddmmPlan<T> + 'a>,
    (usize, usize),
    usize,
);

impl<T: Scalar> Planned<T> for Spmv<'_, T> {
    fn info(&self) -> &PlanInfo {
        self.0.info()
    }
    fn update(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.0.update_values(values)
    }
    fn run(&mut self, _: usize) -> Result<Vec<u64>> {
        let (rows, cols) = self.1;
        let x = dense::<T>(cols, 1, Layout::ColMajor, 1);
        let mut y = dense::<T::Out>(rows, 1, Layout::ColMajor, 2);
        self.0
            .run(acc::<T>(2.0), x.as_ref(), acc::<T>(-1.0), y.as_mut())?;
        Ok(bits(y))
    }
    fn reserve(&mut self, _: usize) -> Result<()> {
        Ok(())
    }
}

impl<T: Scalar> Planned<T> for Spmm<'_, T> {
    fn info(&self) -> &PlanInfo {
        self.0.info()
    }
    fn update(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.0.update_values(values)
    }
    fn run(&mut self, width: usize) -> Result<Vec<u64>> {
        let (rows, cols) = self.1;
        let b = dense::<T>(cols, width, Layout::RowMajor, 3);
        let mut c = dense::<T::Out>(rows, width, Layout::ColMajor, 4);
        self.0
            .run(acc::<T>(2.0), b.as_ref(), acc::<T>(-1.0), c.as_mut())?;
        Ok(bits(c))
    }
    fn reserve(&mut self, width: usize) -> Result<()> {
        self.0.reserve(width)
    }
}

impl<T: Scalar> Planned<T> for Sddmm<'_, T> {
    fn info(&self) -> &PlanInfo {
        self.0.info()
    }
    fn update(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.0.update_values(values)
    }
    fn run(&mut self, width: usize) -> Result<Vec<u64>> {
        let ((rows, cols), nnz) = (self.1, self.2);
        let slots = self.0.value_order().map_or(nnz, |o| o.len());
        let x = dense::<T>(rows, width, Layout::RowMajor, 5);
        let y = dense::<T>(cols, width, Layout::ColMajor, 6);
        let mut c = dense::<T::Out>(slots, 1, Layout::ColMajor, 7);
        self.0.run(
            acc::<T>(2.0),
            x.as_ref(),
            y.as_ref(),
            acc::<T>(-1.0),
            c.as_mut(),
        )?;
        Ok(bits(c))
    }
    fn reserve(&mut self, width: usize) -> Result<()> {
        self.0.reserve(width)
    }
}

/// What a test asks a plan for.
#[derive(Clone, Copy, Debug)]
struct Ask {
    op: OpKind,
    format: Format,
    precision: Precision,
    algorithm: Algorithm,
    max_width: Option<usize>,
}

impl Ask {
    fn new(op: OpKind, format: Format, precision: Precision, algorithm: Algorithm) -> Self {
        Ask {
            op,
            format,
            precision,
            algorithm,
            max_width: None,
        }
    }
}

/// A plan of `a` as `ask` says; SDDMM multiplies by S's values, so that they matter.
fn plan<'a, T: Scalar>(a: &'a Csr<T>, ask: Ask) -> Result<Box<dyn Planned<T> + 'a>> {
    let shape = a.shape();
    Ok(match ask.op {
        OpKind::Spmv => {
            let desc = SpmvDesc::new(ask.precision)
                .format(ask.format)
                .algorithm(ask.algorithm);
            Box::new(Spmv(CPU.plan_spmv(a.as_ref(), &desc)?, shape))
        }
        OpKind::Spmm => {
            let mut desc = SpmmDesc::new(ask.precision)
                .format(ask.format)
                .algorithm(ask.algorithm);
            desc.max_width = ask.max_width;
            Box::new(Spmm(CPU.plan_spmm(a.as_ref(), &desc)?, shape))
        }
        OpKind::Sddmm => {
            let mut desc = SddmmDesc::new(ask.precision)
                .format(ask.format)
                .algorithm(ask.algorithm)
                .scale_by_values(true);
            desc.max_width = ask.max_width;
            Box::new(Sddmm(CPU.plan_sddmm(a.as_ref(), &desc)?, shape, a.nnz()))
        }
        other => panic!("{other} has no value updates"),
    })
}

/// What planning `ask` on a `T` matrix gives (attention included).
fn plan_info<T: Scalar>(ask: Ask) -> Result<PlanInfo> {
    let a: Csr<T> = valued(&patterns()[0], 0);
    if ask.op == OpKind::Attention {
        let desc = AttentionDesc::new(ask.precision)
            .format(ask.format)
            .algorithm(ask.algorithm);
        return CPU
            .plan_attention(a.as_ref(), &desc)
            .map(|p| p.info().clone());
    }
    plan(&a, ask).map(|p| p.info().clone())
}

/// [`plan_info`] with `T` the storage type of the precision; `None` for a storage type no
/// [`Scalar`] holds.
fn plan_in_storage_type(ask: Ask) -> Option<Result<PlanInfo>> {
    let p = ask.precision;
    Some(if p.storage == Precision::F64.storage {
        plan_info::<f64>(ask)
    } else if p.storage == Precision::F32.storage {
        plan_info::<f32>(ask)
    } else if p.storage == Precision::F16.storage {
        plan_info::<f16>(ask)
    } else if p.storage == Precision::BF16.storage {
        plan_info::<bf16>(ask)
    } else if p.storage == Precision::I8.storage {
        plan_info::<i8>(ask)
    } else if p.storage == Precision::L16_R16.storage {
        plan_info::<i16>(ask)
    } else {
        return None;
    })
}

#[test]
fn the_table_lists_the_cpu_kernels() {
    let algorithms = |op, format, precision| -> Vec<Algorithm> {
        CPU.algorithms(op, format, precision)
            .iter()
            .map(|o| o.algorithm)
            .collect()
    };
    use Algorithm::{NnzSplit, Reference, RowSplit};
    assert_eq!(
        algorithms(OpKind::Spmv, Format::Csr, Precision::F64),
        [NnzSplit, Reference]
    );
    assert_eq!(
        algorithms(OpKind::Sddmm, Format::Csr, Precision::I8),
        [RowSplit, Reference]
    );
    assert_eq!(
        algorithms(OpKind::Spmv, Format::Tiled16, Precision::BF16),
        [RowSplit]
    );
    assert!(algorithms(OpKind::Spmm, Format::Ell, Precision::F64).is_empty());
    assert!(algorithms(OpKind::Attention, Format::Csr, Precision::I8).is_empty());
    assert!(algorithms(OpKind::Spmv, Format::Csr, Precision::TF32).is_empty());
    assert_eq!(
        supported_summary(&|o, f, p| CPU.algorithms(o, f, p), OpKind::Sddmm),
        "sddmm on csr in f64 f32 f16 bf16 i8 i4 l8-r4 l12-r4 l16-r4 l16-r8 l16-r16 (row-split, \
         reference); on me-bcrs in f64 f32 f16 bf16 i8 (row-split); on sr-bcrs in f64 f32 f16 \
         bf16 i8 i4 l8-r4 l12-r4 l16-r4 l16-r8 l16-r16 (row-split)"
    );
    for op in OpKind::ALL {
        for format in Format::ALL {
            for precision in Precision::ALL {
                let offers = CPU.algorithms(*op, *format, precision);
                assert!(offers
                    .iter()
                    .all(|o| o.support == Support::Native && o.deterministic));
                let expected = if offers.is_empty() {
                    Support::Unsupported
                } else {
                    Support::Native
                };
                assert_eq!(CPU.capability(*op, *format, precision), expected);
            }
        }
    }
}

#[test]
fn every_listed_algorithm_plans_and_nothing_else_does() {
    let table = |op, format, precision| CPU.algorithms(op, format, precision);
    for &op in OpKind::ALL {
        let summary = supported_summary(&table, op);
        for &format in Format::ALL {
            for precision in Precision::ALL {
                let offers = table(op, format, precision);
                let listed: Vec<Algorithm> = offers.iter().map(|o| o.algorithm).collect();
                for &algorithm in Algorithm::ALL {
                    let ask = Ask::new(op, format, precision, algorithm);
                    let Some(planned) = plan_in_storage_type(ask) else {
                        assert!(offers.is_empty(), "{ask:?}");
                        continue;
                    };
                    let context = format!("{ask:?}");
                    if listed.contains(&algorithm)
                        || (algorithm == Algorithm::Auto && !offers.is_empty())
                    {
                        let info = planned.unwrap_or_else(|e| panic!("{context}: {e}"));
                        let chosen = if algorithm == Algorithm::Auto {
                            listed[0]
                        } else {
                            algorithm
                        };
                        assert_eq!(
                            (info.algorithm, info.format, info.op, info.deterministic),
                            (chosen, format, op, true),
                            "{context}"
                        );
                        continue;
                    }
                    let err = planned.unwrap_err();
                    let text = err.to_string();
                    match err {
                        Error::Unsupported {
                            algorithm: Some(named),
                            ..
                        } => {
                            assert_eq!(named, algorithm, "{context}");
                            let names: Vec<&str> = listed.iter().map(|a| a.name()).collect();
                            let runs = format!("with auto, {}", names.join(", "));
                            assert!(text.contains(&runs), "{context}: {text}");
                        }
                        Error::Unsupported {
                            algorithm: None, ..
                        } => {
                            assert!(offers.is_empty(), "{context}");
                            assert!(text.contains(&summary), "{context}: {text}");
                        }
                        other => panic!("{context}: {other}"),
                    }
                }
            }
        }
    }
}

#[test]
fn a_precision_of_another_storage_type_is_refused() {
    let a: Csr<f32> = valued(&patterns()[0], 0);
    let err = CPU
        .plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F64))
        .err()
        .unwrap();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

/// The (op, format) pairs with value updates, each with its algorithms in f64.
fn updatable() -> Vec<Ask> {
    let mut asks = Vec::new();
    for op in [OpKind::Spmv, OpKind::Spmm, OpKind::Sddmm] {
        for &format in Format::ALL {
            for offer in CPU.algorithms(op, format, Precision::F64) {
                asks.push(Ask::new(op, format, Precision::F64, offer.algorithm));
            }
        }
    }
    asks
}

/// A plan updated with new values computes bit for bit what a fresh plan on the CSR with
/// those values computes.
fn check_update<T: Scalar>(a: &Csr<f64>, ask: Ask) {
    let (old, new) = (valued::<T>(a, 1), valued::<T>(a, 2));
    let context = format!("{ask:?} on {}x{}", a.rows(), a.cols());
    let mut updated = plan(&old, ask).unwrap();
    let before = updated.run(5).unwrap();
    updated
        .update(DenseRef::vector(new.values()))
        .unwrap_or_else(|e| panic!("{context}: {e}"));
    let after = updated.run(5).unwrap();
    let fresh = plan(&new, ask).unwrap().run(5).unwrap();
    assert_eq!(after, fresh, "{context}");
    assert_ne!(before, after, "{context}: the new values changed nothing");
    // A second update overwrites the first; a strided column is read element by element.
    let third = valued::<T>(a, 3);
    let mut spaced = vec![T::default(); 3 * a.nnz()];
    for (e, &v) in third.values().iter().enumerate() {
        spaced[3 * e] = v;
    }
    let strided =
        DenseRef::try_new(Memory::Host(&spaced), a.nnz(), 1, 3, Layout::RowMajor).unwrap();
    updated.update(strided).unwrap();
    let fresh = plan(&third, ask).unwrap().run(5).unwrap();
    assert_eq!(updated.run(5).unwrap(), fresh, "{context}: second update");
}

#[test]
fn updated_values_compute_what_a_fresh_plan_computes() {
    for a in patterns() {
        for ask in updatable() {
            check_update::<f64>(&a, ask);
        }
    }
}

#[test]
fn updates_work_in_every_storage_type() {
    let a = &patterns()[0];
    for ask in updatable() {
        check_update::<f32>(
            a,
            Ask {
                precision: Precision::F32,
                ..ask
            },
        );
        check_update::<f16>(
            a,
            Ask {
                precision: Precision::F16,
                ..ask
            },
        );
        check_update::<bf16>(
            a,
            Ask {
                precision: Precision::BF16,
                ..ask
            },
        );
        check_update::<i8>(
            a,
            Ask {
                precision: Precision::I8,
                ..ask
            },
        );
    }
}

/// Memory a device backend would own; the CPU must refuse it.
struct DeviceBuffer(usize);

impl DeviceMemory<f64> for DeviceBuffer {
    fn location(&self) -> String {
        "cuda:0".to_string()
    }
    fn len(&self) -> usize {
        self.0
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn updates_of_the_wrong_length_or_in_device_memory_are_refused() {
    let a = &patterns()[0];
    let old = valued::<f64>(a, 1);
    let nnz = a.nnz();
    for ask in updatable() {
        let context = format!("{ask:?}");
        let mut p = plan(&old, ask).unwrap();
        let before = p.run(3).unwrap();
        let short = vec![1.0; nnz - 1];
        match p.update(DenseRef::vector(&short)).unwrap_err() {
            Error::ShapeMismatch {
                expected, found, ..
            } => assert_eq!((expected, found), ((nnz, 1), (nnz - 1, 1)), "{context}"),
            other => panic!("{context}: {other}"),
        }
        let wide = vec![1.0; 2 * nnz];
        let err = p
            .update(DenseRef::from_slice(&wide, nnz, 2, Layout::ColMajor).unwrap())
            .unwrap_err();
        assert!(
            matches!(err, Error::ShapeMismatch { .. }),
            "{context}: {err}"
        );
        let device = DeviceBuffer(nnz);
        let on_device =
            DenseRef::try_new(Memory::Device(&device), nnz, 1, nnz, Layout::ColMajor).unwrap();
        let err = p.update(on_device).unwrap_err();
        assert!(
            matches!(&err, Error::WrongMemory { found, .. } if found == "cuda:0"),
            "{context}: {err}"
        );
        assert_eq!(
            p.run(3).unwrap(),
            before,
            "{context}: a refused update changed the plan"
        );
    }
}

#[test]
fn runs_past_the_reservation_wait_for_reserve() {
    let a = valued::<f64>(&patterns()[0], 1);
    for ask in updatable() {
        if ask.op == OpKind::Spmv {
            assert_eq!(plan(&a, ask).unwrap().info().reserved_width, 0);
            continue;
        }
        let context = format!("{ask:?}");
        let default = plan(&a, ask).unwrap();
        assert_eq!(
            default.info().reserved_width,
            DEFAULT_MAX_WIDTH,
            "{context}"
        );
        let mut p = plan(
            &a,
            Ask {
                max_width: Some(4),
                ..ask
            },
        )
        .unwrap();
        assert_eq!(p.info().reserved_width, 4, "{context}");
        let four = p.run(4).unwrap();
        match p.run(5).unwrap_err() {
            Error::WidthExceeded {
                op,
                width,
                reserved,
            } => assert_eq!((op, width, reserved), (ask.op, 5, 4), "{context}"),
            other => panic!("{context}: {other}"),
        }
        let bytes = p.info().bytes;
        p.reserve(9).unwrap();
        assert_eq!(
            (p.info().reserved_width, p.info().bytes),
            (9, bytes),
            "{context}"
        );
        p.run(9).unwrap();
        p.reserve(2).unwrap();
        assert_eq!(
            p.info().reserved_width,
            9,
            "{context}: reserve never narrows"
        );
        assert_eq!(p.run(4).unwrap(), four, "{context}");
    }
}

#[test]
fn the_width_is_checked_even_when_alpha_is_zero() {
    let a = valued::<f64>(&patterns()[0], 1);
    let desc = SpmmDesc::new(Precision::F64).max_width(2);
    let mut p = CPU.plan_spmm(a.as_ref(), &desc).unwrap();
    let b = dense::<f64>(a.cols(), 3, Layout::ColMajor, 0);
    let mut c = dense::<f64>(a.rows(), 3, Layout::ColMajor, 0);
    let err = p.run(0.0, b.as_ref(), 1.0, c.as_mut()).unwrap_err();
    assert!(matches!(err, Error::WidthExceeded { .. }), "{err}");
}

#[test]
fn plans_count_the_value_order_they_keep() {
    let a = valued::<f64>(&patterns()[0], 1);
    for format in [Format::Ell, Format::Tiled16, Format::MeBcrs] {
        let p = CPU
            .plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F64).format(format))
            .unwrap();
        let block = Converted::<f64>::default_block(format, sparse_core::DType::F64);
        let m = if format == Format::Tiled16 {
            let selection = sparse_cpu::tile_selection();
            Converted::Tiled16(
                Tiled16::from_csr(a.as_ref(), &selection, FillLimit::default()).unwrap(),
            )
        } else {
            Converted::from_csr(a.as_ref(), format, block, FillLimit::default()).unwrap()
        };
        let order = m.stored_slots() * std::mem::size_of::<usize>();
        assert_eq!(p.info().bytes, m.memory_bytes() + order, "{format}");
    }
    let b = Csr::<f64>::from_triplets(2, 2, &[(0, 0, 1.0)]).unwrap();
    let desc = SpmvDesc::new(Precision::F64)
        .format(Format::Bsr)
        .block(BlockShape::new(2, 2));
    let p = CPU.plan_spmv(b.as_ref(), &desc).unwrap();
    // One 2x2 block: two block row pointers and a block column, 4 values, a mask word, and an
    // order of 4 slots.
    assert_eq!(p.info().bytes, 3 * 4 + 4 * 8 + 8 + 4 * 8);
}

#[test]
fn a_csr_plan_owns_its_values_once_updated() {
    let a = valued::<f64>(&patterns()[0], 1);
    let mut p = CPU
        .plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F64))
        .unwrap();
    let borrowed = p.info().bytes;
    let new = valued::<f64>(&patterns()[0], 2);
    p.update_values(DenseRef::vector(new.values())).unwrap();
    assert_eq!(p.info().bytes, borrowed + a.nnz() * 8);
    p.update_values(DenseRef::vector(a.values())).unwrap();
    assert_eq!(p.info().bytes, borrowed + a.nnz() * 8);
}

#[test]
fn sddmm_writes_slot_order_only_in_the_column_vector_formats() {
    let a = valued::<f64>(&patterns()[0], 1);
    for format in [Format::Csr, Format::MeBcrs, Format::SrBcrs] {
        let desc = SddmmDesc::new(Precision::F64).format(format);
        let p = CPU.plan_sddmm(a.as_ref(), &desc).unwrap();
        let order = p.value_order();
        assert_eq!(order.is_some(), format != Format::Csr, "{format}");
        if let Some(order) = order {
            assert_eq!(order.nnz(), a.nnz());
        }
    }
}
