//! One GPU: its context and stream, the kernel modules loaded into it, and device memory.

use std::any::Any;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, DriverError,
    ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;
use sparse_core::{BackendKind, DeviceMemory, Error, Result, Scalar};

use crate::compile::{arch_name, compile, KernelSource};
use crate::probe::{probe, DeviceInfo};

/// Maps a driver error to the typed error, out of memory apart.
pub fn driver_error(context: &str, e: DriverError) -> Error {
    if e.0 == cudarc::driver::sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
        return Error::OutOfMemory {
            device: context.to_string(),
            bytes: 0,
        };
    }
    Error::Device {
        backend: BackendKind::Cuda,
        message: format!("{context}: {e}"),
    }
}

/// A context with one stream, where every operation of a backend runs in order.
pub struct Device {
    pub info: DeviceInfo,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    arch: &'static str,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
}

impl Device {
    pub fn new(ordinal: usize) -> Result<Arc<Self>> {
        let info = probe(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error("creating the context", e))?;
        // Everything runs on one stream, so cudarc's per-buffer events would only add latency.
        // SAFETY: called before any allocation or launch on this context.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| driver_error("creating a stream", e))?;
        let arch = arch_name(info.compute_capability);
        Ok(Arc::new(Device {
            info,
            ctx,
            stream,
            arch,
            modules: Mutex::new(HashMap::new()),
        }))
    }

    pub fn location(&self) -> String {
        format!("cuda:{}", self.info.ordinal)
    }

    /// The kernel `name` of `source`, compiling and loading the module on first use.
    pub fn function(&self, source: KernelSource, name: &str) -> Result<CudaFunction> {
        let module = {
            let mut modules = self
                .modules
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match modules.get(source.name) {
                Some(m) => m.clone(),
                None => {
                    let ptx = compile(source, self.arch)?;
                    let m = self
                        .ctx
                        .load_module(Ptx::from_src(ptx))
                        .map_err(|e| driver_error(&format!("loading {}.cu", source.name), e))?;
                    modules.insert(source.name, m.clone());
                    m
                }
            }
        };
        module
            .load_function(name)
            .map_err(|e| driver_error(&format!("kernel {name} in {}.cu", source.name), e))
    }

    /// `n` zeroed elements of `T`.
    pub fn zeros<T: Scalar>(self: &Arc<Self>, n: usize) -> Result<CudaBuffer<T>> {
        self.zeros_with_slack(n, 0)
    }

    /// `n` zeroed elements of `T` followed by `slack` zero bytes outside the buffer's length.
    fn zeros_with_slack<T: Scalar>(
        self: &Arc<Self>,
        n: usize,
        slack: usize,
    ) -> Result<CudaBuffer<T>> {
        let bytes = n
            .checked_mul(size_of::<T>())
            .and_then(|b| b.checked_add(slack))
            .ok_or_else(|| Error::invalid(format!("{n} elements overflow usize bytes")))?;
        let slice = self
            .stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| self.alloc_error(bytes, e))?;
        Ok(CudaBuffer {
            bytes: slice,
            len: n,
            device: self.clone(),
            _type: PhantomData,
        })
    }

    /// A device copy of `host`.
    pub fn upload<T: Scalar>(self: &Arc<Self>, host: &[T]) -> Result<CudaBuffer<T>> {
        self.upload_with_slack(host, 0)
    }

    /// A device copy of `host` followed by `slack` zero bytes outside the buffer's length: room
    /// for kernels that read the array in aligned vectors, the last of which may pass its end.
    pub fn upload_with_slack<T: Scalar>(
        self: &Arc<Self>,
        host: &[T],
        slack: usize,
    ) -> Result<CudaBuffer<T>> {
        let mut buf = self.zeros_with_slack::<T>(host.len(), slack)?;
        if !host.is_empty() {
            self.stream
                .memcpy_htod(as_bytes(host), &mut buf.bytes)
                .map_err(|e| driver_error("copying to the device", e))?;
        }
        Ok(buf)
    }

    fn alloc_error(&self, bytes: usize, e: DriverError) -> Error {
        match driver_error("", e) {
            Error::OutOfMemory { .. } => Error::OutOfMemory {
                device: self.location(),
                bytes,
            },
            other => other,
        }
    }

    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| driver_error("synchronizing", e))
    }

    /// A plan's workspace `buffer`, grown to at least `len` zeroed elements when it holds fewer
    /// (`what` names the allocation in an error); returns the bytes it grew by, for the plan's
    /// accounting.
    pub(crate) fn grow_zeroed<E: DeviceRepr + ValidAsZeroBits>(
        &self,
        buffer: &mut Option<CudaSlice<E>>,
        len: usize,
        what: &'static str,
    ) -> Result<usize> {
        let held = buffer.as_ref().map_or(0, |b| b.len());
        if held >= len {
            return Ok(0);
        }
        let grown = self
            .stream
            .alloc_zeros::<E>(len)
            .map_err(|e| driver_error(what, e))?;
        *buffer = Some(grown);
        Ok((len - held) * size_of::<E>())
    }
}

/// Scalars as bytes: every [`Scalar`] is plain old data (the trait is sealed to such types).
pub fn as_bytes<T: Scalar>(values: &[T]) -> &[u8] {
    // SAFETY: T is plain old data without padding, so its memory is initialised bytes.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

fn as_bytes_mut<T: Scalar>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and every bit pattern is a valid T, so any bytes written are valid.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

/// Device memory holding `len` values of `T` (stored untyped, since kernels take raw pointers).
pub struct CudaBuffer<T> {
    pub bytes: CudaSlice<u8>,
    len: usize,
    device: Arc<Device>,
    _type: PhantomData<T>,
}

impl<T: Scalar> CudaBuffer<T> {
    /// A host copy of the elements.
    pub fn to_host(&self) -> Result<Vec<T>> {
        let mut host = vec![T::default(); self.len];
        if self.len > 0 {
            let src = self.bytes.slice(..self.len * size_of::<T>());
            self.device
                .stream
                .memcpy_dtoh(&src, as_bytes_mut(&mut host))
                .map_err(|e| driver_error("copying from the device", e))?;
            self.device.synchronize()?;
        }
        Ok(host)
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

impl<T: Scalar> DeviceMemory<T> for CudaBuffer<T> {
    fn location(&self) -> String {
        self.device.location()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
