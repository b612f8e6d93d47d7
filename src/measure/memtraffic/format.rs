//! Event strings against a PMU's `format/*` files, the way perf reads them: each format file
//! says which bits of which config word a term fills (`config:0-7,32-35`, `config1:9`), and
//! an event string (`event=0x04,umask=0x03`) gives the terms their values. Pure functions.

use std::collections::BTreeMap;

/// The perf_event_attr word a format term lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Word {
    Config,
    Config1,
    Config2,
}

/// One `format/<term>` file: the bits of one config word the term's value is spread over,
/// lowest value bit to the first (lowest) bit listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldFormat {
    pub word: Word,
    /// Bit numbers in ascending order, each 0..=63.
    pub bits: Vec<u32>,
}

/// The three config words of an encoded event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Encoded {
    pub config: u64,
    pub config1: u64,
    pub config2: u64,
}

impl Encoded {
    fn word_mut(&mut self, word: Word) -> &mut u64 {
        match word {
            Word::Config => &mut self.config,
            Word::Config1 => &mut self.config1,
            Word::Config2 => &mut self.config2,
        }
    }
}

fn word_named(name: &str) -> Option<Word> {
    match name {
        "config" => Some(Word::Config),
        "config1" => Some(Word::Config1),
        "config2" => Some(Word::Config2),
        _ => None,
    }
}

/// Parse the text of a format file: `config:0-7`, `config:0-7,32-35,59-60`, `config1:9`.
pub fn parse_format(text: &str) -> Result<FieldFormat, String> {
    let text = text.trim();
    let (word, ranges) = text
        .split_once(':')
        .ok_or_else(|| format!("format '{text}' has no ':' (expected e.g. config:0-7)"))?;
    let word = word_named(word.trim())
        .ok_or_else(|| format!("format '{text}' names '{word}', not config, config1 or config2"))?;
    let mut bits = Vec::new();
    for range in ranges.split(',') {
        let number = |s: &str| -> Result<u32, String> {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|b| *b < 64)
                .ok_or_else(|| format!("format '{text}': '{s}' is not a bit number 0..63"))
        };
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (number(lo)?, number(hi)?),
            None => {
                let b = number(range)?;
                (b, b)
            }
        };
        if lo > hi {
            return Err(format!("format '{text}': range {lo}-{hi} runs backwards"));
        }
        bits.extend(lo..=hi);
    }
    bits.sort_unstable();
    if bits.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("format '{text}' lists a bit twice"));
    }
    Ok(FieldFormat { word, bits })
}

fn parse_value(term: &str, text: &str) -> Result<u64, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    };
    parsed.map_err(|_| format!("term '{term}': '{t}' is not a number (decimal or 0x hex)"))
}

/// Place `value` into the bits of `format`; an error when it does not fit.
fn place(term: &str, value: u64, format: &FieldFormat, into: &mut Encoded) -> Result<(), String> {
    let width = format.bits.len() as u32;
    if width < 64 && value >> width != 0 {
        return Err(format!("term '{term}': value {value:#x} does not fit its {width} bits"));
    }
    let word = into.word_mut(format.word);
    for (i, bit) in format.bits.iter().enumerate() {
        if value >> i & 1 == 1 {
            *word |= 1 << bit;
        }
    }
    Ok(())
}

/// Encode an event string (`event=0x04,umask=0x03`) with a PMU's formats. A term without a
/// value is 1 (perf's rule, e.g. `edge`); `config=`, `config1=` and `config2=` set a whole
/// word. A term the PMU has no format for is an error naming the terms it has.
pub fn encode(event: &str, formats: &BTreeMap<String, FieldFormat>) -> Result<Encoded, String> {
    let mut out = Encoded::default();
    for term in event.trim().split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = match term.split_once('=') {
            Some((name, value)) => (name.trim(), parse_value(name.trim(), value)?),
            None => (term, 1),
        };
        if let Some(format) = formats.get(name) {
            place(name, value, format, &mut out)?;
        } else if let Some(word) = word_named(name) {
            *out.word_mut(word) |= value;
        } else {
            let known: Vec<&str> = formats.keys().map(String::as_str).collect();
            return Err(format!(
                "unknown term '{name}' in '{event}' (this PMU's format has: {})",
                if known.is_empty() {
                    "nothing".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formats(list: &[(&str, &str)]) -> BTreeMap<String, FieldFormat> {
        list.iter()
            .map(|(n, f)| (n.to_string(), parse_format(f).unwrap()))
            .collect()
    }

    #[test]
    fn format_files_parse_into_bits() {
        let f = parse_format("config:0-7\n").unwrap();
        assert_eq!((f.word, f.bits), (Word::Config, (0..=7).collect()));
        let f = parse_format("config:0-7,32-35,59-60").unwrap();
        let mut want: Vec<u32> = (0..=7).collect();
        want.extend(32..=35);
        want.extend(59..=60);
        assert_eq!(f.bits, want);
        let f = parse_format("config1:9").unwrap();
        assert_eq!((f.word, f.bits), (Word::Config1, vec![9]));
        for bad in ["config", "conf:1", "config:64", "config:7-3", "config:1,1", "config:x"] {
            assert!(parse_format(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn intel_imc_event_strings_encode() {
        let f = formats(&[
            ("event", "config:0-7"),
            ("umask", "config:8-15"),
            ("edge", "config:18"),
            ("thresh", "config:24-31"),
        ]);
        assert_eq!(encode("event=0x04,umask=0x03", &f).unwrap().config, 0x0304);
        assert_eq!(encode("umask=0x0f,event=0x04", &f).unwrap().config, 0x0f04);
        // A bare term is 1; decimal values work.
        assert_eq!(encode("event=4,edge", &f).unwrap().config, 0x4 | 1 << 18);
        assert_eq!(encode("thresh=255", &f).unwrap().config, 0xff << 24);
        // A raw word term sets the word.
        let e = encode("config=0x1234,config1=7", &f).unwrap();
        assert_eq!((e.config, e.config1), (0x1234, 7));
    }

    /// The AMD data fabric's event number is split: bits 0-7 of the value go to config 0-7,
    /// bits 8-11 to config 32-35, bits 12-13 to config 59-60.
    #[test]
    fn multi_range_formats_spread_the_value_low_bits_first() {
        let f = formats(&[("event", "config:0-7,32-35,59-60"), ("umask", "config:8-15")]);
        let e = encode("event=0x107,umask=0x38", &f).unwrap();
        assert_eq!(e.config, 0x07 | 0x38 << 8 | 1 << 32);
        let e = encode("event=0x3fff", &f).unwrap();
        assert_eq!(e.config, 0xff | 0xf << 32 | 0x3 << 59);
        // 15 bits do not fit 14.
        let err = encode("event=0x4000", &f).unwrap_err();
        assert!(err.contains("does not fit its 14 bits"), "{err}");
    }

    #[test]
    fn unknown_terms_and_bad_values_are_errors() {
        let f = formats(&[("event", "config:0-7"), ("rdwrmask", "config:8-9")]);
        let err = encode("event=0x0a,umask=0x1", &f).unwrap_err();
        assert!(
            err.contains("unknown term 'umask'") && err.contains("event, rdwrmask"),
            "{err}"
        );
        assert!(encode("event=0xzz", &f).unwrap_err().contains("not a number"));
        assert!(encode("rdwrmask=4", &f).unwrap_err().contains("does not fit"));
        assert_eq!(encode("event=0x0a,rdwrmask=0x2", &f).unwrap().config, 0x20a);
    }
}
