//! `iopath fake` (hidden): the deterministic test workload through the
//! same plan, runner and sinks as every real command.

use super::error::usage;
use super::output::{num, Table};
use super::run::RunFlags;
use super::values::parse_duration;
use crate::case::{Case, FakeBehaviour, FakeCase};
use crate::observation::{names, Role};
use crate::store::Record;
use crate::sweep::Plan;
use clap::Args;

#[derive(Args, Debug)]
pub struct FakeArgs {
    /// What each case does, comma-separated: ok[:VALUE], ok:VALUE~JITTER (VALUE plus a
    /// deterministic jitter repeating every six calls), noise:VALUE~SD (VALUE plus normal noise
    /// of standard deviation SD, seeded by IOPATH_FAKE_SEED), sleep:DURATION (stoppable),
    /// stubborn:DURATION (ignores the stop; holds a child and a scratch file), fail, panic.
    #[arg(long, default_value = "ok")]
    pub cells: String,
    #[command(flatten)]
    pub run: RunFlags,
}

fn parse_behaviour(text: &str) -> Result<FakeBehaviour, String> {
    let ms = |d: &str| parse_duration(d).map(|d| d.as_millis() as u64);
    match text.trim().split_once(':') {
        None if text.trim() == "ok" => Ok(FakeBehaviour::Ok { value: 1 }),
        None if text.trim() == "fail" => Ok(FakeBehaviour::Fail),
        None if text.trim() == "panic" => Ok(FakeBehaviour::Panic),
        Some(("ok", v)) if v.contains('~') => {
            let (value, jitter) = v.split_once('~').unwrap_or_default();
            match (value.parse(), jitter.parse()) {
                (Ok(value), Ok(jitter)) => Ok(FakeBehaviour::Jitter { value, jitter }),
                _ => Err(format!("'{v}' is not VALUE~JITTER in whole numbers")),
            }
        }
        Some(("noise", v)) => match v.split_once('~').map(|(a, b)| (a.parse(), b.parse())) {
            Some((Ok(value), Ok(sd))) => Ok(FakeBehaviour::Noise { value, sd }),
            _ => Err(format!("'{v}' is not VALUE~SD in whole numbers")),
        },
        Some(("ok", v)) => v
            .parse()
            .map(|value| FakeBehaviour::Ok { value })
            .map_err(|_| format!("'{v}' is not a whole number")),
        Some(("sleep", d)) => ms(d).map(|ms| FakeBehaviour::Sleep { ms }),
        Some(("stubborn", d)) => ms(d).map(|ms| FakeBehaviour::Stubborn { ms }),
        _ => Err(format!(
            "unknown behaviour '{text}' (accepted: ok[:N], ok:N~J, noise:N~SD, sleep:DURATION, stubborn:DURATION, fail, panic)"
        )),
    }
}

impl TryFrom<&FakeArgs> for Plan {
    type Error = anyhow::Error;
    fn try_from(args: &FakeArgs) -> anyhow::Result<Plan> {
        let mut cases = Vec::new();
        for (index, text) in args.cells.split(',').enumerate() {
            let behaviour = parse_behaviour(text).map_err(|e| usage(format!("--cells: {e}")))?;
            cases.push(Case::Fake(FakeCase { index, behaviour }));
        }
        Ok(args.run.plan(cases, "lo"))
    }
}

/// One row per cell, repetitions numbered as the store numbers them (from 0).
pub fn table(records: &[Record], _view: super::output::View) -> String {
    let mut t = Table::new(&["case", "rep", "value"]);
    for r in records {
        t.row(vec![
            r.label.clone(),
            r.repetition.to_string(),
            num(r.observation.value(names::FAKE_VALUE, Role::System)),
        ]);
    }
    t.render()
}
