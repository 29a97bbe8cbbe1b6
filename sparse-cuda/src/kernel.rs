//! The typed boundary between Rust and the kernels.
//!
//! - **Parameters.** A kernel takes one struct by value, declared once by [`kernel_params!`]:
//!   the macro writes the `#[repr(C)]` Rust struct and its C declaration, which is compiled in
//!   front of the kernel's source, so the two cannot drift apart. Field kinds: `u32`, `f32`, `f64`,
//!   `acc` (the accumulation type of the storage type `T`), `ptr(E)` (`const E*`) and `out(E)`
//!   (`E*`) for `E` one of `u8 u32 f32 T acc Out` (`Out`: the type results of `T` are stored
//!   in, `T` itself but for i8 and i16, whose results are i32), and `sub(S)` and `plain(S)`: a parameter struct
//!   inside this one, `S<T>` or the non-generic `S`.
//! - **Entries.** A kernel is a `__global__` template of a `.cu` file. An [`Entry`] names one
//!   instantiation, its template arguments written from Rust values, and its parameter type;
//!   the compiled unit asserts that the template takes exactly that type, of exactly the size
//!   Rust gives it ([`KernelSpec::checks`]).
//! - **Shared constants.** Numbers both sides need (block sizes, tile lengths) are Rust
//!   constants handed to the compiler as `-D` options ([`KernelSource::defines`]).

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use sparse_core::{DType, Error, Result, Scalar};

use crate::device::{CudaBuffer, Device};

/// A kernel source file and what its kernels need compiled in front of them.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    /// The file's stem, e.g. `spmv` for `kernels/spmv.cu`.
    pub name: &'static str,
    pub code: &'static str,
    /// C declarations of the parameter structs its kernels take ([`KernelParams::C_DECL`]).
    pub params: &'static [&'static str],
    /// `-D NAME=VALUE` options: the constants Rust and the file share.
    pub defines: &'static [(&'static str, u32)],
}

/// A parameter struct of a kernel family (made by [`kernel_params!`]).
pub trait KernelParams: DeviceRepr + Copy {
    /// The C declaration of the struct (a template over `T` when the struct is generic).
    const C_DECL: &'static str;
    /// The C type of this instantiation, e.g. `SpmvCsr<float>`.
    fn c_type() -> Result<String>;
}

/// The C name of a storage type, as the prelude spells it.
pub fn c_type(dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::F64 => Ok("double"),
        DType::F32 => Ok("float"),
        DType::F16 => Ok("half_t"),
        DType::BF16 => Ok("bf16_t"),
        DType::I8 => Ok("signed char"),
        DType::I16 => Ok("short"),
        other => Err(Error::internal(format!("no kernel takes {other} storage"))),
    }
}

/// A device address of elements `E`, passed as `const E*`.
#[repr(transparent)]
pub struct Ptr<E> {
    address: u64,
    _element: PhantomData<fn() -> E>,
}

/// A device address of elements `E`, passed as `E*`.
#[repr(transparent)]
pub struct MutPtr<E> {
    address: u64,
    _element: PhantomData<fn() -> E>,
}

macro_rules! pointer {
    ($ptr:ident) => {
        impl<E> Clone for $ptr<E> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<E> Copy for $ptr<E> {}
        impl<E> std::fmt::Debug for $ptr<E> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{:#x}", self.address)
            }
        }
        impl<E> $ptr<E> {
            /// The null pointer, for an argument a launch never dereferences.
            pub const NULL: Self = $ptr {
                address: 0,
                _element: PhantomData,
            };

            /// The address of `slice` (whose element type must be what `E` stands for in C).
            pub fn of(slice: &CudaSlice<E>, device: &Device) -> Self {
                Self::at(slice.device_ptr(&device.stream).0)
            }

            /// The address of an untyped allocation that holds elements `E` (sized and aligned
            /// for them by whoever allocated it).
            pub fn of_bytes(slice: &CudaSlice<u8>, device: &Device) -> Self {
                Self::at(slice.device_ptr(&device.stream).0)
            }

            /// A raw device address.
            pub(crate) fn at(address: u64) -> Self {
                $ptr {
                    address,
                    _element: PhantomData,
                }
            }

            /// This pointer moved `elements` elements on.
            pub fn offset(self, elements: usize) -> Self {
                Self::at(self.address + (elements * size_of::<E>()) as u64)
            }
        }
        impl<T: Scalar> $ptr<T> {
            /// The address of a buffer of `T`.
            pub fn of_buffer(buffer: &CudaBuffer<T>) -> Self {
                Self::at(buffer.address())
            }
        }
    };
}
pointer!(Ptr);
pointer!(MutPtr);

impl<E> MutPtr<E> {
    /// The same address, for a later kernel that only reads it.
    pub fn read_only(self) -> Ptr<E> {
        Ptr::at(self.address)
    }
}

/// Declares a kernel parameter struct: the `#[repr(C)]` Rust struct, generic over the storage
/// type `T` or not, and its C declaration ([`KernelParams`]).
macro_rules! kernel_params {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident<T> { $($(#[$fmeta:meta])* $field:ident: $kind:ident $(($elem:ident))?),* $(,)? }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        $vis struct $name<T: sparse_core::Scalar> {
            $($(#[$fmeta])* pub $field: $crate::kernel::kernel_params!(@rust T $kind $($elem)?),)*
        }
        impl<T: sparse_core::Scalar> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T: sparse_core::Scalar> Copy for $name<T> {}
        // SAFETY: a repr(C) struct of integers, floats and device addresses, laid out as the C
        // declaration below (the compiled kernel asserts its size).
        unsafe impl<T: sparse_core::Scalar> cudarc::driver::DeviceRepr for $name<T> {}
        impl<T: sparse_core::Scalar> $crate::kernel::KernelParams for $name<T> {
            const C_DECL: &'static str = concat!(
                "template <typename T> struct ", stringify!($name), " {",
                $(" ", $crate::kernel::kernel_params!(@c $kind $($elem)?), " ", stringify!($field), ";",)*
                " };\n"
            );
            fn c_type() -> sparse_core::Result<String> {
                Ok(format!("{}<{}>", stringify!($name), $crate::kernel::c_type(T::DTYPE)?))
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($(#[$fmeta:meta])* $field:ident: $kind:ident $(($elem:ident))?),* $(,)? }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        $vis struct $name {
            $($(#[$fmeta])* pub $field: $crate::kernel::kernel_params!(@rust () $kind $($elem)?),)*
        }
        // SAFETY: as above.
        unsafe impl cudarc::driver::DeviceRepr for $name {}
        impl $crate::kernel::KernelParams for $name {
            const C_DECL: &'static str = concat!(
                "struct ", stringify!($name), " {",
                $(" ", $crate::kernel::kernel_params!(@c $kind $($elem)?), " ", stringify!($field), ";",)*
                " };\n"
            );
            fn c_type() -> sparse_core::Result<String> {
                Ok(stringify!($name).to_string())
            }
        }
    };
    (@rust $t:tt u32) => { u32 };
    (@rust $t:tt f32) => { f32 };
    (@rust $t:tt f64) => { f64 };
    (@rust $t:tt acc) => { <$t as sparse_core::Scalar>::Acc };
    (@rust $t:tt ptr $elem:ident) => { $crate::kernel::Ptr<$crate::kernel::kernel_params!(@elem $t $elem)> };
    (@rust $t:tt out $elem:ident) => { $crate::kernel::MutPtr<$crate::kernel::kernel_params!(@elem $t $elem)> };
    (@rust $t:tt sub $params:ident) => { $params<$t> };
    (@rust $t:tt plain $params:ident) => { $params };
    (@elem $t:tt u8) => { u8 };
    (@elem $t:tt u16) => { u16 };
    (@elem $t:tt u32) => { u32 };
    (@elem $t:tt f32) => { f32 };
    (@elem $t:tt f64) => { f64 };
    (@elem $t:tt T) => { $t };
    (@elem $t:tt acc) => { <$t as sparse_core::Scalar>::Acc };
    (@elem $t:tt Out) => { <$t as sparse_core::Scalar>::Out };
    (@c u32) => { "u32" };
    (@c f32) => { "float" };
    (@c f64) => { "double" };
    (@c acc) => { "typename acc_of<T>::type" };
    (@c ptr $elem:ident) => { concat!("const ", $crate::kernel::kernel_params!(@celem $elem), "*") };
    (@c out $elem:ident) => { concat!($crate::kernel::kernel_params!(@celem $elem), "*") };
    (@c sub $params:ident) => { concat!(stringify!($params), "<T>") };
    (@c plain $params:ident) => { stringify!($params) };
    (@celem u8) => { "unsigned char" };
    (@celem u16) => { "unsigned short" };
    (@celem u32) => { "u32" };
    (@celem f32) => { "float" };
    (@celem f64) => { "double" };
    (@celem T) => { "T" };
    (@celem acc) => { "typename acc_of<T>::type" };
    (@celem Out) => { "typename out_of<T>::type" };
}
pub(crate) use kernel_params;

/// One instantiation of a kernel template: what NVRTC compiles into one module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    pub source: &'static str,
    /// The name expression, e.g. `spmv_csr_vector<float, 8, 4>`.
    pub expression: String,
    /// The C type of its one parameter, e.g. `SpmvCsr<float>`.
    pub params: String,
    /// `size_of` that parameter in Rust.
    pub params_bytes: usize,
    code: &'static str,
    decls: &'static [&'static str],
    defines: &'static [(&'static str, u32)],
}

impl KernelSpec {
    /// The C declarations compiled in front of the source.
    pub fn header(&self) -> String {
        self.decls.concat()
    }

    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn defines(&self) -> &'static [(&'static str, u32)] {
        self.defines
    }

    /// Compiled after the source: the entry takes exactly the parameter type, of the Rust size.
    pub fn checks(&self) -> String {
        let (e, p, bytes) = (&self.expression, &self.params, self.params_bytes);
        format!(
            "static_assert(sparse_same<decltype(&{e}), void (*)({p})>::value, \"{e} takes {p}\");\n\
             static_assert(sizeof({p}) == {bytes}, \"{p} is {bytes} bytes in Rust\");\n"
        )
    }
}

/// A kernel entry with its parameter type: what a plan asks the device for.
pub struct Entry<P> {
    spec: KernelSpec,
    _params: PhantomData<fn(P)>,
}

impl<P> Clone for Entry<P> {
    fn clone(&self) -> Self {
        Entry {
            spec: self.spec.clone(),
            _params: PhantomData,
        }
    }
}

impl<P: KernelParams> Entry<P> {
    /// `template<args...>` of `source`, taking `P`.
    pub fn new(
        source: &KernelSource,
        template: &str,
        args: &[&dyn std::fmt::Display],
    ) -> Result<Self> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let expression = if args.is_empty() {
            template.to_string()
        } else {
            format!("{template}<{}>", args.join(", "))
        };
        Ok(Entry {
            spec: KernelSpec {
                source: source.name,
                expression,
                params: P::c_type()?,
                params_bytes: size_of::<P>(),
                code: source.code,
                decls: source.params,
                defines: source.defines,
            },
            _params: PhantomData,
        })
    }

    /// `template<P>` of `source`: a kernel templated over its parameter struct alone, so that
    /// the module compiled for it holds no other kernel.
    pub fn over_params(source: &KernelSource, template: &str) -> Result<Self> {
        Self::new(source, template, &[&P::c_type()?])
    }

    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }
}

/// A loaded kernel that takes `P`.
pub struct Kernel<P> {
    function: CudaFunction,
    device: Arc<Device>,
    name: Arc<str>,
    _params: PhantomData<fn(P)>,
}

impl<P> Clone for Kernel<P> {
    fn clone(&self) -> Self {
        Kernel {
            function: self.function.clone(),
            device: self.device.clone(),
            name: self.name.clone(),
            _params: PhantomData,
        }
    }
}

impl<P: KernelParams> Kernel<P> {
    pub(crate) fn new(function: CudaFunction, device: Arc<Device>, name: Arc<str>) -> Self {
        Kernel {
            function,
            device,
            name,
            _params: PhantomData,
        }
    }

    /// How many blocks of `block` threads (no dynamic shared memory) one multiprocessor holds at
    /// once, as the kernel's registers and shared memory allow.
    pub(crate) fn resident_blocks(&self, block: u32) -> Result<u32> {
        self.function
            .occupancy_max_active_blocks_per_multiprocessor(block, 0, None)
            .map_err(|e| {
                self.device
                    .error(&format!("querying the occupancy of {}", self.name), e)
            })
    }

    /// Enqueues the kernel on the device's stream.
    ///
    /// # Safety
    /// `params` must satisfy the kernel's contract: every pointer addresses live memory of the
    /// device with as many elements as the kernel reads or writes through it under `config`
    /// (each launch site states why).
    pub unsafe fn launch(&self, config: LaunchConfig, params: &P) -> Result<()> {
        let mut args = self.device.stream.launch_builder(&self.function);
        args.arg(params);
        args.launch(config)
            .map(drop)
            .map_err(|e| self.device.error(&format!("launching {}", self.name), e))
    }
}
