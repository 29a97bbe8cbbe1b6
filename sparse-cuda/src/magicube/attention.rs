//! A quantized sparse attention block from the integer pieces, the paper's end-to-end case:
//! `O = softmax_row(scale * (Q K^T) ∘ spy(A)) V` with the two products in i8 on the tensor
//! cores and the softmax in f32.
//!
//! 1. Q and K quantized per row, V per column (sparse-formats' `quantize`).
//! 2. The i8 SDDMM on A's pattern gives the exact integer scores, which the row scales of Q and
//!    K (and `scale`) turn into f32 scores.
//! 3. Softmax per row in f32 (the row's maximum subtracted first).
//! 4. The probabilities quantized per row and multiplied by V with the i8 SpMM; the exact sums
//!    dequantized with the rows' and V's column scales.
//!
//! It plans both products on each call and runs the softmax on the host: it shows what the
//! integer path does to an attention block's accuracy (the GPU test reports it against the
//! f32 oracle), not yet a fused kernel.

use sparse_core::{
    CsrRef, Dense, DenseRef, Error, Executor, Format, Layout, Precision, Result, SddmmDesc,
    SpIndex, SpmmDesc,
};
use sparse_formats::quantize::{dequantize, quantize_csr, quantize_dense, QuantBits, ScaleAxis};
use sparse_formats::Csr;

use crate::executor::CudaBackend;

/// `softmax_row(scale * (Q K^T) ∘ spy(A)) V` through the i8 SDDMM and SpMM (see the module
/// documentation), for host operands: Q (rows x d), K (cols x d), V (cols x dv); `scale`
/// defaults to `1/sqrt(d)`. A row of A without entries gives a zero row. The result is
/// row-major f32.
pub fn quantized_attention<I: SpIndex>(
    backend: &CudaBackend,
    a: CsrRef<'_, f32, I>,
    q: DenseRef<'_, f32>,
    k: DenseRef<'_, f32>,
    v: DenseRef<'_, f32>,
    scale: Option<f64>,
) -> Result<Dense<f32>> {
    let (rows, cols, d, dv) = (a.rows(), a.cols(), q.cols(), v.cols());
    q.expect_shape("attention Q", (rows, d))?;
    k.expect_shape("attention K", (cols, d))?;
    v.expect_shape("attention V", (cols, dv))?;
    let scale = scale.unwrap_or(1.0 / (d.max(1) as f64).sqrt()) as f32;
    if !scale.is_finite() {
        return Err(Error::invalid(format!(
            "attention scale must be finite, got {scale}"
        )));
    }
    let (q_q, q_s) = quantize_dense(q, QuantBits::I8, ScaleAxis::Row)?;
    let (k_q, k_s) = quantize_dense(k, QuantBits::I8, ScaleAxis::Row)?;
    let (v_q, v_s) = quantize_dense(v, QuantBits::I8, ScaleAxis::Column)?;
    let row_ptr: Vec<usize> = a.row_ptr().iter().map(|p| p.to_usize()).collect();
    let col_idx: Vec<usize> = a.col_idx().iter().map(|c| c.to_usize()).collect();
    let pattern = Csr::try_new(
        rows,
        cols,
        row_ptr.clone(),
        col_idx.clone(),
        vec![1i8; a.nnz()],
    )
    .map_err(|r| r.error)?;

    // Scores: the exact integer dot products, then f32.
    let desc = SddmmDesc::new(Precision::I8)
        .format(Format::SrBcrs)
        .max_width(d);
    let mut sddmm = backend.plan_sddmm(pattern.as_ref(), &desc)?;
    let order = sddmm
        .value_order()
        .ok_or_else(|| Error::internal("the SR-BCRS SDDMM has no slot order"))?
        .clone();
    let (qd, kd) = (backend.upload(q_q.as_ref())?, backend.upload(k_q.as_ref())?);
    let mut sums = backend.zeros::<i32>(order.len(), 1, Layout::ColMajor)?;
    sddmm.run(1, qd.as_ref(), kd.as_ref(), 0, sums.as_mut())?;
    let sums = backend.download(&sums)?;
    let sums = order.to_csr_order(sums.as_ref().host("scores")?)?;

    // Softmax per row in f32.
    let mut probabilities = vec![0.0f32; a.nnz()];
    for i in 0..rows {
        let range = row_ptr[i]..row_ptr[i + 1];
        let scores: Vec<f32> = range
            .clone()
            .map(|e| scale * dequantize(sums[e], q_s.at(i, 0), k_s.at(col_idx[e], 0)))
            .collect();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f32 = weights.iter().sum();
        for (p, w) in probabilities[range].iter_mut().zip(&weights) {
            *p = w / total;
        }
    }

    // O = P V in i8, dequantized.
    let p = Csr::try_new(rows, cols, row_ptr, col_idx, probabilities).map_err(|r| r.error)?;
    let (p_q, p_s) = quantize_csr(p.as_ref(), QuantBits::I8, ScaleAxis::Row)?;
    let desc = SpmmDesc::new(Precision::I8)
        .format(Format::SrBcrs)
        .max_width(dv);
    let mut spmm = backend.plan_spmm(p_q.as_ref(), &desc)?;
    let vd = backend.upload(v_q.as_ref())?;
    let mut out = backend.zeros::<i32>(rows, dv, Layout::RowMajor)?;
    spmm.run(1, vd.as_ref(), 0, out.as_mut())?;
    let out = backend.download(&out)?;
    let out = out.as_ref();
    Ok(Dense::from_fn(rows, dv, Layout::RowMajor, |i, j| {
        if a.row_range(i).is_empty() {
            0.0
        } else {
            dequantize(out.at(i, j), p_s.at(i, 0), v_s.at(0, j))
        }
    }))
}
