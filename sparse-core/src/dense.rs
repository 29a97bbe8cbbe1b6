//! Dense operands: rows, cols, leading dimension and layout over host or device memory.

use std::any::Any;
use std::fmt;

use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};

use crate::error::{Error, Result};

/// Element order of a dense matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Element (i, j) at `i*ld + j`.
    RowMajor,
    /// Element (i, j) at `i + j*ld`.
    ColMajor,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::RowMajor => "row-major",
            Layout::ColMajor => "col-major",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Memory owned by a device backend. Executors downcast it to their own buffer type.
pub trait DeviceMemory<T>: Send + Sync {
    /// Where the memory lives, e.g. `cuda:0`.
    fn location(&self) -> String;
    /// Number of elements.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Read-only elements of a dense operand.
pub enum Memory<'a, T> {
    Host(&'a [T]),
    Device(&'a dyn DeviceMemory<T>),
}

impl<T> Clone for Memory<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Memory<'_, T> {}

/// Writable elements of a dense operand.
pub enum MemoryMut<'a, T> {
    Host(&'a mut [T]),
    Device(&'a mut dyn DeviceMemory<T>),
}

fn location<T>(memory: &Memory<'_, T>) -> String {
    match memory {
        Memory::Host(_) => "host".to_string(),
        Memory::Device(d) => d.location(),
    }
}

/// Shape, leading dimension and layout shared by all dense operand types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geometry {
    rows: usize,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl Geometry {
    fn new(rows: usize, cols: usize, ld: usize, layout: Layout, len: usize) -> Result<Self> {
        let inner = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        };
        if ld < inner.max(1) {
            return Err(Error::invalid(format!(
                "leading dimension {ld} is smaller than {} for a {rows}x{cols} {layout} matrix",
                inner.max(1)
            )));
        }
        let g = Geometry {
            rows,
            cols,
            ld,
            layout,
        };
        let needed = g.span().ok_or_else(|| {
            Error::invalid(format!(
                "a {rows}x{cols} matrix with leading dimension {ld} overflows usize"
            ))
        })?;
        if len < needed {
            return Err(Error::invalid(format!(
                "a {rows}x{cols} {layout} matrix with leading dimension {ld} needs {needed} elements, \
                 but its memory holds {len}"
            )));
        }
        Ok(g)
    }

    fn tight(rows: usize, cols: usize, layout: Layout) -> (usize, Layout) {
        let ld = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        };
        (ld.max(1), layout)
    }

    /// Elements from the first to one past the last.
    fn span(&self) -> Option<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Some(0);
        }
        let (outer, inner) = match self.layout {
            Layout::RowMajor => (self.rows, self.cols),
            Layout::ColMajor => (self.cols, self.rows),
        };
        (outer - 1).checked_mul(self.ld)?.checked_add(inner)
    }

    #[inline(always)]
    fn offset(&self, i: usize, j: usize) -> usize {
        match self.layout {
            Layout::RowMajor => i * self.ld + j,
            Layout::ColMajor => i + j * self.ld,
        }
    }

    fn strides(&self) -> (usize, usize) {
        match self.layout {
            Layout::RowMajor => (self.ld, 1),
            Layout::ColMajor => (1, self.ld),
        }
    }
}

macro_rules! geometry_accessors {
    () => {
        pub fn rows(&self) -> usize {
            self.geometry.rows
        }
        pub fn cols(&self) -> usize {
            self.geometry.cols
        }
        pub fn shape(&self) -> (usize, usize) {
            (self.geometry.rows, self.geometry.cols)
        }
        pub fn ld(&self) -> usize {
            self.geometry.ld
        }
        pub fn layout(&self) -> Layout {
            self.geometry.layout
        }
        /// Position of element (i, j) in the memory.
        #[inline(always)]
        pub fn offset(&self, i: usize, j: usize) -> usize {
            self.geometry.offset(i, j)
        }
        /// Elements from the first to one past the last.
        pub fn span(&self) -> usize {
            self.geometry.span().unwrap_or(0)
        }
        /// An error unless the shape is `expected`.
        pub fn expect_shape(&self, context: &str, expected: (usize, usize)) -> Result<()> {
            if self.shape() == expected {
                Ok(())
            } else {
                Err(Error::shape(context, expected, self.shape()))
            }
        }
    };
}

/// A read-only dense matrix (a vector is n x 1).
pub struct DenseRef<'a, T> {
    memory: Memory<'a, T>,
    geometry: Geometry,
}

impl<T> Clone for DenseRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DenseRef<'_, T> {}

impl<'a, T> DenseRef<'a, T> {
    /// Checks that `ld` fits the layout and that the memory spans every element.
    pub fn try_new(
        memory: Memory<'a, T>,
        rows: usize,
        cols: usize,
        ld: usize,
        layout: Layout,
    ) -> Result<Self> {
        let len = match &memory {
            Memory::Host(s) => s.len(),
            Memory::Device(d) => d.len(),
        };
        Ok(DenseRef {
            geometry: Geometry::new(rows, cols, ld, layout, len)?,
            memory,
        })
    }

    /// A host matrix stored without gaps (`ld` = number of columns for row-major, of rows for
    /// column-major).
    pub fn from_slice(data: &'a [T], rows: usize, cols: usize, layout: Layout) -> Result<Self> {
        let (ld, layout) = Geometry::tight(rows, cols, layout);
        Self::try_new(Memory::Host(data), rows, cols, ld, layout)
    }

    /// A host column vector.
    pub fn vector(data: &'a [T]) -> Self {
        let (ld, layout) = Geometry::tight(data.len(), 1, Layout::ColMajor);
        DenseRef {
            memory: Memory::Host(data),
            geometry: Geometry {
                rows: data.len(),
                cols: 1,
                ld,
                layout,
            },
        }
    }

    geometry_accessors!();

    pub fn memory(&self) -> Memory<'a, T> {
        self.memory
    }

    pub fn location(&self) -> String {
        location(&self.memory)
    }

    /// The host elements, or [`Error::WrongMemory`] when the operand lives on a device.
    pub fn host(&self, context: &str) -> Result<&'a [T]> {
        match self.memory {
            Memory::Host(s) => Ok(s),
            Memory::Device(d) => Err(Error::WrongMemory {
                context: context.to_string(),
                expected: "host".to_string(),
                found: d.location(),
            }),
        }
    }

    /// Borrows a contiguous ndarray view without copying. Views with gaps between rows or
    /// columns (or negative strides) are refused: copy them with [`Dense::from_ndarray`].
    pub fn from_ndarray(view: ArrayView2<'a, T>) -> Result<Self> {
        let (rows, cols) = view.dim();
        let layout = ndarray_layout(view.strides(), rows, cols)?;
        let data = view.to_slice_memory_order().ok_or_else(|| {
            Error::invalid("ndarray view is not contiguous; copy it with Dense::from_ndarray")
        })?;
        Self::from_slice(data, rows, cols, layout)
    }

    /// The elements as an ndarray view, without copying (host memory only).
    pub fn to_ndarray(&self) -> Result<ArrayView2<'a, T>> {
        let data = self.host("to_ndarray")?;
        let (rs, cs) = self.geometry.strides();
        let shape = (self.rows(), self.cols()).strides((rs, cs));
        ArrayView2::from_shape(shape, &data[..self.span()])
            .map_err(|e| Error::invalid(e.to_string()))
    }
}

impl<T: Copy> DenseRef<'_, T> {
    /// Element (i, j) of a host matrix. Panics on device memory or out of range, like indexing.
    #[inline(always)]
    pub fn at(&self, i: usize, j: usize) -> T {
        match self.memory {
            Memory::Host(s) => s[self.offset(i, j)],
            Memory::Device(_) => panic!("DenseRef::at on device memory"),
        }
    }
}

/// Layout of a contiguous ndarray view; vectors (one row or one column) fit both layouts.
fn ndarray_layout(strides: &[isize], rows: usize, cols: usize) -> Result<Layout> {
    let (rs, cs) = (strides[0], strides[1]);
    if rs < 0 || cs < 0 {
        return Err(Error::invalid(format!(
            "ndarray view with negative strides ({rs}, {cs})"
        )));
    }
    if rows <= 1 {
        Ok(Layout::RowMajor)
    } else if cols <= 1 || rs == 1 {
        Ok(Layout::ColMajor)
    } else if cs == 1 {
        Ok(Layout::RowMajor)
    } else {
        Err(Error::invalid(format!(
            "ndarray view with strides ({rs}, {cs}) has no unit stride"
        )))
    }
}

/// A writable dense matrix (a vector is n x 1).
pub struct DenseMut<'a, T> {
    memory: MemoryMut<'a, T>,
    geometry: Geometry,
}

impl<'a, T> DenseMut<'a, T> {
    pub fn try_new(
        memory: MemoryMut<'a, T>,
        rows: usize,
        cols: usize,
        ld: usize,
        layout: Layout,
    ) -> Result<Self> {
        let len = match &memory {
            MemoryMut::Host(s) => s.len(),
            MemoryMut::Device(d) => d.len(),
        };
        Ok(DenseMut {
            geometry: Geometry::new(rows, cols, ld, layout, len)?,
            memory,
        })
    }

    pub fn from_slice(data: &'a mut [T], rows: usize, cols: usize, layout: Layout) -> Result<Self> {
        let (ld, layout) = Geometry::tight(rows, cols, layout);
        Self::try_new(MemoryMut::Host(data), rows, cols, ld, layout)
    }

    pub fn vector(data: &'a mut [T]) -> Self {
        let (ld, layout) = Geometry::tight(data.len(), 1, Layout::ColMajor);
        let rows = data.len();
        DenseMut {
            memory: MemoryMut::Host(data),
            geometry: Geometry {
                rows,
                cols: 1,
                ld,
                layout,
            },
        }
    }

    geometry_accessors!();

    pub fn memory(&mut self) -> &mut MemoryMut<'a, T> {
        &mut self.memory
    }

    pub fn location(&self) -> String {
        match &self.memory {
            MemoryMut::Host(_) => "host".to_string(),
            MemoryMut::Device(d) => d.location(),
        }
    }

    /// The host elements, or [`Error::WrongMemory`] when the operand lives on a device.
    pub fn host(&mut self, context: &str) -> Result<&mut [T]> {
        match &mut self.memory {
            MemoryMut::Host(s) => Ok(s),
            MemoryMut::Device(d) => Err(Error::WrongMemory {
                context: context.to_string(),
                expected: "host".to_string(),
                found: d.location(),
            }),
        }
    }

    /// A read-only view of the same elements.
    pub fn as_ref(&self) -> DenseRef<'_, T> {
        let memory = match &self.memory {
            MemoryMut::Host(s) => Memory::Host(s),
            MemoryMut::Device(d) => Memory::Device(&**d),
        };
        DenseRef {
            memory,
            geometry: self.geometry,
        }
    }

    /// A shorter-lived writable view of the same elements.
    pub fn reborrow(&mut self) -> DenseMut<'_, T> {
        let memory = match &mut self.memory {
            MemoryMut::Host(s) => MemoryMut::Host(s),
            MemoryMut::Device(d) => MemoryMut::Device(&mut **d),
        };
        DenseMut {
            memory,
            geometry: self.geometry,
        }
    }

    /// Borrows a contiguous mutable ndarray view without copying.
    pub fn from_ndarray(view: ArrayViewMut2<'a, T>) -> Result<Self> {
        let (rows, cols) = view.dim();
        let layout = ndarray_layout(view.strides(), rows, cols)?;
        let data = view.into_slice_memory_order().ok_or_else(|| {
            Error::invalid("ndarray view is not contiguous; copy it into a Dense")
        })?;
        Self::from_slice(data, rows, cols, layout)
    }

    /// The elements as a mutable ndarray view, without copying (host memory only).
    pub fn into_ndarray(self) -> Result<ArrayViewMut2<'a, T>> {
        let geometry = self.geometry;
        let span = geometry.span().unwrap_or(0);
        let data = match self.memory {
            MemoryMut::Host(s) => s,
            MemoryMut::Device(d) => {
                return Err(Error::WrongMemory {
                    context: "into_ndarray".to_string(),
                    expected: "host".to_string(),
                    found: d.location(),
                })
            }
        };
        let (rs, cs) = geometry.strides();
        let shape = (geometry.rows, geometry.cols).strides((rs, cs));
        ArrayViewMut2::from_shape(shape, &mut data[..span])
            .map_err(|e| Error::invalid(e.to_string()))
    }
}

enum Storage<T> {
    Host(Vec<T>),
    Device(Box<dyn DeviceMemory<T>>),
}

/// An owned dense matrix in host or device memory.
pub struct Dense<T> {
    storage: Storage<T>,
    geometry: Geometry,
}

impl<T: Copy + Default> Dense<T> {
    /// A host matrix of default values (zeros for every [`crate::Scalar`]).
    pub fn zeros(rows: usize, cols: usize, layout: Layout) -> Self {
        let (ld, layout) = Geometry::tight(rows, cols, layout);
        Dense {
            storage: Storage::Host(vec![T::default(); rows * cols]),
            geometry: Geometry {
                rows,
                cols,
                ld,
                layout,
            },
        }
    }

    /// A host matrix with element (i, j) = `f(i, j)`.
    pub fn from_fn(
        rows: usize,
        cols: usize,
        layout: Layout,
        mut f: impl FnMut(usize, usize) -> T,
    ) -> Self {
        let mut d = Self::zeros(rows, cols, layout);
        let g = d.geometry;
        if let Storage::Host(v) = &mut d.storage {
            for i in 0..rows {
                for j in 0..cols {
                    v[g.offset(i, j)] = f(i, j);
                }
            }
        }
        d
    }

    /// Copies any ndarray view (strided or not) into a row-major host matrix.
    pub fn from_ndarray(view: ArrayView2<'_, T>) -> Self {
        let (rows, cols) = view.dim();
        Self::from_fn(rows, cols, Layout::RowMajor, |i, j| view[[i, j]])
    }

    /// The same matrix in the other layout (host only).
    pub fn to_layout(&self, layout: Layout) -> Result<Self> {
        let src = self.as_ref();
        let data = src.host("to_layout")?;
        Ok(Self::from_fn(self.rows(), self.cols(), layout, |i, j| {
            data[src.offset(i, j)]
        }))
    }
}

impl<T> Dense<T> {
    /// Wraps host elements; `ld` must fit the layout and `data` span every element.
    pub fn from_vec(
        data: Vec<T>,
        rows: usize,
        cols: usize,
        ld: usize,
        layout: Layout,
    ) -> Result<Self> {
        let geometry = Geometry::new(rows, cols, ld, layout, data.len())?;
        Ok(Dense {
            storage: Storage::Host(data),
            geometry,
        })
    }

    /// Wraps device memory made by a backend.
    pub fn from_device(
        memory: Box<dyn DeviceMemory<T>>,
        rows: usize,
        cols: usize,
        ld: usize,
        layout: Layout,
    ) -> Result<Self> {
        let geometry = Geometry::new(rows, cols, ld, layout, memory.len())?;
        Ok(Dense {
            storage: Storage::Device(memory),
            geometry,
        })
    }

    geometry_accessors!();

    pub fn is_host(&self) -> bool {
        matches!(self.storage, Storage::Host(_))
    }

    pub fn as_ref(&self) -> DenseRef<'_, T> {
        let memory = match &self.storage {
            Storage::Host(v) => Memory::Host(v.as_slice()),
            Storage::Device(d) => Memory::Device(d.as_ref()),
        };
        DenseRef {
            memory,
            geometry: self.geometry,
        }
    }

    pub fn as_mut(&mut self) -> DenseMut<'_, T> {
        let memory = match &mut self.storage {
            Storage::Host(v) => MemoryMut::Host(v.as_mut_slice()),
            Storage::Device(d) => MemoryMut::Device(d.as_mut()),
        };
        DenseMut {
            memory,
            geometry: self.geometry,
        }
    }

    /// The host elements in memory order, or an error for device memory.
    pub fn into_host_vec(self) -> Result<Vec<T>> {
        match self.storage {
            Storage::Host(v) => Ok(v),
            Storage::Device(d) => Err(Error::WrongMemory {
                context: "into_host_vec".to_string(),
                expected: "host".to_string(),
                found: d.location(),
            }),
        }
    }

    /// The device memory, for the backend that made it.
    pub fn device_memory(&self) -> Option<&dyn DeviceMemory<T>> {
        match &self.storage {
            Storage::Host(_) => None,
            Storage::Device(d) => Some(d.as_ref()),
        }
    }
}

impl<T: Copy> Dense<T> {
    /// Element (i, j) of a host matrix. Panics on device memory or out of range, like indexing.
    pub fn at(&self, i: usize, j: usize) -> T {
        self.as_ref().at(i, j)
    }
}

impl<T: fmt::Debug + Copy> fmt::Debug for Dense<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Dense {}x{} {} ld={} on {}",
            self.rows(),
            self.cols(),
            self.layout(),
            self.ld(),
            location(&self.as_ref().memory)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array2, ShapeBuilder};

    #[test]
    fn leading_dimension_and_length_are_checked() {
        let data = [0.0f64; 6];
        assert!(DenseRef::try_new(Memory::Host(&data), 2, 3, 2, Layout::RowMajor).is_err());
        assert!(DenseRef::try_new(Memory::Host(&data), 2, 3, 4, Layout::RowMajor).is_err());
        let v = DenseRef::try_new(Memory::Host(&data), 2, 2, 4, Layout::RowMajor).unwrap();
        assert_eq!(v.offset(1, 1), 5);
        assert!(DenseRef::try_new(Memory::Host(&data[..0]), 0, 5, 1, Layout::ColMajor).is_ok());
    }

    #[test]
    fn ndarray_views_convert_without_copies() {
        let a: Array2<f32> = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let r = DenseRef::from_ndarray(a.view()).unwrap();
        assert_eq!(r.layout(), Layout::RowMajor);
        assert_eq!(r.at(1, 2), 6.0);
        assert_eq!(r.host("t").unwrap().as_ptr(), a.as_ptr());
        assert_eq!(r.to_ndarray().unwrap(), a.view());

        let f = Array2::from_shape_vec((2, 3).f(), vec![1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0]).unwrap();
        let c = DenseRef::from_ndarray(f.view()).unwrap();
        assert_eq!(c.layout(), Layout::ColMajor);
        assert_eq!(c.at(1, 2), 6.0);
        assert_eq!(c.to_ndarray().unwrap(), a.view());
    }

    #[test]
    fn strided_ndarray_views_are_refused_not_misread() {
        let a = Array2::<f64>::zeros((4, 4));
        let sub = a.slice(ndarray::s![.., 1..3]);
        assert!(DenseRef::from_ndarray(sub).is_err());
        assert_eq!(Dense::from_ndarray(sub).shape(), (4, 2));
    }

    #[test]
    fn mutable_views_write_through() {
        let mut a = Array2::<f64>::zeros((2, 2));
        {
            let mut m = DenseMut::from_ndarray(a.view_mut()).unwrap();
            let off = m.offset(1, 0);
            m.host("t").unwrap()[off] = 7.0;
        }
        assert_eq!(a[[1, 0]], 7.0);
    }

    #[test]
    fn layout_conversion_keeps_elements() {
        let d = Dense::from_fn(3, 2, Layout::RowMajor, |i, j| (i * 10 + j) as f64);
        let c = d.to_layout(Layout::ColMajor).unwrap();
        assert_eq!(c.ld(), 3);
        assert_eq!(c.at(2, 1), 21.0);
    }
}
