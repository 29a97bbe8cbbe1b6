//! The cuda backend's TileSpMV on Tiled16 against the oracle (`sparse_cpu::bound`): every tile
//! format forced on every tile, the paper's adaptive selection, and the adaptive selection with
//! deferred COO at any size, in f64 and f32, on matrices with no rows or no entries, empty tile
//! rows, edge tiles smaller than 16x16, a tile row of thousands of tiles (cut into segments),
//! dense tiles, explicit zeros and a power-law graph; x contiguous or strided, y over NaN with
//! `beta == 0`, `beta != 0` and `alpha == 0`. The device conversion builds exactly the tiles
//! the host conversion builds (and refuses what it refuses), timed as device work. Then: `auto`
//! on Tiled16 plans TileSpMV, runs are bit-identical from run to run, new values (from the host
//! or the device) give what a plan made with them gives, and the plan's bytes stay as planned.
//!
//! Needs a GPU; without one each test prints `skipped: <reason>` and passes, unless
//! `SPARSE_REQUIRE_GPU=1`. Every failure is collected, so one run lists everything that disagrees.

mod common;

use std::time::Duration;

use common::{available, collect, value, Case, Failures, Host, SpmvCase};
use sparse_core::{
    Algorithm, BackendKind, BlockShape, Dense, Error, Executor, Format, Layout, Precision, Scalar,
    SpmvDesc, SpmvPlan,
};
use sparse_cuda::{tilespmv::tiled16_on_device, CudaBackend};
use sparse_formats::{generate, Csr, DeferredCoo, FillLimit, TileFormat, TileSelection, Tiled16};

fn backend() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

/// The selections the kernels must agree under: each format forced, the adaptive rule, and the
/// adaptive rule deferring tiles of up to 12 entries whatever the matrix size.
fn selections() -> Vec<(String, TileSelection)> {
    let mut all: Vec<(String, TileSelection)> = TileFormat::ALL
        .iter()
        .map(|&f| (format!("forced {f}"), TileSelection::forced(f)))
        .collect();
    all.push(("adaptive".into(), TileSelection::default()));
    all.push((
        "adaptive, deferred coo".into(),
        TileSelection {
            deferred_coo: Some(DeferredCoo {
                max_tile_nnz: 12,
                min_matrix_nnz: 0,
            }),
            ..TileSelection::default()
        },
    ));
    all
}

fn from_cells(
    rows: usize,
    cols: usize,
    cells: impl IntoIterator<Item = (usize, usize)>,
) -> Csr<f64> {
    let triplets: Vec<_> = cells
        .into_iter()
        .map(|(i, j)| (i, j, value(i, j) + 0.3))
        .collect();
    Csr::from_triplets(rows, cols, &triplets).expect("valid matrix")
}

/// The edge cases, named.
fn matrices() -> Vec<(&'static str, Csr<f64>)> {
    // Tile rows 1 and 3 empty; 37 x 53 leaves 5-row and 5-column edge tiles.
    let gaps = from_cells(
        70,
        53,
        (0..70)
            .filter(|i| (i / 16) % 2 == 0)
            .flat_map(|i| [(i, i % 53), (i, (i * 7 + 3) % 53), (i, 52)]),
    );
    // Row 5 spans 3000 tiles (a tile row of thousands, cut into segments), next to short rows;
    // rows 20..23 hit every 16th column (tile rows 1 of about 190 tiles).
    let mut long: Vec<(usize, usize)> = (0..48_000).step_by(16).map(|j| (5, j + 5)).collect();
    long.extend((0..40).map(|i| (i, (i * 131) % 48_000)));
    long.extend((20..24).flat_map(|i| (0..48_000).step_by(250).map(move |j| (i, j + i))));
    // Tile rows of 40 and 200 tiles of 16 entries (packed into a block; cut for tile_combine)
    // and a short one, every row also holding two entries alone in their tiles: the deferred
    // rows are short, so the tile kernels add them.
    let mut fused: Vec<(usize, usize)> = (0..40)
        .flat_map(|t| (0..16).map(move |k| (k, 16 * t + k)))
        .collect();
    fused.extend((0..200).flat_map(|t| (0..16).map(move |k| (16 + k, 16 * t + (3 * k) % 16))));
    fused.extend((32..40).flat_map(|i| (0..4).map(move |j| (i, j))));
    fused.extend((0..40).flat_map(|i| [(i, 40_000 + 97 * i), (i, 45_000 + 13 * i)]));
    // A dense 40 x 40 block (dense tiles, full rows and columns), a full row and a full column.
    let mut dense: Vec<(usize, usize)> =
        (0..40).flat_map(|i| (0..40).map(move |j| (i, j))).collect();
    dense.extend((0..61).map(|j| (50, j)));
    dense.extend((0..57).map(|i| (i, 60)));
    dense.sort_unstable();
    dense.dedup();
    // Whole rows of zeros and scattered explicit zeros stay entries.
    let mut zeros = generate::uniform::<f64, u32>(45, 45, 6, 3).expect("generated");
    for (k, v) in zeros.values_mut().iter_mut().enumerate() {
        if k % 5 == 0 || (30..40).contains(&k) {
            *v = 0.0;
        }
    }
    vec![
        ("0x0", Csr::zeros(0, 0)),
        ("7x0", Csr::zeros(7, 0)),
        ("no entries 33x20", Csr::zeros(33, 20)),
        ("one entry", from_cells(1, 1, [(0, 0)])),
        ("empty tile rows, edge tiles", gaps),
        (
            "uniform 37x53",
            generate::uniform(37, 53, 7, 1).expect("generated"),
        ),
        ("long tile rows", from_cells(41, 48_000, long)),
        (
            "long tile rows, short deferred rows",
            from_cells(40, 48_000, fused),
        ),
        ("dense block", from_cells(61, 61, dense)),
        ("explicit zeros", zeros),
        ("rmat 2^11", generate::rmat(11, 8, 2).expect("generated")),
        ("poisson3d 9", generate::poisson3d(9).expect("generated")),
    ]
}

/// The runs every plan makes: (alpha, beta, y NaN before), x contiguous and strided.
fn cases<T: Scalar<Out = T>>(a: &Csr<T>) -> Vec<SpmvCase<T>> {
    let (rows, cols) = a.shape();
    let mut cases = Vec::new();
    for (x_layout, pad) in [(Layout::ColMajor, 0), (Layout::RowMajor, 2)] {
        for (alpha, beta, nan) in [
            (1.0, 0.0, true),
            (2.0, -1.0, false),
            (-1.5, 1.0, false),
            (0.0, 0.5, false),
        ] {
            cases.push(SpmvCase {
                alpha,
                x: Host::new((cols, 1), x_layout, pad, |i, _| value(i, 1) + 0.1),
                beta,
                y: Host::new((rows, 1), Layout::ColMajor, 0, |i, _| {
                    if nan {
                        f64::NAN
                    } else {
                        value(i, 2)
                    }
                }),
            });
        }
    }
    cases
}

fn sweep<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    for (name, a) in matrices() {
        let a: Csr<T> = a.cast();
        for (selection_name, selection) in selections() {
            let what = format!("{precision} {name} {selection_name}");
            let host = Tiled16::from_csr(a.as_ref(), &selection, FillLimit::default());
            let mut plan = match (b.plan_tilespmv(a.as_ref(), precision, &selection), host) {
                (Ok(p), Ok(_)) => p,
                // Padding past the fill limit is refused as the host conversion refuses it.
                (Err(Error::FillLimit { .. }), Err(Error::FillLimit { .. })) => continue,
                (Err(e), _) => {
                    failures.error(&what, e);
                    continue;
                }
                (Ok(_), Err(e)) => {
                    failures.error(&format!("{what}: planned, but the host refuses"), e);
                    continue;
                }
            };
            for case in cases(&a) {
                case.check(&what, b, &mut *plan, &a, precision, failures);
            }
        }
    }
}

#[test]
fn every_tile_format_and_selection_matches_the_oracle() {
    collect(backend(), |b, failures| {
        sweep::<f64>(b, Precision::F64, failures);
        sweep::<f32>(b, Precision::F32, failures);
    });
}

/// The sweep meets what it claims: every format is stored somewhere when forced, the adaptive
/// rule picks them all, deferral defers, and some tile row (and some deferred row) is long
/// enough to be cut.
#[test]
fn the_matrices_cover_every_format_deferral_and_long_tile_rows() {
    let tiled = |a: &Csr<f64>, s: &TileSelection| {
        Tiled16::from_csr(a.as_ref(), s, FillLimit::UNLIMITED).expect("converted")
    };
    let all = matrices();
    for (name, selection) in selections() {
        let stored: Vec<TileFormat> = all
            .iter()
            .flat_map(|(_, a)| tiled(a, &selection).tile_format().to_vec())
            .collect();
        let defers = selection
            .deferred_coo
            .is_some_and(|d| d.min_matrix_nnz == 0);
        match selection.forced {
            Some(f) => assert!(stored.contains(&f), "{name}: no {f} tile"),
            // Deferral takes every tile of at most 12 entries, so the COO tiles.
            None => assert!(
                TileFormat::ALL
                    .iter()
                    .all(|f| stored.contains(f) != (defers && *f == TileFormat::Coo)),
                "{name}: {stored:?}"
            ),
        }
        let deferred = all
            .iter()
            .any(|(_, a)| tiled(a, &selection).deferred().is_some());
        assert_eq!(deferred, defers, "{name}");
    }
    let longest = all
        .iter()
        .flat_map(|(_, a)| {
            let m = tiled(a, &TileSelection::default());
            m.tile_ptr()
                .windows(2)
                .map(|w| w[1] - w[0])
                .collect::<Vec<_>>()
        })
        .max();
    assert!(longest > Some(1000), "{longest:?}");
    // Deferred rows past the vector-split row length (1024) are cut into segments too.
    let deferring = selections().pop().expect("selections").1;
    let longest_deferred = all
        .iter()
        .filter_map(|(_, a)| {
            let d = tiled(a, &deferring).deferred()?.clone();
            (0..d.rows()).map(|i| d.as_ref().row_len(i)).max()
        })
        .max();
    assert!(longest_deferred > Some(1024), "{longest_deferred:?}");
    // A matrix whose deferred rows the tile kernels add (at most 64 entries), with tile rows
    // packed into a block and cut for tile_combine.
    let (_, fused) = all
        .iter()
        .find(|(name, _)| *name == "long tile rows, short deferred rows")
        .expect("listed");
    let m = tiled(fused, &deferring);
    let d = m.deferred().expect("deferred entries");
    assert!((0..d.rows()).all(|i| d.as_ref().row_len(i) <= 64));
    assert!(m.tile_ptr().windows(2).any(|w| w[1] - w[0] > 64));
}

fn same_tiles<T: Scalar>(b: &CudaBackend, failures: &mut Failures) {
    for (name, a) in matrices() {
        let a: Csr<T> = a.cast();
        for (selection_name, selection) in selections() {
            let what = format!("{} {name} {selection_name}", T::DTYPE);
            let host = Tiled16::from_csr(a.as_ref(), &selection, FillLimit::default());
            match (tiled16_on_device(b, a.as_ref(), &selection), host) {
                (Ok(d), Ok(h)) if d == h => {}
                (Ok(d), Ok(h)) => failures
                    .0
                    .push(format!("{what}: the device built {d:?}, the host {h:?}")),
                (Err(Error::FillLimit { .. }), Err(Error::FillLimit { .. })) => {}
                (d, h) => failures.0.push(format!(
                    "{what}: the device gave {:?}, the host {:?}",
                    d.err(),
                    h.err()
                )),
            }
        }
    }
}

/// The device conversion gives exactly the host's tiles: level 1, formats, payload bytes, values
/// (value bytes matter to the HYB choice, so both f64 and f32) and the deferred CSR.
#[test]
fn the_device_builds_the_tiles_the_host_builds() {
    collect(backend(), |b, failures| {
        same_tiles::<f64>(b, failures);
        same_tiles::<f32>(b, failures);
    });
}

#[test]
fn auto_on_tiled16_plans_tilespmv() {
    collect(backend(), |b, failures| {
        let a = generate::uniform::<f64, u32>(300, 200, 9, 4).expect("generated");
        for algorithm in [Algorithm::Auto, Algorithm::TileSpmv] {
            let desc = SpmvDesc::new(Precision::F64)
                .format(Format::Tiled16)
                .algorithm(algorithm);
            match b.plan_spmv(a.as_ref(), &desc) {
                Ok(mut plan) => {
                    let info = plan.info();
                    assert_eq!(info.algorithm, Algorithm::TileSpmv);
                    assert!(info.deterministic && info.bytes > 0);
                    // The conversion runs on the device, timed apart from the upload.
                    let time = info.plan_time;
                    assert!(time.device > Duration::ZERO && time.transfer > Duration::ZERO);
                    for case in cases(&a) {
                        case.check(
                            &format!("{algorithm}"),
                            b,
                            &mut *plan,
                            &a,
                            Precision::F64,
                            failures,
                        );
                    }
                }
                Err(e) => failures.error(&format!("{algorithm}"), e),
            }
        }
        // Tiled16 has no block shape: refused as the CPU backend refuses it.
        let blocked = SpmvDesc::new(Precision::F64)
            .format(Format::Tiled16)
            .block(BlockShape::new(4, 4));
        match b.plan_spmv(a.as_ref(), &blocked) {
            Err(Error::InvalidArgument { .. }) => {}
            Err(e) => failures.error("a block shape", e),
            Ok(_) => failures.0.push("a block shape was accepted".into()),
        };
    });
}

/// y of one run of `plan` (alpha 1.5, beta -0.5) as host values.
fn run_once<T: Scalar<Out = T>>(
    b: &CudaBackend,
    plan: &mut (dyn SpmvPlan<T> + '_),
    a: &Csr<T>,
) -> Vec<T> {
    let case = &cases(a)[1];
    let y = case.run(b, plan).expect("ran");
    y.as_ref().host("y").expect("downloaded").to_vec()
}

fn bits<T: Scalar>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.to_f64().to_bits()).collect()
}

#[test]
fn runs_are_bit_identical_and_new_values_match_a_fresh_plan() {
    collect(backend(), |b, failures| {
        let deferred = selections().pop().expect("selections").1;
        for (name, a) in matrices().into_iter().filter(|(_, a)| a.nnz() > 0) {
            for selection in [TileSelection::default(), deferred] {
                let what = format!("{name} deferred {}", selection.deferred_coo.is_some());
                let mut new = a.clone();
                for (k, v) in new.values_mut().iter_mut().enumerate() {
                    *v = value(k, 5) - 0.2;
                }
                let mut plan = b
                    .plan_tilespmv(a.as_ref(), Precision::F64, &selection)
                    .expect("planned");
                let bytes = plan.info().bytes;
                let first = run_once(b, &mut *plan, &a);
                if bits(&first) != bits(&run_once(b, &mut *plan, &a)) {
                    failures.0.push(format!("{what}: two runs differ"));
                }
                let mut fresh = b
                    .plan_tilespmv(new.as_ref(), Precision::F64, &selection)
                    .expect("planned");
                let expected = bits(&run_once(b, &mut *fresh, &new));
                let host = Dense::from_vec(
                    new.values().to_vec(),
                    new.nnz(),
                    1,
                    new.nnz(),
                    Layout::ColMajor,
                )
                .expect("values");
                let device = b.upload(host.as_ref()).expect("uploaded");
                for (from, values) in [("host", host.as_ref()), ("device", device.as_ref())] {
                    match plan.update_values(values) {
                        Ok(()) if bits(&run_once(b, &mut *plan, &new)) == expected => {}
                        Ok(()) => failures.0.push(format!(
                            "{what}: new values from the {from} differ from a fresh plan"
                        )),
                        Err(e) => failures.error(&format!("{what} update from the {from}"), e),
                    }
                }
                if plan.info().bytes != bytes {
                    failures.0.push(format!("{what}: bytes changed"));
                }
            }
        }
    });
}
