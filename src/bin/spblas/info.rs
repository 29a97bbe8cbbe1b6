//! `spblas info`: what a matrix looks like and what it costs in each format.

use std::path::Path;
use std::time::{Duration, Instant};

use sparse_blas::{
    io, Backend, Bsr, Csr, Dense, Ell, Error, Executor, FillLimit, Format, Hyb, HybWidth, Layout,
    MeBcrs, MeBcrsShape, Precision, Result, SparseFormat, SpmvDesc, SrBcrs, SrBcrsShape,
    TileSelection, Tiled16,
};

/// Conversions are timed as the best of this many runs (first-touch page faults excluded).
const CONVERSION_RUNS: usize = 3;
/// CSR wins the recommendation unless another format stores this much less.
const RECOMMEND_MARGIN: f64 = 0.9;

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
    let spmv = cpu_spmv_time(&a)?;
    println!(
        "cpu spmv    {:.3} ms (csr, the unit of conversion cost below)",
        ms(spmv)
    );
    println!();
    println!("format        block     bytes (f64, u32)  vs csr   convert(ms)  spmv-equiv  notes");
    let conversions = conversions(&a, spmv);
    for c in &conversions {
        println!("{}", c.line(a.memory_bytes()));
    }
    println!(
        "{:<13} {:<9} {:>17}  {:>6.2}",
        "dense",
        "",
        a.rows() as u128 * a.cols() as u128 * 8,
        (a.rows() as f64 * a.cols() as f64 * 8.0) / a.memory_bytes().max(1) as f64
    );
    println!();
    let tiled = Tiled16::from_csr(a.as_ref(), &TileSelection::default(), FillLimit::UNLIMITED)?;
    let histogram: Vec<String> = tiled
        .tile_format_histogram()
        .iter()
        .map(|(f, n)| format!("{} {n}", f.name()))
        .collect();
    println!(
        "tiled16 tiles  {} ({})",
        tiled.num_tiles(),
        histogram.join(", ")
    );
    let (format, why) = recommend(&conversions, a.memory_bytes());
    println!("recommended   {format} for spmv ({why})");
    Ok(())
}

/// One conversion of the matrix, or why it was refused.
struct Conversion {
    format: Format,
    block: String,
    outcome: Result<Converted>,
}

struct Converted {
    bytes: usize,
    time: Duration,
    spmv_equivalents: f64,
    notes: String,
}

impl Conversion {
    fn line(&self, csr_bytes: usize) -> String {
        let head = format!("{:<13} {:<9}", self.format.name(), self.block);
        match &self.outcome {
            Ok(c) => format!(
                "{head} {:>17}  {:>6.2}  {:>11.3}  {:>10.1}  {}",
                c.bytes,
                c.bytes as f64 / csr_bytes.max(1) as f64,
                ms(c.time),
                c.spmv_equivalents,
                c.notes
            ),
            Err(Error::FillLimit { slots, .. }) => {
                format!("{head} refused: would store {slots} slots (fill limit)")
            }
            Err(e) => format!("{head} refused: {e}"),
        }
    }
}

/// Converts `a` to every format and block shape `info` reports, timing each.
fn conversions(a: &Csr<f64>, spmv: Duration) -> Vec<Conversion> {
    let csr = Conversion {
        format: Format::Csr,
        block: String::new(),
        outcome: Ok(Converted {
            bytes: a.memory_bytes(),
            time: Duration::ZERO,
            spmv_equivalents: 0.0,
            notes: "the interchange format".to_string(),
        }),
    };
    let a = a.as_ref();
    let limit = FillLimit::default();
    let mut out = vec![
        csr,
        timed(Format::Ell, "", spmv, || {
            let m = Ell::from_csr(a, limit)?;
            let notes = format!("width {}", m.width());
            Ok((m, notes))
        }),
        timed(Format::Hyb, "", spmv, || {
            let m = Hyb::from_csr(a, HybWidth::MinBytes, limit)?;
            let notes = format!("width {}, {} in coo", m.width(), m.coo_values().len());
            Ok((m, notes))
        }),
    ];
    for b in [2, 4, 8, 16] {
        out.push(timed(Format::Bsr, &format!("{b}x{b}"), spmv, || {
            let m = Bsr::from_csr(a, b, b, limit)?;
            let notes = format!(
                "{} blocks, {:.2} slots per entry",
                m.nblocks(),
                m.fill_ratio()
            );
            Ok((m, notes))
        }));
    }
    for shape in [MeBcrsShape::f16(), MeBcrsShape::tf32()] {
        let block = format!("{}x{}", shape.window(), shape.block());
        out.push(timed(Format::MeBcrs, &block, spmv, || {
            let m = MeBcrs::from_csr(a, shape, limit)?;
            let notes = format!("{} vectors", m.vectors());
            Ok((m, notes))
        }));
    }
    for v in [2, 4, 8] {
        out.push(timed(Format::SrBcrs, &format!("{v}x16"), spmv, || {
            let m = SrBcrs::from_csr(a, SrBcrsShape::int8(v)?, limit)?;
            let notes = format!("{} vectors, {} stored", m.vectors(), m.stored_vectors());
            Ok((m, notes))
        }));
    }
    out.push(timed(Format::Tiled16, "", spmv, || {
        let m = Tiled16::from_csr(a, &TileSelection::default(), limit)?;
        let notes = format!("{} tiles", m.num_tiles());
        Ok((m, notes))
    }));
    out
}

/// Best of [`CONVERSION_RUNS`] conversions; the first run's refusal ends the attempt.
fn timed<F: SparseFormat<f64>>(
    format: Format,
    block: &str,
    spmv: Duration,
    convert: impl Fn() -> Result<(F, String)>,
) -> Conversion {
    let mut best: Option<Converted> = None;
    for _ in 0..CONVERSION_RUNS {
        let start = Instant::now();
        let (m, notes) = match convert() {
            Ok(converted) => converted,
            Err(e) => {
                return Conversion {
                    format,
                    block: block.to_string(),
                    outcome: Err(e),
                }
            }
        };
        let time = start.elapsed();
        if best.as_ref().is_none_or(|b| time < b.time) {
            best = Some(Converted {
                bytes: m.memory_bytes(),
                time,
                spmv_equivalents: time.as_secs_f64() / spmv.as_secs_f64().max(1e-9),
                notes,
            });
        }
    }
    Conversion {
        format,
        block: block.to_string(),
        outcome: best.ok_or_else(|| Error::invalid("no conversion ran")),
    }
}

/// The format with the fewest bytes for SpMV to read (SpMV is bandwidth-bound, so bytes are
/// its cost); CSR unless another format is clearly smaller, as CSR needs no conversion.
fn recommend(conversions: &[Conversion], csr_bytes: usize) -> (String, String) {
    let smallest = conversions
        .iter()
        .filter_map(|c| c.outcome.as_ref().ok().map(|ok| (c, ok.bytes)))
        .min_by_key(|&(_, bytes)| bytes);
    match smallest {
        Some((c, bytes)) if (bytes as f64) < RECOMMEND_MARGIN * csr_bytes as f64 => {
            let name = if c.block.is_empty() {
                c.format.name().to_string()
            } else {
                format!("{} --block {}", c.format.name(), c.block)
            };
            (
                name,
                format!(
                    "{:.0}% of the bytes of csr",
                    100.0 * bytes as f64 / csr_bytes.max(1) as f64
                ),
            )
        }
        _ => (
            "csr".to_string(),
            "no format stores 10% fewer bytes".to_string(),
        ),
    }
}

/// Median of a few CPU CSR SpMV runs: the unit conversion costs are quoted in.
fn cpu_spmv_time(a: &Csr<f64>) -> Result<Duration> {
    let backend = Backend::from_name("cpu")?;
    let mut plan = backend.plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F64))?;
    let x = Dense::from_fn(a.cols(), 1, Layout::ColMajor, |i, _| 1.0 + (i % 3) as f64);
    let mut y = Dense::<f64>::zeros(a.rows(), 1, Layout::ColMajor);
    let mut times: Vec<Duration> = (0..11)
        .map(|_| {
            let start = Instant::now();
            plan.run(1.0, x.as_ref(), 0.0, y.as_mut())
                .map(|()| start.elapsed())
        })
        .collect::<Result<_>>()?;
    times.sort();
    Ok(times[times.len() / 2])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
