//! [`VectorOps`] on the CUDA backend (`kernels/vector_ops.cu`): one launch per pass plus, for a
//! reduction, one single-block launch that writes its sums into the scalar workspace. Nothing
//! waits for the device but [`VectorOps::read_scalars`].
//!
//! The grid, the partials and the order of every sum are those of `blas1.rs` (its workspace
//! holds the partials), so reductions are deterministic.

use cudarc::driver::CudaSlice;
use sparse_core::{
    check_slots, Coef, DType, DenseMut, DenseRef, Error, Real, Result, Scalar, VectorOps, ONE,
};

use crate::blas1::{config, vector, BLOCK, MAX_BLOCKS, PARTIAL_SETS};
use crate::cusparse::CusparseBackend;
use crate::executor::CudaBackend;
use crate::kernel::{
    c_type, kernel_params, Entry, KernelParams, KernelSource, KernelSpec, MutPtr, Ptr,
};
use crate::operand::{bind_output, input_buffer, to_u32, Bound};

kernel_params! {
    /// A coefficient: `±(s[n0]/s[d0])·(s[n1]/s[d1])` ([`Coef`]).
    pub(crate) struct Ratios {
        negative: u32,
        n0: u32,
        d0: u32,
        n1: u32,
        d1: u32,
    }
}

kernel_params! {
    /// `vec_map<MODE>`: y = x, y += c*x, y = x + c*y or y = d ∘ x.
    pub(crate) struct VecMap<T> {
        n: u32,
        c: plain(Ratios),
        s: ptr(f64),
        x: ptr(T),
        incx: u32,
        d: ptr(T),
        incd: u32,
        y: out(T),
        incy: u32,
    }
}

kernel_params! {
    /// `vec_convert<S, T>`: y = x rounded to T (x holds S).
    pub(crate) struct VecConvert<T> {
        n: u32,
        x: ptr(u8),
        incx: u32,
        y: out(T),
        incy: u32,
    }
}

kernel_params! {
    /// `vec_dots<TWO>`: partials of x·y (and x·z).
    pub(crate) struct VecDots<T> {
        n: u32,
        x: ptr(T),
        incx: u32,
        y: ptr(T),
        incy: u32,
        z: ptr(T),
        incz: u32,
        partial: out(acc),
    }
}

kernel_params! {
    /// `vec_cg_update<NORM>`: x += c*p, r -= c*q (and the partials of r·r).
    pub(crate) struct VecCgUpdate<T> {
        n: u32,
        c: plain(Ratios),
        s: ptr(f64),
        p: ptr(T),
        incp: u32,
        q: ptr(T),
        incq: u32,
        x: out(T),
        incx: u32,
        r: out(T),
        incr: u32,
        partial: out(acc),
    }
}

kernel_params! {
    /// `vec_scale_dots`: z = d ∘ r and the partials of r·z and r·r.
    pub(crate) struct VecScaleDots<T> {
        n: u32,
        d: ptr(T),
        incd: u32,
        r: ptr(T),
        incr: u32,
        z: out(T),
        incz: u32,
        partial: out(acc),
    }
}

kernel_params! {
    /// `vec_finish<TWO>`: s[k0] (and s[k1]) = the sums of the partials.
    pub(crate) struct VecFinish<T> {
        count: u32,
        partial: ptr(acc),
        s: out(f64),
        k0: u32,
        k1: u32,
    }
}

/// The passes of `vec_map`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Mode {
    Copy = 0,
    Axpy = 1,
    Xpby = 2,
    Scale = 3,
}

const MODES: [Mode; 4] = [Mode::Copy, Mode::Axpy, Mode::Xpby, Mode::Scale];

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "vector_ops",
    code: include_str!("../kernels/vector_ops.cu"),
    params: &[
        Ratios::C_DECL,
        <VecMap<f32> as KernelParams>::C_DECL,
        <VecConvert<f32> as KernelParams>::C_DECL,
        <VecDots<f32> as KernelParams>::C_DECL,
        <VecCgUpdate<f32> as KernelParams>::C_DECL,
        <VecScaleDots<f32> as KernelParams>::C_DECL,
        <VecFinish<f32> as KernelParams>::C_DECL,
    ],
    defines: &[
        ("BLAS1_BLOCK", BLOCK),
        ("VEC_PARTIALS", MAX_BLOCKS),
        ("VEC_ONE", ONE),
        ("VEC_COPY", Mode::Copy as u32),
        ("VEC_AXPY", Mode::Axpy as u32),
        ("VEC_XPBY", Mode::Xpby as u32),
        ("VEC_SCALE", Mode::Scale as u32),
    ],
};

fn map<T: Scalar>(mode: Mode) -> Result<Entry<VecMap<T>>> {
    Entry::new(&SOURCE, "vec_map", &[&c_type(T::DTYPE)?, &(mode as u32)])
}
fn convert<S: Scalar, T: Scalar>() -> Result<Entry<VecConvert<T>>> {
    Entry::new(
        &SOURCE,
        "vec_convert",
        &[&c_type(S::DTYPE)?, &c_type(T::DTYPE)?],
    )
}
fn dots<T: Scalar>(two: bool) -> Result<Entry<VecDots<T>>> {
    Entry::new(&SOURCE, "vec_dots", &[&c_type(T::DTYPE)?, &two])
}
fn cg_update<T: Scalar>(norm: bool) -> Result<Entry<VecCgUpdate<T>>> {
    Entry::new(&SOURCE, "vec_cg_update", &[&c_type(T::DTYPE)?, &norm])
}
fn scale_dots<T: Scalar>() -> Result<Entry<VecScaleDots<T>>> {
    Entry::new(&SOURCE, "vec_scale_dots", &[&c_type(T::DTYPE)?])
}
fn finish<T: Scalar>(two: bool) -> Result<Entry<VecFinish<T>>> {
    Entry::new(&SOURCE, "vec_finish", &[&c_type(T::DTYPE)?, &two])
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let mut specs = Vec::new();
    for mode in MODES {
        specs.push(map::<T>(mode)?.spec().clone());
    }
    for flag in [false, true] {
        specs.push(dots::<T>(flag)?.spec().clone());
        specs.push(cg_update::<T>(flag)?.spec().clone());
        specs.push(finish::<T>(flag)?.spec().clone());
    }
    specs.push(scale_dots::<T>()?.spec().clone());
    Ok(specs)
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = specs_of::<f64>()?;
    specs.extend(specs_of::<f32>()?);
    specs.extend([
        convert::<f64, f32>()?.spec().clone(),
        convert::<f32, f32>()?.spec().clone(),
        convert::<f32, f64>()?.spec().clone(),
        convert::<f64, f64>()?.spec().clone(),
    ]);
    Ok(specs)
}

impl Ratios {
    fn of(c: Coef) -> Self {
        let [(n0, d0), (n1, d1)] = c.ratios;
        Ratios {
            negative: u32::from(c.negative),
            n0,
            d0,
            n1,
            d1,
        }
    }
}

impl CudaBackend {
    /// An n x 1 output vector of length `n`.
    fn vector_out<T: Scalar>(
        &self,
        y: &mut DenseMut<'_, T>,
        n: u32,
        context: &str,
    ) -> Result<Bound> {
        y.expect_shape(context, (n as usize, 1))?;
        bind_output(y, self.device(), context)
    }

    /// The scalar workspace, with the slots a pass writes checked against it.
    fn scalars_out(
        &self,
        s: &mut DenseMut<'_, f64>,
        slots: impl IntoIterator<Item = usize>,
    ) -> Result<Bound> {
        check_slots(s.rows(), slots)?;
        bind_output(s, self.device(), "scalars")
    }

    /// The scalar workspace a coefficient reads.
    fn scalars_in(&self, s: &DenseRef<'_, f64>, c: Coef) -> Result<Ptr<f64>> {
        check_slots(s.rows(), c.max_slot())?;
        Ok(vector(self, s, "scalars")?.1.input())
    }

    /// A pass of `vec_map`.
    #[allow(clippy::too_many_arguments)]
    fn map_pass<T: Real>(
        &self,
        mode: Mode,
        c: Coef,
        s: Ptr<f64>,
        x: DenseRef<'_, T>,
        d: Option<DenseRef<'_, T>>,
        mut y: DenseMut<'_, T>,
        context: &str,
    ) -> Result<()> {
        let (n, xb) = vector(self, &x, context)?;
        let (d, incd) = match d {
            Some(d) => {
                d.expect_shape(context, (n as usize, 1))?;
                let (_, db) = vector(self, &d, context)?;
                (db.input(), db.increment())
            }
            None => (Ptr::NULL, 1),
        };
        let yb = self.vector_out(&mut y, n, context)?;
        if n == 0 {
            return Ok(());
        }
        let params = VecMap {
            n,
            c: Ratios::of(c),
            s,
            x: xb.input(),
            incx: xb.increment(),
            d,
            incd,
            y: yb.output(),
            incy: yb.increment(),
        };
        // SAFETY: x, d (when the mode reads it) and y hold n elements at their strides (bound
        // operands), y is borrowed mutably, and the coefficient's slots are inside s.
        unsafe {
            self.device()
                .kernel(&map::<T>(mode)?)?
                .launch(config(n), &params)
        }
    }

    /// The finishing launch of a reduction over n elements, into `s[slots]` (two sums when
    /// `two`), with the partials the pass wrote.
    fn finish_pass<T: Real>(
        &self,
        n: u32,
        two: bool,
        partials: &CudaSlice<u8>,
        s: &Bound,
        slots: [usize; 2],
    ) -> Result<()> {
        let params = VecFinish::<T> {
            count: if n == 0 { 0 } else { config(n).grid_dim.0 },
            partial: Ptr::of_bytes(partials, self.device()),
            s: s.output(),
            k0: to_u32("slot", slots[0])?,
            k1: to_u32("slot", slots[1])?,
        };
        // SAFETY: the pass before it on this stream wrote `count` partials per set (none when
        // n is 0, which sums to 0); the slots are inside s (checked by the caller).
        unsafe {
            self.device()
                .kernel(&finish::<T>(two)?)?
                .launch(config(1), &params)
        }
    }
}

impl VectorOps for CudaBackend {
    fn copy<T: Real>(&self, x: DenseRef<'_, T>, y: DenseMut<'_, T>) -> Result<()> {
        self.map_pass(Mode::Copy, Coef::one(), Ptr::NULL, x, None, y, "copy")
    }

    fn convert<T: Real, U: Real>(&self, x: DenseRef<'_, T>, mut y: DenseMut<'_, U>) -> Result<()> {
        let (n, xb) = vector(self, &x, "convert x")?;
        let yb = self.vector_out(&mut y, n, "convert y")?;
        if n == 0 {
            return Ok(());
        }
        let entry = match (T::DTYPE, U::DTYPE) {
            (DType::F64, _) => convert::<f64, U>()?,
            (DType::F32, _) => convert::<f32, U>()?,
            (other, _) => return Err(Error::internal(format!("convert from {other}"))),
        };
        let params = VecConvert::<U> {
            n,
            x: xb.input(),
            incx: xb.increment(),
            y: yb.output(),
            incy: yb.increment(),
        };
        // SAFETY: x holds n elements of T (the kernel's S) and y n of U at their strides.
        unsafe { self.device().kernel(&entry)?.launch(config(n), &params) }
    }

    fn dot<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        z: Option<DenseRef<'_, T>>,
        mut s: DenseMut<'_, f64>,
        slots: [usize; 2],
    ) -> Result<()> {
        let (n, xb) = vector(self, &x, "dot x")?;
        y.expect_shape("dot y", (n as usize, 1))?;
        let (_, yb) = vector(self, &y, "dot y")?;
        let zb = match z {
            Some(z) => {
                z.expect_shape("dot z", (n as usize, 1))?;
                Some(vector(self, &z, "dot z")?.1)
            }
            None => None,
        };
        let two = zb.is_some();
        let sb = self.scalars_out(&mut s, if two { slots } else { [slots[0]; 2] })?;
        let device = self.device();
        let partials = self.blas1.lock();
        let (z, incz) = zb.map_or((Ptr::NULL, 1), |b| (b.input(), b.increment()));
        let params = VecDots {
            n,
            x: xb.input(),
            incx: xb.increment(),
            y: yb.input(),
            incy: yb.increment(),
            z,
            incz,
            partial: MutPtr::of_bytes(&partials, device),
        };
        if n > 0 {
            // SAFETY: x, y (and z) hold n elements at their strides; the partials hold
            // PARTIAL_SETS x MAX_BLOCKS values, MAX_BLOCKS >= the grid's blocks.
            unsafe {
                device
                    .kernel(&dots::<T>(two)?)?
                    .launch(config(n), &params)?
            };
        }
        self.finish_pass::<T>(n, two, &partials, &sb, slots)
    }

    fn axpy<T: Real>(
        &self,
        c: Coef,
        x: DenseRef<'_, T>,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        let s = self.scalars_in(&s, c)?;
        self.map_pass(Mode::Axpy, c, s, x, None, y, "axpy")
    }

    fn xpby<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        c: Coef,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        let s = self.scalars_in(&s, c)?;
        self.map_pass(Mode::Xpby, c, s, x, None, y, "xpby")
    }

    fn cg_update<T: Real>(
        &self,
        c: Coef,
        p: DenseRef<'_, T>,
        q: DenseRef<'_, T>,
        mut x: DenseMut<'_, T>,
        mut r: DenseMut<'_, T>,
        mut s: DenseMut<'_, f64>,
        norm: Option<usize>,
    ) -> Result<()> {
        let (n, pb) = vector(self, &p, "cg_update p")?;
        q.expect_shape("cg_update q", (n as usize, 1))?;
        let (_, qb) = vector(self, &q, "cg_update q")?;
        let xb = self.vector_out(&mut x, n, "cg_update x")?;
        let rb = self.vector_out(&mut r, n, "cg_update r")?;
        check_slots(s.rows(), c.max_slot())?;
        let sb = self.scalars_out(&mut s, norm)?;
        let device = self.device();
        let partials = self.blas1.lock();
        let params = VecCgUpdate {
            n,
            c: Ratios::of(c),
            s: sb.input(),
            p: pb.input(),
            incp: pb.increment(),
            q: qb.input(),
            incq: qb.increment(),
            x: xb.output(),
            incx: xb.increment(),
            r: rb.output(),
            incr: rb.increment(),
            partial: MutPtr::of_bytes(&partials, device),
        };
        if n > 0 {
            // SAFETY: p, q, x and r hold n elements at their strides, x and r are borrowed
            // mutably (distinct buffers), the coefficient's slots are inside s, and the partials
            // hold MAX_BLOCKS values per set.
            unsafe {
                device
                    .kernel(&cg_update::<T>(norm.is_some())?)?
                    .launch(config(n), &params)?
            };
        }
        match norm {
            Some(k) => self.finish_pass::<T>(n, false, &partials, &sb, [k; 2]),
            None => Ok(()),
        }
    }

    fn scale<T: Real>(
        &self,
        d: DenseRef<'_, T>,
        r: DenseRef<'_, T>,
        mut z: DenseMut<'_, T>,
        mut s: DenseMut<'_, f64>,
        slots: Option<[usize; 2]>,
    ) -> Result<()> {
        let Some(slots) = slots else {
            return self.map_pass(Mode::Scale, Coef::one(), Ptr::NULL, r, Some(d), z, "scale");
        };
        let (n, rb) = vector(self, &r, "scale r")?;
        d.expect_shape("scale d", (n as usize, 1))?;
        let (_, db) = vector(self, &d, "scale d")?;
        let zb = self.vector_out(&mut z, n, "scale z")?;
        let sb = self.scalars_out(&mut s, slots)?;
        let device = self.device();
        let partials = self.blas1.lock();
        let params = VecScaleDots {
            n,
            d: db.input(),
            incd: db.increment(),
            r: rb.input(),
            incr: rb.increment(),
            z: zb.output(),
            incz: zb.increment(),
            partial: MutPtr::of_bytes(&partials, device),
        };
        if n > 0 {
            // SAFETY: d, r and z hold n elements at their strides, z is borrowed mutably, and
            // the partials hold MAX_BLOCKS values per set.
            unsafe {
                device
                    .kernel(&scale_dots::<T>()?)?
                    .launch(config(n), &params)?
            };
        }
        self.finish_pass::<T>(n, true, &partials, &sb, slots)
    }

    fn read_scalars(&self, s: DenseRef<'_, f64>, out: &mut [f64]) -> Result<()> {
        check_slots(s.rows(), out.len().checked_sub(1))?;
        s.expect_shape("scalars", (s.rows(), 1))?;
        let values = input_buffer(&s, self.device(), "scalars")?.to_host()?;
        for (k, v) in out.iter_mut().enumerate() {
            *v = values[s.offset(k, 0)];
        }
        Ok(())
    }
}

const _: () = assert!(
    PARTIAL_SETS == 2,
    "vector_ops.cu writes two sets of partials"
);

/// The `cusparse` backend runs the `cuda` backend's vector operations on its device and stream.
impl VectorOps for CusparseBackend {
    fn copy<T: Real>(&self, x: DenseRef<'_, T>, y: DenseMut<'_, T>) -> Result<()> {
        VectorOps::copy(self.cuda(), x, y)
    }
    fn convert<T: Real, U: Real>(&self, x: DenseRef<'_, T>, y: DenseMut<'_, U>) -> Result<()> {
        VectorOps::convert(self.cuda(), x, y)
    }
    fn dot<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        z: Option<DenseRef<'_, T>>,
        s: DenseMut<'_, f64>,
        slots: [usize; 2],
    ) -> Result<()> {
        VectorOps::dot(self.cuda(), x, y, z, s, slots)
    }
    fn axpy<T: Real>(
        &self,
        c: Coef,
        x: DenseRef<'_, T>,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        VectorOps::axpy(self.cuda(), c, x, y, s)
    }
    fn xpby<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        c: Coef,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        VectorOps::xpby(self.cuda(), x, c, y, s)
    }
    fn cg_update<T: Real>(
        &self,
        c: Coef,
        p: DenseRef<'_, T>,
        q: DenseRef<'_, T>,
        x: DenseMut<'_, T>,
        r: DenseMut<'_, T>,
        s: DenseMut<'_, f64>,
        norm: Option<usize>,
    ) -> Result<()> {
        VectorOps::cg_update(self.cuda(), c, p, q, x, r, s, norm)
    }
    fn scale<T: Real>(
        &self,
        d: DenseRef<'_, T>,
        r: DenseRef<'_, T>,
        z: DenseMut<'_, T>,
        s: DenseMut<'_, f64>,
        slots: Option<[usize; 2]>,
    ) -> Result<()> {
        VectorOps::scale(self.cuda(), d, r, z, s, slots)
    }
    fn read_scalars(&self, s: DenseRef<'_, f64>, out: &mut [f64]) -> Result<()> {
        VectorOps::read_scalars(self.cuda(), s, out)
    }
}
