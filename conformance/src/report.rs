//! The results of a suite run, as text or markdown tables.

use std::fmt;

use sparse_blas::{Algorithm, BackendKind, Format, OpKind, Precision};

/// One check: a case run by one (format, precision, algorithm) of a backend and compared with
/// the oracle.
#[derive(Clone, Debug)]
pub struct Row {
    pub backend: BackendKind,
    pub op: OpKind,
    pub format: Format,
    pub precision: Precision,
    /// The algorithm asked for.
    pub algorithm: Algorithm,
    /// The algorithm the plan reports it ran (`None` when planning failed).
    pub chosen: Option<Algorithm>,
    pub matrix: String,
    pub case: String,
    /// Shape, stored entries and dense width.
    pub shape: String,
    /// Output entries compared.
    pub entries: usize,
    /// Largest error/bound ratio over the entries (at most 1 passes).
    pub worst: f64,
    /// Why the check failed; `None` when it passed.
    pub failure: Option<String>,
}

impl Row {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }

    fn algorithm_text(&self) -> String {
        match self.chosen {
            Some(chosen) if chosen != self.algorithm => format!("{} ({chosen})", self.algorithm),
            _ => self.algorithm.to_string(),
        }
    }

    fn result_text(&self) -> String {
        match &self.failure {
            None => "pass".to_string(),
            Some(why) => format!("FAIL: {why}"),
        }
    }
}

/// Counts over a report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub checks: usize,
    pub passed: usize,
    pub failed: usize,
    /// Output entries compared, over all checks.
    pub entries: usize,
    /// Unsupported combinations that refused to plan, as they must.
    pub refused: usize,
    pub errors: usize,
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "total: {} checks, {} passed, {} failed ({} entries compared); \
             {} unsupported combinations refused to plan; {} setup errors",
            self.checks, self.passed, self.failed, self.entries, self.refused, self.errors
        )
    }
}

/// How tables are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Aligned columns for a terminal.
    Text,
    /// GitHub-flavoured markdown.
    Markdown,
}

/// Everything a suite run found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The backend's description.
    pub backend: String,
    pub rows: Vec<Row>,
    /// Unsupported combinations that refused to plan with `Error::Unsupported`, as they must
    /// (one that does not becomes a failed row).
    pub refused: usize,
    /// Problems that kept cases from running, such as a corpus file that does not load; they
    /// fail the run.
    pub errors: Vec<String>,
    /// What was skipped, and why.
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(backend: impl Into<String>) -> Self {
        Report {
            backend: backend.into(),
            ..Report::default()
        }
    }

    /// Adds a note unless the report already has it.
    pub fn note(&mut self, note: String) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// No failed check and no setup error.
    pub fn passed(&self) -> bool {
        self.errors.is_empty() && self.rows.iter().all(Row::passed)
    }

    pub fn failures(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| !r.passed())
    }

    pub fn totals(&self) -> Totals {
        let failed = self.failures().count();
        Totals {
            checks: self.rows.len(),
            passed: self.rows.len() - failed,
            failed,
            entries: self.rows.iter().map(|r| r.entries).sum(),
            refused: self.refused,
            errors: self.errors.len(),
        }
    }

    /// One line per (backend, op, format, precision, algorithm): how many checks, the worst
    /// error/bound and where it occurred, and how many failed.
    pub fn summary_table(&self, style: Style) -> String {
        struct Group<'a> {
            first: &'a Row,
            worst: &'a Row,
            checks: usize,
            entries: usize,
            failed: usize,
        }
        let mut groups: Vec<Group<'_>> = Vec::new();
        for row in &self.rows {
            let key = |r: &Row| (r.backend, r.op, r.format, r.precision, r.algorithm);
            match groups.iter_mut().find(|g| key(g.first) == key(row)) {
                Some(g) => {
                    g.checks += 1;
                    g.entries += row.entries;
                    g.failed += usize::from(!row.passed());
                    if worse(row, g.worst) {
                        g.worst = row;
                    }
                }
                None => groups.push(Group {
                    first: row,
                    worst: row,
                    checks: 1,
                    entries: row.entries,
                    failed: usize::from(!row.passed()),
                }),
            }
        }
        let lines: Vec<Vec<String>> = groups
            .iter()
            .map(|g| {
                vec![
                    g.first.backend.to_string(),
                    g.first.op.to_string(),
                    g.first.format.to_string(),
                    g.first.precision.to_string(),
                    g.first.algorithm.to_string(),
                    g.checks.to_string(),
                    g.entries.to_string(),
                    format!("{}: {}", g.worst.matrix, g.worst.case),
                    g.worst.shape.clone(),
                    ratio_text(g.worst.worst),
                    if g.failed == 0 {
                        "pass".to_string()
                    } else {
                        format!("FAIL {}/{}", g.failed, g.checks)
                    },
                ]
            })
            .collect();
        table(
            style,
            &[
                "backend",
                "op",
                "format",
                "precision",
                "algorithm",
                "checks",
                "entries",
                "worst case",
                "shape/nnz",
                "max error/bound",
                "result",
            ],
            &lines,
        )
    }

    /// One line per check, for the rows `keep` selects.
    pub fn check_table(&self, style: Style, keep: impl Fn(&Row) -> bool) -> String {
        let lines: Vec<Vec<String>> = self
            .rows
            .iter()
            .filter(|r| keep(r))
            .map(|r| {
                vec![
                    r.backend.to_string(),
                    r.op.to_string(),
                    r.format.to_string(),
                    r.precision.to_string(),
                    r.algorithm_text(),
                    r.matrix.clone(),
                    r.case.clone(),
                    r.shape.clone(),
                    r.entries.to_string(),
                    ratio_text(r.worst),
                    r.result_text(),
                ]
            })
            .collect();
        table(
            style,
            &[
                "backend",
                "op",
                "format",
                "precision",
                "algorithm",
                "matrix",
                "case",
                "shape/nnz",
                "entries",
                "max error/bound",
                "result",
            ],
            &lines,
        )
    }

    /// The summary, totals, notes, errors and failures; every check too when `all_checks`.
    pub fn render(&self, style: Style, all_checks: bool) -> String {
        let heading = |title: &str| match style {
            Style::Text => format!("\n{title}\n"),
            Style::Markdown => format!("\n## {title}\n\n"),
        };
        let mut out = match style {
            Style::Text => format!("conformance of {}\n", self.backend),
            Style::Markdown => format!("# Conformance of {}\n", self.backend),
        };
        out += &heading("Summary");
        out += &self.summary_table(style);
        out += &format!("\n{}\n", self.totals());
        for (title, items) in [("Notes", &self.notes), ("Setup errors", &self.errors)] {
            if !items.is_empty() {
                out += &heading(title);
                for item in items {
                    out += &format!("- {item}\n");
                }
            }
        }
        if self.failures().next().is_some() {
            out += &heading("Failures");
            out += &self.check_table(style, |r| !r.passed());
        }
        if all_checks {
            out += &heading("All checks");
            out += &self.check_table(style, |_| true);
        }
        out
    }
}

/// Whether `a` should be shown as the worst of a group instead of `b`: failures first, then
/// the larger error/bound.
fn worse(a: &Row, b: &Row) -> bool {
    (!a.passed(), a.worst) > (!b.passed(), b.worst)
}

/// An error/bound ratio for a table: `0` for exact, `inf` for a failure no bound excuses.
fn ratio_text(r: f64) -> String {
    if r == 0.0 {
        "0".to_string()
    } else if r.is_infinite() {
        "inf".to_string()
    } else if r >= 1e-3 {
        format!("{r:.3}")
    } else {
        format!("{r:.1e}")
    }
}

fn table(style: Style, headers: &[&str], lines: &[Vec<String>]) -> String {
    match style {
        Style::Markdown => {
            let cells = |cells: Vec<String>| {
                let escaped: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
                format!("| {} |\n", escaped.join(" | "))
            };
            let mut out = cells(headers.iter().map(|h| h.to_string()).collect());
            out += &cells(headers.iter().map(|_| "---".to_string()).collect());
            for line in lines {
                out += &cells(line.clone());
            }
            out
        }
        Style::Text => {
            let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
            for line in lines {
                for (w, cell) in widths.iter_mut().zip(line) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            let render = |cells: &[String]| {
                let padded: Vec<String> = cells
                    .iter()
                    .zip(&widths)
                    .map(|(c, &w)| format!("{c:<w$}"))
                    .collect();
                format!("{}\n", padded.join("  ").trim_end())
            };
            let header: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
            let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
            let mut out = render(&header) + &render(&rule);
            for line in lines {
                out += &render(line);
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(algorithm: Algorithm, worst: f64, failure: Option<&str>) -> Row {
        Row {
            backend: BackendKind::Cpu,
            op: OpKind::Spmv,
            format: Format::Csr,
            precision: Precision::F32,
            algorithm,
            chosen: Some(Algorithm::NnzSplit),
            matrix: "m|1".to_string(),
            case: "ints".to_string(),
            shape: "3x3 nnz=4".to_string(),
            entries: 3,
            worst,
            failure: failure.map(str::to_string),
        }
    }

    #[test]
    fn summary_groups_checks_and_shows_the_worst() {
        let mut report = Report::new("cpu");
        report.rows = vec![
            row(Algorithm::Auto, 0.25, None),
            row(Algorithm::Auto, 0.5, None),
            row(Algorithm::NnzSplit, f64::INFINITY, Some("entry 1: got NaN")),
        ];
        report.refused = 7;
        assert!(!report.passed());
        let totals = report.totals();
        assert_eq!((totals.checks, totals.failed, totals.entries), (3, 1, 9));
        let text = report.render(Style::Text, false);
        assert!(text.contains("0.500"), "{text}");
        assert!(text.contains("FAIL 1/1"), "{text}");
        assert!(text.contains("7 unsupported"), "{text}");
        let md = report.render(Style::Markdown, true);
        assert!(
            md.contains("| cpu | spmv | csr | f32 | auto | 2 | 6 |"),
            "{md}"
        );
        assert!(md.contains("m\\|1"), "{md}");
        assert!(md.contains("## All checks"), "{md}");
        assert!(md.contains("auto (nnz-split)"), "{md}");
    }

    #[test]
    fn ratios_print_compactly() {
        assert_eq!(ratio_text(0.0), "0");
        assert_eq!(ratio_text(f64::INFINITY), "inf");
        assert_eq!(ratio_text(0.123456), "0.123");
        assert_eq!(ratio_text(1.5e-7), "1.5e-7");
    }
}
