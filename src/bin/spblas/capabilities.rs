//! `spblas capabilities`: the table of what each backend runs, one line per (operation,
//! format, precision), from the backends' own tables. Works without a GPU: the GPU backends'
//! tables hold for any device they accept.

use std::io::{ErrorKind, Write};

use sparse_blas::{
    Backend, BackendKind, BackendRequest, Error, Executor, Format, Offer, OpKind, Precision, Result,
};

const KINDS: [BackendKind; 3] = [BackendKind::Cpu, BackendKind::Cuda, BackendKind::Cusparse];

/// A backend's table, from the backend itself or, without its device, from its kind.
type Table = Box<dyn Fn(OpKind, Format, Precision) -> Vec<Offer>>;

/// Prints the table of `backend` (every backend when `None`) for `op` (every operation when
/// `None`). A reader that stops early (`| head`) ends the output, not the program.
pub fn run(backend: Option<BackendKind>, op: Option<OpKind>) -> Result<()> {
    let ops: Vec<OpKind> = OpKind::ALL
        .iter()
        .copied()
        .filter(|o| op.is_none_or(|op| op == *o))
        .collect();
    let sections: Vec<String> = KINDS
        .into_iter()
        .filter(|k| backend.is_none_or(|b| b == *k))
        .map(|kind| section(kind, &ops))
        .collect();
    match std::io::stdout()
        .lock()
        .write_all(sections.join("\n").as_bytes())
    {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(Error::io(None, e)),
        _ => Ok(()),
    }
}

/// One backend's lines: what it is here, then its table.
fn section(kind: BackendKind, ops: &[OpKind]) -> String {
    let (heading, table): (String, Table) = match Backend::new(BackendRequest::Kind(kind)) {
        Ok(backend) => (
            format!("{}: what it runs", backend.description()),
            Box::new(move |o, f, p| backend.algorithms(o, f, p)),
        ),
        Err(e) => (
            format!("{kind}: not usable here ({e}); what it runs on sm_80 and newer"),
            Box::new(move |o, f, p| Backend::table(kind, o, f, p)),
        ),
    };
    let mut out = format!(
        "{heading}\n{:<10}{:<11}{:<9}{:<11}{:<10}algorithms (* not bit-reproducible)\n",
        "backend", "op", "format", "precision", "support"
    );
    for &op in ops {
        for &format in Format::ALL {
            for precision in Precision::ALL {
                let offers = table(op, format, precision);
                if offers.is_empty() {
                    continue;
                }
                out.push_str(&format!(
                    "{:<10}{:<11}{:<9}{:<11}{:<10}{}\n",
                    kind.name(),
                    op.name(),
                    format.name(),
                    precision.name(),
                    sparse_blas::support_of(&offers).name(),
                    names(&offers)
                ));
            }
        }
    }
    out
}

/// `auto` and the algorithms, each not bit-reproducible one starred.
fn names(offers: &[Offer]) -> String {
    let mut names = vec!["auto".to_string()];
    names.extend(offers.iter().map(|o| {
        let star = if o.deterministic { "" } else { "*" };
        format!("{}{star}", o.algorithm)
    }));
    names.join(" ")
}
