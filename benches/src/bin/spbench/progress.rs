//! Where a long run is, on stderr only: one line rewritten in place when stderr is a terminal,
//! otherwise one line per matrix (for logs). The CSV and the markdown never see it.

use std::io::{IsTerminal, Write};
use std::time::Instant;

pub struct Progress {
    live: bool,
    started: Instant,
    /// Characters of the line on screen, to blank it before a shorter one.
    shown: usize,
}

/// Longest live line: wider lines would wrap and leave the previous ones behind.
const WIDTH: usize = 110;

impl Progress {
    pub fn new() -> Self {
        Progress {
            live: std::io::stderr().is_terminal(),
            started: Instant::now(),
            shown: 0,
        }
    }

    /// A matrix begins (`index` counts from 1).
    pub fn matrix(&mut self, index: usize, total: usize, name: &str, detail: &str) {
        if !self.live {
            eprintln!(
                "[{index}/{total} {:.0}s] {name} {detail}",
                self.started.elapsed().as_secs_f64()
            );
        }
    }

    /// What runs now (shown only on a terminal).
    pub fn status(&mut self, line: &str) {
        if !self.live {
            return;
        }
        let line = format!("[{:.0}s] {line}", self.started.elapsed().as_secs_f64());
        let line: String = line.chars().take(WIDTH).collect();
        let len = line.chars().count();
        let pad = self.shown.saturating_sub(len);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}{:pad$}", "");
        let _ = err.flush();
        self.shown = len;
    }

    /// A message that stays, printed on its own line.
    pub fn note(&mut self, message: &str) {
        self.clear();
        eprintln!("{message}");
    }

    /// Removes the live line.
    pub fn clear(&mut self) {
        if self.live && self.shown > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:width$}\r", "", width = self.shown);
            let _ = err.flush();
            self.shown = 0;
        }
    }
}
