//! The single-operation subcommands: read Matrix Market inputs, run, write the result.

use std::path::Path;
use std::time::Duration;

use sparse_blas::{
    bf16, f16, io, AttentionDesc, Backend, Csr, DType, Dense, Error, Executor, Layout, OpKind,
    Result, Scalar, SddmmDesc, SpmmDesc, SpmvDesc,
};

use crate::measure::{self, cast_dense, Repeat, Row, Update};
use crate::{Common, OpCommand};

/// Calls `$f::<T>(args)` with T the storage type of `$precision`.
macro_rules! for_storage {
    ($precision:expr, $op:expr, $backend:expr, $f:ident($($arg:expr),*)) => {
        match $precision.storage {
            DType::F64 => $f::<f64>($($arg),*),
            DType::F32 => $f::<f32>($($arg),*),
            DType::F16 => $f::<f16>($($arg),*),
            DType::BF16 => $f::<bf16>($($arg),*),
            DType::I8 => $f::<i8>($($arg),*),
            DType::I16 => $f::<i16>($($arg),*),
            _ => Err(Error::Unsupported {
                op: $op,
                format: sparse_blas::Format::Csr,
                precision: $precision,
                algorithm: None,
                backend: $backend.kind(),
                supported: "f64 f32 tf32 f16 bf16 i8 i16 storage".to_string(),
            }),
        }
    };
}

/// Runs a subcommand; `Ok(false)` when `--check` found an entry outside its bound.
pub fn run(command: OpCommand) -> Result<bool> {
    let (op, common) = match &command {
        OpCommand::Spmv { common, .. } => (OpKind::Spmv, common),
        OpCommand::Spmm { common, .. } => (OpKind::Spmm, common),
        OpCommand::Sddmm { common, .. } => (OpKind::Sddmm, common),
        OpCommand::Attention { common, .. } => (OpKind::Attention, common),
    };
    let backend = common.backend()?;
    let row = for_storage!(common.precision, op, backend, run_typed(&backend, &command))?;
    println!("{}", Row::HEADER);
    println!("{}", row.line());
    Ok(row.passed())
}

fn run_typed<T: Scalar>(backend: &Backend, command: &OpCommand) -> Result<Row> {
    match command {
        OpCommand::Spmv { a, x, common } => {
            let (a, x) = (matrix::<T>(a)?, dense::<T>(x)?);
            let prior = prior::<T::Out>(common)?;
            let mut desc = SpmvDesc::new(common.precision)
                .format(common.format)
                .algorithm(common.algorithm);
            desc.block = common.block;
            let (y, row) = measure::spmv(
                backend,
                &a,
                &desc,
                &x,
                update(common, prior.as_ref()),
                repeat(common),
                common.check,
            )?;
            io::write_dense(&common.output, y.as_ref())?;
            Ok(row)
        }
        OpCommand::Spmm { a, b, common } => {
            let (a, b) = (matrix::<T>(a)?, dense::<T>(b)?);
            let prior = prior::<T::Out>(common)?;
            let mut desc = SpmmDesc::new(common.precision)
                .format(common.format)
                .algorithm(common.algorithm);
            desc.block = common.block;
            let (c, row) = measure::spmm(
                backend,
                &a,
                &desc,
                &b,
                update(common, prior.as_ref()),
                Layout::ColMajor,
                repeat(common),
                common.check,
            )?;
            io::write_dense(&common.output, c.as_ref())?;
            Ok(row)
        }
        OpCommand::Sddmm {
            s,
            x,
            y,
            scale_by_values,
            common,
        } => {
            let (s, x, y) = (matrix::<T>(s)?, dense::<T>(x)?, dense::<T>(y)?);
            let prior = prior::<T::Out>(common)?;
            let mut desc = SddmmDesc::new(common.precision)
                .format(common.format)
                .algorithm(common.algorithm)
                .scale_by_values(*scale_by_values);
            desc.block = common.block;
            let (c, row) = measure::sddmm(
                backend,
                &s,
                &desc,
                &x,
                &y,
                update(common, prior.as_ref()),
                repeat(common),
                common.check,
            )?;
            let values = c.into_host_vec()?;
            let (row_ptr, col_idx, _) = s.into_parts();
            let rows = row_ptr.len() - 1;
            let out = Csr::try_new(rows, y.rows(), row_ptr, col_idx, values)?;
            io::write_csr(&common.output, &out)?;
            Ok(row)
        }
        OpCommand::Attention {
            a,
            q,
            k,
            v,
            scale,
            heads,
            bias,
            common,
        } => {
            let (a, q, k, v) = (
                matrix::<T>(a)?,
                dense::<T>(q)?,
                dense::<T>(k)?,
                dense::<T>(v)?,
            );
            let mut desc = AttentionDesc::new(common.precision)
                .format(common.format)
                .algorithm(common.algorithm)
                .heads(*heads)
                .bias_from_values(*bias);
            desc.scale = *scale;
            let (o, row) =
                measure::attention(backend, &a, &desc, &q, &k, &v, repeat(common), common.check)?;
            io::write_dense(&common.output, o.as_ref())?;
            Ok(row)
        }
    }
}

fn matrix<T: Scalar>(path: &Path) -> Result<Csr<T>> {
    Ok(io::read_csr::<f64, u32>(path)?.cast())
}

fn dense<T: Scalar>(path: &Path) -> Result<Dense<T>> {
    Ok(cast_dense(&io::read_dense::<f64>(path)?))
}

/// The prior output, required when beta reads it.
fn prior<O: Scalar>(common: &Common) -> Result<Option<Dense<O>>> {
    match (&common.y0, common.beta != 0.0) {
        (Some(path), true) => Ok(Some(dense(path)?)),
        (None, true) => Err(Error::invalid(format!(
            "--beta {} reads the prior output: give it with --y0",
            common.beta
        ))),
        (_, false) => Ok(None),
    }
}

fn update<'a, O>(common: &Common, prior: Option<&'a Dense<O>>) -> Update<'a, O> {
    Update {
        alpha: common.alpha,
        beta: common.beta,
        prior,
    }
}

fn repeat(common: &Common) -> Repeat {
    Repeat {
        runs: common.repeat.max(1),
        budget: Duration::MAX,
    }
}
