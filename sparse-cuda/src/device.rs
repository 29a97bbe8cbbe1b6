//! One GPU: its context and stream, the kernels loaded into it, device memory, and uploads
//! through pinned staging buffers.

use std::any::Any;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    result, CudaContext, CudaEvent, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    DriverError, PinnedHostSlice, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;
use sparse_core::{BackendKind, DeviceMemory, Error, Result, Scalar};

use crate::compile::{compile_all, Compiled, Target};
use crate::kernel::{Entry, Kernel, KernelParams, KernelSpec};
use crate::probe::{probe, DeviceInfo};

/// Bytes of each of the two pinned staging buffers: large enough that a copy's fixed cost is
/// small beside its transfer, small enough to keep in every process that uses the device.
const STAGING_BYTES: usize = 16 << 20;
/// Bytes of a staging chunk below which one thread packs it alone.
const PARALLEL_PACK_BYTES: usize = 1 << 20;
/// Threads that pack one staging chunk at most.
const PACK_THREADS: usize = 4;

/// Two pinned buffers that alternate: one is packed on the host while the other's copy runs;
/// `copied[i]` marks the end of buffer i's last copy on the stream.
struct Staging {
    buffers: [PinnedHostSlice<u8>; 2],
    copied: [CudaEvent; 2],
}

/// A loaded module and the symbol of its kernel.
struct Loaded {
    module: Arc<CudaModule>,
    symbol: String,
}

/// A context with one stream, where every operation of a backend runs in order.
pub struct Device {
    pub info: DeviceInfo,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    target: Target,
    modules: Mutex<HashMap<KernelSpec, Loaded>>,
    staging: Mutex<Option<Staging>>,
}

impl Device {
    pub fn new(ordinal: usize) -> Result<Arc<Self>> {
        let info = probe(ordinal)?;
        let unavailable = |what: &str, e: DriverError| Error::DeviceUnavailable {
            backend: BackendKind::Cuda,
            reason: format!("{what}: {e}"),
        };
        let ctx = CudaContext::new(ordinal).map_err(|e| unavailable("creating the context", e))?;
        // Everything runs on one stream, so cudarc's per-buffer events would only add latency.
        // SAFETY: called before any allocation or launch on this context.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| unavailable("creating a stream", e))?;
        Ok(Arc::new(Device {
            target: Target::for_device(info.compute_capability)?,
            info,
            ctx,
            stream,
            modules: Mutex::new(HashMap::new()),
            staging: Mutex::new(None),
        }))
    }

    pub fn location(&self) -> String {
        format!("cuda:{}", self.info.ordinal)
    }

    /// What the kernels are compiled for on this device.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Bytes of device memory free now, if the driver says.
    pub fn free_memory(&self) -> Option<usize> {
        self.ctx.mem_get_info().ok().map(|(free, _)| free)
    }

    /// A failed driver call as the typed error: out of memory with the free bytes, else the
    /// driver's error as the source.
    pub fn error(&self, context: &str, e: DriverError) -> Error {
        if e.0 == cudarc::driver::sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
            return Error::OutOfMemory {
                device: self.location(),
                requested: None,
                free: self.free_memory(),
            };
        }
        driver_error(context, e)
    }

    /// A failed allocation of `bytes`.
    pub fn alloc_error(&self, context: &str, bytes: usize, e: DriverError) -> Error {
        match self.error(context, e) {
            Error::OutOfMemory { device, free, .. } => Error::OutOfMemory {
                device,
                requested: Some(bytes),
                free,
            },
            other => other,
        }
    }

    /// Compiles (or reads from the disk cache) and loads every spec not loaded yet, in
    /// parallel.
    pub fn prepare(&self, specs: &[&KernelSpec]) -> Result<()> {
        let mut missing: Vec<&KernelSpec> = {
            let modules = self.modules();
            specs
                .iter()
                .copied()
                .filter(|s| !modules.contains_key(*s))
                .collect()
        };
        missing.dedup();
        if missing.is_empty() {
            return Ok(());
        }
        let compiled = compile_all(&missing, self.target)?;
        let mut modules = self.modules();
        for (spec, Compiled { image, symbol }) in missing.into_iter().zip(compiled) {
            let image = match self.target {
                Target::Cubin(_) => Ptx::from_binary(image),
                Target::Ptx(_) => Ptx::from_src(String::from_utf8_lossy(&image).into_owned()),
            };
            let module = self
                .ctx
                .load_module(image)
                .map_err(|e| self.error(&format!("loading {}", spec.expression), e))?;
            modules.insert(spec.clone(), Loaded { module, symbol });
        }
        Ok(())
    }

    /// The kernel of `entry`, compiled and loaded on first use.
    pub fn kernel<P: KernelParams>(self: &Arc<Self>, entry: &Entry<P>) -> Result<Kernel<P>> {
        let spec = entry.spec();
        self.prepare(&[spec])?;
        let modules = self.modules();
        let loaded = modules
            .get(spec)
            .ok_or_else(|| Error::internal(format!("{} was not loaded", spec.expression)))?;
        let function = loaded
            .module
            .load_function(&loaded.symbol)
            .map_err(|e| self.error(&format!("finding {}", spec.expression), e))?;
        Ok(Kernel::new(
            function,
            self.clone(),
            spec.expression.as_str().into(),
        ))
    }

    /// Modules loaded so far.
    pub fn loaded_kernels(&self) -> usize {
        self.modules().len()
    }

    fn modules(&self) -> std::sync::MutexGuard<'_, HashMap<KernelSpec, Loaded>> {
        self.modules
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `n` zeroed elements of `T`.
    pub fn zeros<T: Scalar>(self: &Arc<Self>, n: usize) -> Result<CudaBuffer<T>> {
        self.zeros_with_slack(n, 0)
    }

    /// `n` zeroed elements of `T` followed by `slack` zero bytes outside the buffer's length.
    pub fn zeros_with_slack<T: Scalar>(
        self: &Arc<Self>,
        n: usize,
        slack: usize,
    ) -> Result<CudaBuffer<T>> {
        let bytes = n
            .checked_mul(size_of::<T>())
            .and_then(|b| b.checked_add(slack))
            .ok_or_else(|| Error::invalid(format!("{n} elements overflow usize bytes")))?;
        Ok(CudaBuffer {
            bytes: self.alloc_zeros::<u8>(bytes.max(1), "allocating a buffer")?,
            len: n,
            device: self.clone(),
            _type: PhantomData,
        })
    }

    /// `len` zeroed elements (at least one, so that the address stays valid).
    pub fn alloc_zeros<E: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
        context: &str,
    ) -> Result<CudaSlice<E>> {
        self.stream
            .alloc_zeros::<E>(len.max(1))
            .map_err(|e| self.alloc_error(context, len.max(1) * size_of::<E>(), e))
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
        let buf = self.zeros_with_slack::<T>(host.len(), slack)?;
        self.stage(buf.address(), host.len(), |start, out: &mut [T]| {
            out.copy_from_slice(&host[start..start + out.len()]);
        })?;
        Ok(buf)
    }

    /// A device copy of `host`, elements converted by `convert` on the way, followed by `slack`
    /// zeroed elements.
    pub fn upload_converted<S: Sync, E: DeviceRepr + ValidAsZeroBits + Copy + Send>(
        &self,
        host: &[S],
        slack: usize,
        convert: impl Fn(&S) -> E + Sync,
    ) -> Result<CudaSlice<E>> {
        let slice = self.alloc_zeros::<E>(host.len() + slack, "allocating a device array")?;
        self.stage(
            slice.device_ptr(&self.stream).0,
            host.len(),
            |start, out: &mut [E]| {
                for (o, s) in out.iter_mut().zip(&host[start..]) {
                    *o = convert(s);
                }
            },
        )?;
        Ok(slice)
    }

    /// Writes `len` elements to device address `dst` through the pinned staging buffers:
    /// `pack(start, out)` fills `out` with elements `start..start + out.len()`, on several
    /// threads for large chunks, while the previous chunk crosses the bus. Returns once the
    /// last copy is enqueued; the stream orders later work after it.
    pub fn stage<E: Copy + Send>(
        &self,
        dst: u64,
        len: usize,
        pack: impl Fn(usize, &mut [E]) + Sync,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let mut guard = self
            .staging
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if guard.is_none() {
            *guard = Some(self.new_staging()?);
        }
        let staging = guard.as_mut().expect("made above");
        let per_chunk = STAGING_BYTES / size_of::<E>();
        for (chunk, start) in (0..len).step_by(per_chunk).enumerate() {
            let count = per_chunk.min(len - start);
            let which = chunk % 2;
            staging.copied[which]
                .synchronize()
                .map_err(|e| self.error("waiting for a staging copy", e))?;
            let bytes = staging.buffers[which]
                .as_mut_slice()
                .map_err(|e| self.error("reading a staging buffer", e))?;
            // SAFETY: the pinned buffer is page-aligned and holds STAGING_BYTES, at least
            // `count` elements of E, which is plain data (a Scalar or an index); its last copy
            // finished (synchronized above), so nothing reads it while it is written.
            let out =
                unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<E>(), count) };
            pack_parallel(start, out, &pack);
            let address = dst + (start * size_of::<E>()) as u64;
            // SAFETY: `dst` addresses at least `len` elements of E on this device (the caller's
            // allocation); the source is pinned, so the copy is asynchronous, and the buffer is
            // not written again before `copied[which]`, recorded after the copy, completes.
            unsafe {
                result::memcpy_htod_async(
                    address,
                    &bytes[..count * size_of::<E>()],
                    self.stream.cu_stream(),
                )
            }
            .map_err(|e| self.error("copying to the device", e))?;
            staging.copied[which]
                .record(&self.stream)
                .map_err(|e| self.error("recording a staging copy", e))?;
        }
        Ok(())
    }

    fn new_staging(&self) -> Result<Staging> {
        // SAFETY: the buffers are written before every read (`stage` packs what it copies).
        let buffer = || unsafe {
            self.ctx
                .alloc_pinned::<u8>(STAGING_BYTES)
                .map_err(|e| self.alloc_error("allocating pinned staging", STAGING_BYTES, e))
        };
        let event = || {
            self.ctx
                .new_event(None)
                .map_err(|e| self.error("creating a staging event", e))
        };
        Ok(Staging {
            buffers: [buffer()?, buffer()?],
            copied: [event()?, event()?],
        })
    }

    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| self.error("synchronizing", e))
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
        // The new buffer before the old one goes: a failed allocation leaves the plan as it was.
        *buffer = Some(self.alloc_zeros::<E>(len, what)?);
        Ok((len - held) * size_of::<E>())
    }
}

/// Fills `out` (elements `start..`) by `pack`, split over a few threads when it is large.
fn pack_parallel<E: Send>(start: usize, out: &mut [E], pack: &(impl Fn(usize, &mut [E]) + Sync)) {
    let threads = (std::mem::size_of_val(out) / PARALLEL_PACK_BYTES)
        .clamp(1, PACK_THREADS)
        .min(std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads == 1 {
        pack(start, out);
        return;
    }
    let part = out.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (i, piece) in out.chunks_mut(part).enumerate() {
            scope.spawn(move || pack(start + i * part, piece));
        }
    });
}

/// A driver error as the typed error, keeping the driver's code as the source.
pub fn driver_error(context: &str, e: DriverError) -> Error {
    Error::Device {
        backend: BackendKind::Cuda,
        context: context.to_string(),
        source: Box::new(e),
    }
}

/// Scalars as bytes: every [`Scalar`] is plain old data (the trait is sealed to such types).
fn as_bytes_mut<T: Scalar>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: T is plain old data without padding and every bit pattern is a valid T, so its
    // memory is initialised bytes and any bytes written are valid.
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
                .map_err(|e| self.device.error("copying from the device", e))?;
            self.device.synchronize()?;
        }
        Ok(host)
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The device address of the first element.
    pub fn address(&self) -> u64 {
        self.bytes.device_ptr(&self.device.stream).0
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
