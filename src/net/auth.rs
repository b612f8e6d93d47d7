//! Pre-shared-key challenge-response for `iopath net serve --psk-file`: the server sends a
//! random nonce after the client's hello; the client answers with HMAC-SHA256(key, nonce);
//! the server compares in constant time. The key never crosses the wire and a recorded
//! answer is useless for another nonce. (No encryption: the data stream is a benchmark.)

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::path::Path;
use std::sync::Arc;

type HmacSha256 = Hmac<Sha256>;

/// What the MAC covers besides the nonce, so a MAC for another purpose never fits.
const CONTEXT: &[u8] = b"iopath net stream v2 challenge";
/// The context of a server's proof (mutual authentication): another context, so neither a
/// client's answer nor a server's proof can be replayed as the other.
const SERVER_CONTEXT: &[u8] = b"iopath server proof v1";

/// Whether a client demands that the server prove it holds the key too (mutual proof).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerProof {
    /// Check a proof the server sends (a wrong one is refused); a server that sends none (an
    /// older one) is served as before. Every client with a key asks for one.
    #[default]
    IfOffered,
    /// Refuse a server that does not prove it holds the key: an agent's third-party leg and a
    /// controller's leg (`net serve --agent`).
    Required,
}

/// What a run's client sessions prove themselves with: the pre-shared key the command took
/// (`--psk-file`; never stored: a resume is given it again) and whether the server must prove
/// it too. It travels with the plan to every session the run opens.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    key: Option<Arc<[u8]>>,
    pub server_proof: ServerProof,
}

impl Credentials {
    /// A key, with the server's proof checked when offered.
    pub fn with_key(key: Vec<u8>) -> Credentials {
        Credentials {
            key: Some(key.into()),
            server_proof: ServerProof::IfOffered,
        }
    }

    /// The key of `--psk-file PATH`, when given.
    pub fn from_file(path: Option<&Path>) -> Result<Credentials, String> {
        Ok(match path {
            Some(path) => Credentials::with_key(read_key(path)?),
            None => Credentials::default(),
        })
    }

    /// These, with the server's proof required (an agent's legs).
    pub fn requiring_proof(self) -> Credentials {
        Credentials {
            server_proof: ServerProof::Required,
            ..self
        }
    }

    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
}

/// Never the key itself, in a log or a panic.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("key", &self.key.as_ref().map(|_| "(given)"))
            .field("server_proof", &self.server_proof)
            .finish()
    }
}

/// The most bytes a key file may hold (a key is 16..a few hundred bytes; a device or a huge
/// file is refused, never read until the memory is gone).
pub const MAX_KEY_FILE: u64 = 4096;

/// Read a key file: its bytes, surrounding whitespace trimmed; at least 16 bytes; the file at
/// most [`MAX_KEY_FILE`] bytes, and a file or a pipe (not a device).
pub fn read_key(path: &Path) -> Result<Vec<u8>, String> {
    let raw = crate::sys::input::read_bounded(path, MAX_KEY_FILE)
        .map_err(|e| format!("--psk-file {}: {e}", path.display()))?;
    let key = raw.trim_ascii().to_vec();
    if key.len() < 16 {
        return Err(format!(
            "--psk-file {}: the key is {} bytes; use at least 16 (e.g. head -c 32 /dev/urandom | base64 > key)",
            path.display(),
            key.len()
        ));
    }
    Ok(key)
}

/// A fresh nonce, hex.
pub fn nonce() -> String {
    use rand::TryRng;
    let mut bytes = [0u8; 32];
    // getrandom(2) fails only on a kernel older than 3.17; the nonce has no other source.
    rand::rngs::SysRng
        .try_fill_bytes(&mut bytes)
        .expect("the kernel's random source");
    hex(&bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac(key: &[u8], nonce: &str) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(CONTEXT);
    m.update(nonce.as_bytes());
    m
}

/// The client's answer to `nonce`.
pub fn answer(key: &[u8], nonce: &str) -> String {
    hex(&mac(key, nonce).finalize().into_bytes())
}

/// Whether `answer` proves knowledge of `key` for `nonce` (constant-time comparison).
pub fn verify(key: &[u8], nonce: &str, answer: &str) -> bool {
    check(mac(key, nonce), answer)
}

/// A server's proof that it holds `key`, for the client's nonce (and its own challenge's
/// nonce, so a proof belongs to one session).
pub fn server_proof(key: &[u8], client_nonce: &str, server_nonce: &str) -> String {
    hex(&proof_mac(key, client_nonce, server_nonce).finalize().into_bytes())
}

/// Whether `proof` proves that the server holds `key` (constant-time comparison).
pub fn verify_server_proof(key: &[u8], client_nonce: &str, server_nonce: &str, proof: &str) -> bool {
    check(proof_mac(key, client_nonce, server_nonce), proof)
}

fn proof_mac(key: &[u8], client_nonce: &str, server_nonce: &str) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(SERVER_CONTEXT);
    m.update(client_nonce.as_bytes());
    m.update(b"/");
    m.update(server_nonce.as_bytes());
    m
}

fn check(mac: HmacSha256, answer: &str) -> bool {
    let Some(bytes) = (0..answer.len())
        .step_by(2)
        .map(|i| answer.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    mac.verify_slice(&bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2: the MAC is HMAC-SHA-256 as every other implementation computes
    /// it, so peers built with other versions of the hmac and sha2 crates agree.
    #[test]
    fn the_mac_is_hmac_sha256_of_rfc_4231() {
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_right_key_passes_and_others_do_not() {
        let n = nonce();
        assert_eq!(n.len(), 64);
        assert_ne!(n, nonce());
        let a = answer(b"0123456789abcdef", &n);
        assert!(verify(b"0123456789abcdef", &n, &a));
        assert!(!verify(b"0123456789abcdeX", &n, &a));
        assert!(!verify(b"0123456789abcdef", &nonce(), &a));
        assert!(!verify(b"0123456789abcdef", &n, "zz"));
        assert!(!verify(b"0123456789abcdef", &n, ""));
    }

    /// A server's proof is bound to both nonces and is never a client's answer.
    #[test]
    fn a_server_proof_holds_for_its_key_and_nonces_only() {
        let (c, s) = (nonce(), nonce());
        let key = b"0123456789abcdef";
        let p = server_proof(key, &c, &s);
        assert!(verify_server_proof(key, &c, &s, &p));
        assert!(!verify_server_proof(b"0123456789abcdeX", &c, &s, &p));
        assert!(!verify_server_proof(key, &s, &c, &p));
        assert!(!verify_server_proof(key, &c, &nonce(), &p));
        assert!(!verify(key, &c, &p), "a proof is not an answer to the client's nonce");
        assert!(!verify_server_proof(key, &c, &s, &answer(key, &c)));
    }
}
