//! The one error type of sparse-blas.

use std::path::PathBuf;

use crate::backend::BackendKind;
use crate::op::{Algorithm, Format, OpKind};
use crate::precision::Precision;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, with the context needed to act on it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operand's shape does not fit the operation.
    #[error("{context}: shape mismatch, expected {}x{} but found {}x{}", expected.0, expected.1, found.0, found.1)]
    ShapeMismatch {
        context: String,
        expected: (usize, usize),
        found: (usize, usize),
    },

    /// A sparse structure violates an invariant of its format.
    #[error("invalid {format} structure: {error}")]
    InvalidStructure {
        format: Format,
        error: StructureError,
    },

    /// The backend cannot run this combination (or this algorithm of it, when `algorithm` is
    /// named); `supported` lists what it runs instead.
    #[error(
        "{backend} does not run {op} on {format} in {precision}{}; it runs {supported}",
        algorithm.map(|a| format!(" with {a}")).unwrap_or_default()
    )]
    Unsupported {
        op: OpKind,
        format: Format,
        precision: Precision,
        algorithm: Option<Algorithm>,
        backend: BackendKind,
        supported: String,
    },

    /// The backend cannot be used on this machine.
    #[error("backend {backend} is not available: {reason}")]
    DeviceUnavailable {
        backend: BackendKind,
        reason: String,
    },

    /// The device ran out of memory: an allocation of `requested` bytes, or a launch (whose
    /// need is unknown) when `requested` is `None`.
    #[error(
        "out of memory on {device}: {}, {} free",
        requested.map_or("a launch failed".to_string(), |b| format!("{b} bytes asked for")),
        free.map_or("unknown bytes".to_string(), |b| format!("{b} bytes"))
    )]
    OutOfMemory {
        device: String,
        requested: Option<usize>,
        free: Option<usize>,
    },

    /// A call into a device library (driver, cuSPARSE, cuBLAS) failed; `source` is the
    /// library's own error, with its code.
    #[error("{backend}: {context}: {source}")]
    Device {
        backend: BackendKind,
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A kernel did not compile; `log` is the compiler's.
    #[error("compiling {kernel} failed ({source}):\n{log}")]
    Compile {
        kernel: String,
        log: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A run is wider than the plan reserved for (the `max_width` of its descriptor, or the
    /// last `reserve`): it would need a larger workspace, which `run` never allocates.
    #[error(
        "{op}: a width of {width} is past the {reserved} this plan reserved for; call the \
         plan's reserve({width}) first, or plan with max_width({width})"
    )]
    WidthExceeded {
        op: OpKind,
        width: usize,
        reserved: usize,
    },

    /// A count or index does not fit the index type.
    #[error("index overflow: {what} is {value}, but {index_type} holds at most {max}")]
    IndexOverflow {
        what: String,
        value: u128,
        index_type: &'static str,
        max: u64,
    },

    /// An operand lives in memory the executor cannot read or write.
    #[error("{context}: operand is in {found} memory, but this plan runs on {expected}")]
    WrongMemory {
        context: String,
        expected: String,
        found: String,
    },

    /// A Matrix Market file does not follow the format.
    #[error("{}line {line}: {message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    MatrixMarket {
        path: Option<PathBuf>,
        line: usize,
        message: String,
    },

    /// Reading or writing a file failed.
    #[error("{}{source}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Io {
        path: Option<PathBuf>,
        #[source]
        source: std::io::Error,
    },

    /// A conversion would store too many padded slots for the entries it holds.
    #[error("{format} would store {slots} slots for {nnz} entries, past the fill limit of {limit} slots")]
    FillLimit {
        format: Format,
        slots: usize,
        nnz: usize,
        limit: usize,
    },

    /// An iterative method cannot go on: `quantity` (named as the method's literature names
    /// it) became zero or lost its sign at `iteration`.
    #[error("{method} broke down at iteration {iteration}: {quantity}")]
    Breakdown {
        method: &'static str,
        iteration: usize,
        quantity: String,
    },

    /// Conjugate gradient found a direction p with pᵀAp <= 0: the matrix is not symmetric
    /// positive definite (BiCGSTAB solves such systems).
    #[error(
        "the matrix is not symmetric positive definite: pᵀAp = {value:e} at iteration          {iteration} of conjugate gradient (use bicgstab)"
    )]
    NotSpd { iteration: usize, value: f64 },

    /// A solver was given a matrix that is not square.
    #[error("a linear system needs a square matrix, but this one is {rows}x{cols}")]
    NotSquare { rows: usize, cols: usize },

    /// Jacobi preconditioning divides by the diagonal, and a diagonal entry is zero (or absent).
    #[error("row {row} has a zero (or no) diagonal entry, so Jacobi preconditioning cannot divide by it")]
    ZeroDiagonal { row: usize },

    /// An argument is outside its domain (an unknown name, a non-finite scale, ...).
    #[error("{message}")]
    InvalidArgument { message: String },

    /// An invariant of sparse-blas itself does not hold: a bug, whatever the input.
    #[error("internal error (a bug in sparse-blas): {message}")]
    Internal { message: String },
}

impl Error {
    pub fn shape(
        context: impl Into<String>,
        expected: (usize, usize),
        found: (usize, usize),
    ) -> Self {
        Error::ShapeMismatch {
            context: context.into(),
            expected,
            found,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            message: message.into(),
        }
    }

    pub fn overflow<I: crate::SpIndex>(what: impl Into<String>, value: usize) -> Self {
        Error::IndexOverflow {
            what: what.into(),
            value: value as u128,
            index_type: I::NAME,
            max: I::MAX,
        }
    }

    pub fn io(path: Option<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path, source }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal {
            message: message.into(),
        }
    }
}

/// Why a sparse structure is invalid, with the offending position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StructureError {
    #[error("{array} has length {found}, expected {expected}")]
    Length {
        array: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("row pointer {position} is {found}, expected {expected}")]
    RowPtrBound {
        position: usize,
        expected: usize,
        found: String,
    },
    #[error("row pointer decreases at row {row}")]
    RowPtrDecreasing { row: usize },
    #[error("entry {entry} (row {row}): column index {col} is outside 0..{cols}")]
    ColumnOutOfRange {
        row: usize,
        entry: usize,
        col: String,
        cols: usize,
    },
    #[error("entry {entry}: row index {row} is outside 0..{rows}")]
    RowOutOfRange {
        entry: usize,
        row: String,
        rows: usize,
    },
    #[error(
        "row {row}: column {col} follows column {previous} (columns must increase within a row)"
    )]
    Unsorted {
        row: usize,
        col: usize,
        previous: usize,
    },
    #[error("row {row}: column {col} appears more than once")]
    Duplicate { row: usize, col: usize },
    #[error("{0}")]
    Other(String),
}
