//! The machine description recorded with every run.
