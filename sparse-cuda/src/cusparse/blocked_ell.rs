//! cuSPARSE's Blocked-ELL SpMM (`CUSPARSE_SPMM_BLOCKED_ELL_ALG1`, on tensor cores): the vendor's
//! block-sparse SpMM, which the benchmarks put beside the block- and vector-sparse kernels as
//! they put cuBLAS GEMM beside them for dense.
//!
//! Blocked-ELL is not a format of sparse-blas: every block row holds the same number of square
//! blocks, the shorter ones padded with empty blocks (column index -1), so a matrix stores as
//! many blocks as its fullest block row times its block rows. It is therefore not a row of the
//! backend's table: [`CusparseBackend::blocked_ell_spmm`] builds it from CSR and
//! [`BlockedEllSpmm::run`] multiplies. cuSPARSE takes only whole blocks, so the matrix's rows
//! and columns must be multiples of the block size (a refusal says so otherwise). Storage type:
//! i8 with exact i32 sums into i32 C, the integer baseline intbench needs (the other types
//! cuSPARSE documents are not offered: nothing here has checked them). cuSPARSE takes B
//! column-major only in i8 (12.6 answers a row-major B with NOT_SUPPORTED), so a row-major B
//! is refused before it is called.
//! Semantics are sparse-blas's: `alpha == 0` reads neither A nor B and `beta == 0` does not read
//! C (it is zeroed first, as every cuSPARSE plan does).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cusparse::sys;
use cudarc::driver::{CudaSlice, DevicePtr};
use sparse_core::{
    Accumulator, Algorithm, BackendKind, Compute, CsrRef, DType, DenseMut, DenseRef, Error, Format,
    Layout, OpKind, Precision, Result, Scalar, SpIndex,
};

use super::library::{call, compute_type, index, value_type, DnShape, DnSlot, Handle, SpMat};
use super::plan::{scalar_ptr, NON_TRANSPOSE};
use super::CusparseBackend;
use crate::device::{CudaBuffer, Device};
use crate::operand::{bind_input, bind_output};
use crate::plan::scale_dense;

/// Blocked-ELL arrays on the host: `width` block columns per block row, row-major; the values of
/// each row of the matrix over its block row's `width * block` slots, row-major.
struct HostBlockedEll<T> {
    width: usize,
    col_ind: Vec<i32>,
    values: Vec<T>,
}

/// `a` in Blocked-ELL of `block` x `block` blocks; the caller has checked that the block divides
/// both dimensions.
fn build<T: Scalar, I: SpIndex>(a: CsrRef<'_, T, I>, block: usize) -> Result<HostBlockedEll<T>> {
    let block_rows = a.rows() / block;
    let mut columns: Vec<Vec<usize>> = Vec::with_capacity(block_rows);
    for br in 0..block_rows {
        let mut cols: Vec<usize> = (br * block..(br + 1) * block)
            .flat_map(|i| a.row(i).0.iter().map(|c| c.to_usize() / block))
            .collect();
        cols.sort_unstable();
        cols.dedup();
        columns.push(cols);
    }
    let width = columns.iter().map(Vec::len).max().unwrap_or(0);
    let ell_cols = width * block;
    let mut col_ind = vec![-1i32; block_rows * width];
    let mut values = vec![T::default(); a.rows() * ell_cols];
    for (br, cols) in columns.iter().enumerate() {
        for (slot, &c) in cols.iter().enumerate() {
            col_ind[br * width + slot] = i32::try_from(c)
                .map_err(|_| Error::overflow::<i32>("Blocked-ELL block column", c))?;
        }
        for i in br * block..(br + 1) * block {
            let (row_cols, row_values) = a.row(i);
            for (c, &v) in row_cols.iter().zip(row_values) {
                let (bc, within) = (c.to_usize() / block, c.to_usize() % block);
                // The block column is among this block row's, which were taken from its entries.
                let slot = cols.binary_search(&bc).unwrap_or_default();
                values[i * ell_cols + slot * block + within] = v;
            }
        }
    }
    Ok(HostBlockedEll {
        width,
        col_ind,
        values,
    })
}

/// cuSPARSE's value, output and compute types for storage type `T`: i8 only.
fn types<T: Scalar>() -> Option<(sys::cudaDataType, sys::cudaDataType, sys::cudaDataType)> {
    if T::DTYPE != DType::I8 {
        return None;
    }
    let values = value_type(T::DTYPE)?;
    let out = value_type(<T::Out as Scalar>::DTYPE)?;
    Some((values, out, compute_type(T::DTYPE)))
}

/// A matrix in Blocked-ELL on the device with its cuSPARSE descriptor, ready to multiply.
pub struct BlockedEllSpmm<T: Scalar> {
    handle: Arc<Handle>,
    precision: Precision,
    shape: (usize, usize),
    block: usize,
    /// Blocks per block row.
    width: usize,
    /// `None` when the matrix has no entry: runs then only scale C.
    mat: Option<SpMat>,
    types: (sys::cudaDataType, sys::cudaDataType, sys::cudaDataType),
    b: DnSlot,
    c: DnSlot,
    workspace: Option<CudaSlice<u8>>,
    /// The B and C shapes the workspace was sized for: _bufferSize is asked again only when
    /// they change.
    sized: Option<(DnShape, DnShape)>,
    // The arrays the descriptor points into, kept alive beside it.
    _col_ind: CudaSlice<i32>,
    _values: CudaBuffer<T>,
}

impl<T: Scalar> BlockedEllSpmm<T> {
    /// Values stored, empty slots of the blocks and padding blocks included.
    pub fn stored_values(&self) -> usize {
        self.shape.0 * self.width * self.block
    }

    /// The side of the square blocks.
    pub fn block(&self) -> usize {
        self.block
    }

    /// `C = alpha*A*B + beta*C` for device operands of this backend: B column-major, C in either
    /// layout. The first run of a shape allocates the workspace cuSPARSE asks for (a baseline
    /// for benchmarks, timed after warm-up runs, unlike the plans, which allocate when planning).
    pub fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let ((m, k), n) = (self.shape, b.cols());
        b.expect_shape("Blocked-ELL SpMM B", (k, n))?;
        c.expect_shape("Blocked-ELL SpMM C", (m, n))?;
        if b.layout() == Layout::RowMajor && n > 1 {
            return Err(Error::Unsupported {
                op: OpKind::Spmm,
                format: Format::Bsr,
                precision: self.precision,
                algorithm: Some(Algorithm::VendorDefault),
                backend: BackendKind::Cusparse,
                supported: "Blocked-ELL SpMM in i8 with B column-major only".to_string(),
            });
        }
        let device = self.handle.device().clone();
        let (bb, cb) = (
            bind_input(&b, &device, "Blocked-ELL SpMM B")?,
            bind_output(&mut c, &device, "Blocked-ELL SpMM C")?,
        );
        let Some(mat) = self.mat.as_ref().filter(|_| alpha != T::Acc::ZERO && n > 0) else {
            // A and B must not be read: C becomes beta*C, as everywhere in sparse-blas.
            return scale_dense::<T>(&device, &cb, beta);
        };
        if beta == T::Acc::ZERO {
            scale_dense::<T>(&device, &cb, beta)?;
        }
        let (values, out, compute) = self.types;
        let (alpha, beta) = (scalar_ptr(&alpha), scalar_ptr(&beta));
        let alg = sys::cusparseSpMMAlg_t::CUSPARSE_SPMM_BLOCKED_ELL_ALG1;
        let shapes = (DnShape::of(&bb, "B")?, DnShape::of(&cb, "C")?);
        let (b_slot, c_slot, workspace, sized) = (
            &mut self.b,
            &mut self.c,
            &mut self.workspace,
            &mut self.sized,
        );
        self.handle.with(|h| {
            // SAFETY: the bound operands are device matrices of this backend whose shapes the
            // descriptors state (checked above and by their Dense views); the sparse descriptor
            // points into arrays this value keeps; alpha and beta are host scalars of the compute
            // type (T::Acc); the workspace is what _bufferSize asked for; every call is ordered
            // on the handle's stream.
            unsafe {
                let bd = b_slot.point(&device, shapes.0, bb.address, values)?;
                let cd = c_slot.point(&device, shapes.1, cb.address, out)?;
                if *sized != Some(shapes) {
                    let mut bytes = 0;
                    call!(
                        &device,
                        cusparseSpMM_bufferSize(
                            h,
                            NON_TRANSPOSE,
                            NON_TRANSPOSE,
                            alpha,
                            mat.raw(),
                            bd,
                            beta,
                            cd,
                            compute,
                            alg,
                            &mut bytes,
                        )
                    )?;
                    device.grow_zeroed(workspace, bytes, "allocating the cuSPARSE workspace")?;
                    *sized = Some(shapes);
                }
                let w = workspace
                    .as_ref()
                    .map_or(std::ptr::null_mut(), |w| workspace_ptr(&device, w));
                call!(
                    &device,
                    cusparseSpMM(
                        h,
                        NON_TRANSPOSE,
                        NON_TRANSPOSE,
                        alpha,
                        mat.raw(),
                        bd,
                        beta,
                        cd,
                        compute,
                        alg,
                        w,
                    )
                )
            }
        })
    }
}

fn workspace_ptr(device: &Device, w: &CudaSlice<u8>) -> *mut c_void {
    w.device_ptr(&device.stream).0 as *mut c_void
}

impl CusparseBackend {
    /// `a` in cuSPARSE's Blocked-ELL of `block` x `block` blocks on this backend's device, for
    /// [`BlockedEllSpmm::run`]. Refused with [`Error::Unsupported`] when `block` does not divide
    /// both dimensions or the storage type is not i8.
    pub fn blocked_ell_spmm<T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'_, T, I>,
        block: usize,
    ) -> Result<BlockedEllSpmm<T>> {
        let (rows, cols) = (a.rows(), a.cols());
        let precision = Precision {
            storage: T::DTYPE,
            compute: match T::DTYPE {
                DType::I8 => Compute::I32,
                DType::F64 => Compute::F64,
                _ => Compute::F32,
            },
        };
        let refuse = |supported: String| Error::Unsupported {
            op: OpKind::Spmm,
            format: Format::Bsr,
            precision,
            algorithm: Some(Algorithm::VendorDefault),
            backend: BackendKind::Cusparse,
            supported,
        };
        let types = types::<T>().ok_or_else(|| refuse("Blocked-ELL SpMM in i8".to_string()))?;
        if block == 0 || rows % block != 0 || cols % block != 0 {
            return Err(refuse(format!(
                "Blocked-ELL SpMM on whole blocks only, and {block} x {block} blocks do not \
                 tile a {rows} x {cols} matrix"
            )));
        }
        let host = build(a, block)?;
        let device = self.handle.device();
        let col_ind = device.upload_converted(&host.col_ind, 0, |&c| c)?;
        let values = device.upload(&host.values)?;
        let mat = if host.width > 0 {
            let col_ptr = col_ind.device_ptr(&device.stream).0;
            // SAFETY: col_ind holds block_rows * width indices and values rows * width * block
            // elements, both kept by the returned value beside the descriptor.
            Some(unsafe {
                SpMat::blocked_ell(
                    device,
                    (
                        index("number of rows", rows)?,
                        index("number of columns", cols)?,
                    ),
                    (
                        index("block size", block)?,
                        index("Blocked-ELL columns", host.width * block)?,
                    ),
                    (col_ptr, values.address()),
                    types.0,
                )?
            })
        } else {
            None
        };
        Ok(BlockedEllSpmm {
            handle: self.handle.clone(),
            precision,
            shape: (rows, cols),
            block,
            width: host.width,
            mat,
            types,
            b: DnSlot::default(),
            c: DnSlot::default(),
            workspace: None,
            sized: None,
            _col_ind: col_ind,
            _values: values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_rows_are_padded_to_the_fullest() {
        // 4 x 6 in 2 x 2 blocks: block row 0 holds block columns 0 and 2, block row 1 only 1.
        let row_ptr = [0u32, 2, 3, 4, 4];
        let col_idx = [0u32, 5, 1, 3];
        let values = [1.0f32, 2.0, 3.0, 4.0];
        let a = CsrRef::try_new(4, 6, &row_ptr, &col_idx, &values).unwrap();
        let ell = build(a, 2).unwrap();
        assert_eq!(ell.width, 2);
        assert_eq!(ell.col_ind, [0, 2, 1, -1]);
        let mut expected = vec![0.0f32; 4 * 4];
        expected[0] = 1.0; // (0, 0): block slot 0, column 0
        expected[3] = 2.0; // (0, 5): block slot 1, column 1
        expected[4 + 1] = 3.0; // (1, 1)
        expected[2 * 4 + 1] = 4.0; // (2, 3): block slot 0 of block row 1, column 1
        assert_eq!(ell.values, expected);
    }
}
