//! Bad input through the public API: each class gives its typed error, never a panic.

use sparse_blas::{
    Backend, BackendKind, Coo, Csr, DenseMut, DenseRef, Error, Executor, Format, Layout, OpKind,
    Precision, SddmmDesc, SpmmDesc, SpmvDesc, Support,
};

fn matrix() -> Csr<f64> {
    Csr::from_triplets(3, 4, &[(0, 0, 1.0), (1, 3, 2.0), (2, 1, 3.0)]).unwrap()
}

#[test]
fn shape_mismatches_name_both_shapes() {
    let a = matrix();
    let backend = Backend::from_name("cpu").unwrap();
    let mut plan = backend
        .plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F64))
        .unwrap();
    let (x, mut y) = (vec![1.0; 3], vec![0.0; 3]);
    let err = plan
        .run(1.0, DenseRef::vector(&x), 0.0, DenseMut::vector(&mut y))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShapeMismatch {
                expected: (4, 1),
                found: (3, 1),
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("4x1") && err.to_string().contains("3x1"),
        "{err}"
    );

    let mut plan = backend
        .plan_spmm(a.as_ref(), &SpmmDesc::new(Precision::F64))
        .unwrap();
    let b = vec![0.0; 4 * 2];
    let mut c = vec![0.0; 3 * 3];
    let err = plan
        .run(
            1.0,
            DenseRef::from_slice(&b, 4, 2, Layout::RowMajor).unwrap(),
            0.0,
            DenseMut::from_slice(&mut c, 3, 3, Layout::RowMajor).unwrap(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShapeMismatch {
                expected: (3, 2),
                found: (3, 3),
                ..
            }
        ),
        "{err}"
    );

    let mut plan = backend
        .plan_sddmm(a.as_ref(), &SddmmDesc::new(Precision::F64))
        .unwrap();
    let (x, y) = (vec![0.0; 3 * 2], vec![0.0; 4 * 2]);
    let mut out = vec![0.0; 2];
    let err = plan
        .run(
            1.0,
            DenseRef::from_slice(&x, 3, 2, Layout::RowMajor).unwrap(),
            DenseRef::from_slice(&y, 4, 2, Layout::RowMajor).unwrap(),
            0.0,
            DenseMut::vector(&mut out),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShapeMismatch {
                expected: (3, 1),
                found: (2, 1),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn dense_views_refuse_memory_too_small_for_their_shape() {
    let data = vec![0.0f32; 5];
    assert!(DenseRef::from_slice(&data, 2, 3, Layout::RowMajor).is_err());
    let mut out = vec![0.0f32; 5];
    assert!(DenseMut::from_slice(&mut out, 3, 2, Layout::ColMajor).is_err());
}

#[test]
fn unsupported_combinations_name_what_is_supported() {
    let a = matrix().cast::<f32>();
    let backend = Backend::from_name("cpu").unwrap();
    assert_eq!(
        backend.capability(OpKind::Spmv, Format::Csr, Precision::TF32),
        Support::Unsupported
    );
    let err = backend
        .plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::TF32))
        .err()
        .unwrap();
    match &err {
        Error::Unsupported {
            op,
            precision,
            backend,
            supported,
            ..
        } => {
            assert_eq!(
                (*op, *precision, *backend),
                (OpKind::Spmv, Precision::TF32, BackendKind::Cpu)
            );
            assert!(supported.contains("f32"), "{supported}");
        }
        other => panic!("expected Unsupported, got {other}"),
    }
    // ELL has SpMV kernels but no SpMM: the error lists the formats that have.
    let err = backend
        .plan_spmm(
            a.as_ref(),
            &SpmmDesc::new(Precision::F32).format(Format::Ell),
        )
        .err()
        .unwrap();
    match &err {
        Error::Unsupported {
            format: Format::Ell,
            supported,
            ..
        } => assert!(supported.contains("bsr"), "{supported}"),
        other => panic!("expected Unsupported, got {other}"),
    }
}

#[test]
fn a_descriptor_that_disagrees_with_the_matrix_type_is_refused() {
    let a = matrix();
    let backend = Backend::from_name("cpu").unwrap();
    let err = backend
        .plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F32))
        .err()
        .unwrap();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

#[test]
fn invalid_structures_and_index_overflow_are_typed() {
    let rejected =
        Csr::<f64, u32>::try_new(2, 2, vec![0, 1, 2], vec![0, 2], vec![1.0, 1.0]).unwrap_err();
    assert!(matches!(
        rejected.error,
        Error::InvalidStructure {
            format: Format::Csr,
            ..
        }
    ));
    let err = Csr::<f64, u32>::try_new(1 << 33, 1, vec![0; 2], vec![], vec![])
        .unwrap_err()
        .error;
    assert!(
        matches!(err, Error::IndexOverflow { value, .. } if value == 1 << 33),
        "{err}"
    );
    let wide = Coo::<f32, usize>::from_triplets(1, 3_000_000_000, &[(0, 2_999_999_999, 1.0)])
        .unwrap()
        .to_csr()
        .unwrap();
    let err = wide.with_index::<i32>().unwrap_err();
    assert!(
        matches!(
            err,
            Error::IndexOverflow {
                index_type: "i32",
                ..
            }
        ),
        "{err}"
    );
    assert!(wide.with_index::<u32>().is_ok());
}

#[test]
fn unknown_names_are_refused_with_the_choices() {
    for (result, choices) in [
        (
            "gpu".parse::<sparse_blas::BackendRequest>().map(|_| ()),
            "auto cpu cuda cusparse",
        ),
        ("f8".parse::<Precision>().map(|_| ()), "tf32"),
        ("csc".parse::<Format>().map(|_| ()), "tiled16"),
    ] {
        let err = result.unwrap_err().to_string();
        assert!(err.contains(choices), "{err}");
    }
}
