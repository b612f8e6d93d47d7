//! The error that means "the user asked for something invalid": main.rs maps it to exit code 2.

/// Bad input found after clap parsed the flags (stage two of validation): one line saying what
/// is wrong and what is accepted.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Shorthand: `Err(usage("..."))?`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}
