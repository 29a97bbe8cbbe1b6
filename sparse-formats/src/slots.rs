//! Stored slots against CSR entries: how each format's value order is built, and how new values
//! in CSR entry order reach the slots through it. A plan computes the order once; writing new
//! values is then a gather, with no re-analysis and no re-conversion.

use rayon::prelude::*;
use sparse_core::{Error, Format, Result, Scalar, ValueOrder};

/// The value order of a format in which `row_slots(i)` yields the slots of row `i`'s entries in
/// increasing column order (so in CSR entry order), built in parallel over rows. Different
/// entries must have different slots, all below `slots`.
pub(crate) fn order_from_rows<R>(
    rows: usize,
    slots: usize,
    row_slots: impl Fn(usize) -> R + Sync + Send,
) -> ValueOrder
where
    R: Iterator<Item = usize>,
{
    let entry_slots: Vec<usize> = (0..rows).into_par_iter().flat_map_iter(row_slots).collect();
    order_from_entry_slots(&entry_slots, slots)
}

/// The value order from the slot of every CSR entry, in entry order.
pub(crate) fn order_from_entry_slots(entry_slots: &[usize], slots: usize) -> ValueOrder {
    let mut order = vec![ValueOrder::PADDING; slots];
    for (entry, &slot) in entry_slots.iter().enumerate() {
        order[slot] = entry;
    }
    ValueOrder::new(order, entry_slots.len())
        .expect("a validated structure holds each entry in exactly one slot")
}

/// The checks every `set_values` starts with: `order` is one of a `format` matrix with `slots`
/// stored slots and `nnz` entries, and `csr_values` holds one value per entry.
pub(crate) fn check_new_values<T>(
    format: Format,
    (slots, nnz): (usize, usize),
    order: &ValueOrder,
    csr_values: &[T],
) -> Result<()> {
    if (order.len(), order.nnz()) != (slots, nnz) {
        return Err(Error::invalid(format!(
            "a value order of {} slots for {} entries does not belong to this {format} of {slots} \
             slots for {nnz} entries",
            order.len(),
            order.nnz()
        )));
    }
    if csr_values.len() != nnz {
        return Err(Error::shape(
            format!("new {format} values"),
            (nnz, 1),
            (csr_values.len(), 1),
        ));
    }
    Ok(())
}

/// Slot `first + k` of `order` into `out[k]`: its entry's value from `csr_values`, or zero for
/// padding (which kernels may multiply, so it stays zero).
pub(crate) fn gather<T: Scalar>(order: &ValueOrder, first: usize, csr_values: &[T], out: &mut [T]) {
    out.par_iter_mut().enumerate().for_each(|(k, v)| {
        *v = order
            .entry(first + k)
            .map_or(T::default(), |e| csr_values[e]);
    });
}
