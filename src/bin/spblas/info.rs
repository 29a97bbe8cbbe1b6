//! `spblas info`: what a matrix looks like and what it costs in each format.

use std::path::Path;

use sparse_blas::{io, Csr, Result};

pub fn run(path: &Path) -> Result<()> {
    let a: Csr<f64> = io::read_csr(path)?;
    let s = a.row_stats();
    println!("matrix      {}", path.display());
    println!("shape       {} x {}", a.rows(), a.cols());
    println!(
        "nnz         {} ({:.3}% dense)",
        a.nnz(),
        100.0 * a.nnz() as f64 / (a.rows() as f64 * a.cols() as f64).max(1.0)
    );
    println!(
        "row length  min {}  mean {:.2}  max {}  cv {:.3}",
        s.min, s.mean, s.max, s.cv
    );
    println!("empty rows  {}", s.empty_rows);
    println!(
        "symmetric   {}",
        if a.is_symmetric()? { "yes" } else { "no" }
    );
    println!("bytes (f64 values, u32 indices)");
    println!("  csr       {:>14}", a.memory_bytes());
    println!("  coo       {:>14}", a.to_coo().memory_bytes());
    println!(
        "  dense     {:>14}",
        a.rows() as u128 * a.cols() as u128 * 8
    );
    Ok(())
}
