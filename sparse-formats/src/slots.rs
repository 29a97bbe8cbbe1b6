//! Stored slots against CSR entries: how each format's value order is built, and how new values
//! in CSR entry order reach the slots through it. A plan computes the order once; writing new
//! values is then a gather, with no re-analysis and no re-conversion.

use std::sync::atomic::{AtomicUsize, Ordering};

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
    let counts: Vec<usize> = (0..rows)
        .into_par_iter()
        .map(|i| row_slots(i).count())
        .collect();
    let mut first_entry = Vec::with_capacity(rows);
    let mut nnz = 0;
    for count in counts {
        first_entry.push(nnz);
        nnz += count;
    }
    let order = padding(slots);
    (0..rows).into_par_iter().for_each(|i| {
        for (k, slot) in row_slots(i).enumerate() {
            place(&order, slot, first_entry[i] + k);
        }
    });
    // SAFETY: the entries 0..nnz, numbered row after row, each went to one slot, no slot took
    // two (`place`), and every other slot holds PADDING.
    unsafe { finish(order, nnz) }
}

/// The value order from the slot of every CSR entry, in entry order. Different entries must
/// have different slots, all below `slots`.
pub(crate) fn order_from_entry_slots(entry_slots: &[usize], slots: usize) -> ValueOrder {
    let order = padding(slots);
    entry_slots
        .par_iter()
        .enumerate()
        .for_each(|(entry, &slot)| place(&order, slot, entry));
    // SAFETY: each entry 0..entry_slots.len() went to one slot, no slot took two (`place`), and
    // every other slot holds PADDING.
    unsafe { finish(order, entry_slots.len()) }
}

// The orders are built in parallel, slot by slot through atomics: a plan of a matrix of tens
// of millions of entries would otherwise wait a second or more on a serial scatter and check.

/// `slots` slots of padding.
fn padding(slots: usize) -> Vec<AtomicUsize> {
    (0..slots)
        .into_par_iter()
        .map(|_| AtomicUsize::new(ValueOrder::PADDING))
        .collect()
}

/// `entry` into `slot`, which must not hold one yet.
fn place(order: &[AtomicUsize], slot: usize, entry: usize) {
    let before = order[slot].swap(entry, Ordering::Relaxed);
    assert_eq!(
        before,
        ValueOrder::PADDING,
        "a validated structure holds each entry in exactly one slot"
    );
}

/// # Safety
/// `order` holds each entry `0..nnz` in exactly one slot and PADDING in the others.
unsafe fn finish(order: Vec<AtomicUsize>, nnz: usize) -> ValueOrder {
    let order = order.into_par_iter().map(AtomicUsize::into_inner).collect();
    // SAFETY: the caller's.
    unsafe { ValueOrder::new_unchecked(order, nnz) }
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
