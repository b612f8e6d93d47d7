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

/// An error that ends the process with its own exit code (e.g. 3: `compare
/// --fail-on-regression` could not decide); main.rs prints it and exits with `code`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ExitWith {
    pub code: u8,
    pub message: String,
}

/// Shorthand: `Err(exit_with(3, "..."))`.
pub fn exit_with(code: u8, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(ExitWith {
        code,
        message: message.into(),
    })
}
