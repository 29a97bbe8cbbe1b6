//! The order a blocked format stores values in, against the CSR entry order.

use crate::error::{Error, Result};

/// Where each stored value of a format sits in the CSR entry order: SDDMM in a blocked format
/// writes its output in the format's value order, and this maps it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueOrder {
    /// For each stored slot, the CSR entry it holds, or [`ValueOrder::PADDING`].
    slots: Vec<usize>,
    nnz: usize,
}

impl ValueOrder {
    pub const PADDING: usize = usize::MAX;

    /// `slots[s]` is the CSR entry of slot `s` or `PADDING`; every entry `0..nnz` appears once.
    pub fn new(slots: Vec<usize>, nnz: usize) -> Result<Self> {
        let mut seen = vec![false; nnz];
        for (s, &e) in slots.iter().enumerate() {
            if e == Self::PADDING {
                continue;
            }
            if e >= nnz || std::mem::replace(&mut seen[e], true) {
                return Err(Error::invalid(format!(
                    "value order: slot {s} names entry {e}, which is out of 0..{nnz} or named twice"
                )));
            }
        }
        if let Some(missing) = seen.iter().position(|&s| !s) {
            return Err(Error::invalid(format!(
                "value order: entry {missing} has no slot"
            )));
        }
        Ok(ValueOrder { slots, nnz })
    }

    /// [`ValueOrder::new`] without its check, for builders that place each entry themselves.
    ///
    /// # Safety
    /// Every entry `0..nnz` appears in exactly one slot of `slots`, and no other value than
    /// [`ValueOrder::PADDING`] does: device kernels scatter through the order without bounds
    /// checks.
    pub unsafe fn new_unchecked(slots: Vec<usize>, nnz: usize) -> Self {
        ValueOrder { slots, nnz }
    }

    /// Stored slots, padding included.
    pub fn len(&self) -> usize {
        self.slots.len()
    }
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// The CSR entry slot `s` holds, `None` for padding.
    pub fn entry(&self, s: usize) -> Option<usize> {
        let e = self.slots[s];
        (e != Self::PADDING).then_some(e)
    }
    /// Values in CSR entry order laid out in slot order, `T::default()` in the padding. The
    /// caller passes one value per entry (`nnz` of them).
    pub fn to_slot_order<T: Copy + Default>(&self, csr_values: &[T]) -> Vec<T> {
        (0..self.slots.len())
            .map(|s| self.entry(s).map_or(T::default(), |e| csr_values[e]))
            .collect()
    }
    /// Values in slot order rearranged into CSR entry order (padding dropped).
    pub fn to_csr_order<T: Copy + Default>(&self, slot_values: &[T]) -> Result<Vec<T>> {
        if slot_values.len() != self.slots.len() {
            return Err(Error::shape(
                "value order",
                (self.slots.len(), 1),
                (slot_values.len(), 1),
            ));
        }
        let mut out = vec![T::default(); self.nnz];
        for (&e, &v) in self.slots.iter().zip(slot_values) {
            if e != Self::PADDING {
                out[e] = v;
            }
        }
        Ok(out)
    }
}
