//! Enums of named choices (modes, receive modes, roles, …): one definition, `ALL` and `as_str`,
//! from which their `Display`, `FromStr`, clap parser, `--help`, completions and man pages come.
//! Plain data at the ground floor, so any room may use it (`case` re-exports it).

/// `Display` (its `as_str`), `FromStr` (one of its `ALL`, or "unknown NOUN 'x' (accepted:
/// a, b, c)"), and clap's value parser (a field of the type needs no `value_parser`) for an enum of named choices such as a
/// mode: `ALL` and `as_str` are the one definition that flags, their help, completions, man
/// pages, refusals, stored cases and plan files all read.
macro_rules! named_choices {
    ($ty:ty, $noun:literal) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                <$ty>::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
                    let accepted: Vec<&str> = <$ty>::ALL.iter().map(|m| m.as_str()).collect();
                    format!(
                        concat!("unknown ", $noun, " '{}' (accepted: {})"),
                        s,
                        accepted.join(", ")
                    )
                })
            }
        }

        $crate::choice::choice_parser!($ty);
    };
}

/// clap's parser for an enum with `ALL`, `as_str` and a `FromStr` of its own (one that takes
/// aliases too, such as a server model's `io_uring`): `named_choices!` without its `FromStr`.
macro_rules! choice_parser {
    ($ty:ty) => {
        impl $crate::choice::NamedChoice for $ty {
            fn all() -> &'static [Self] {
                &<$ty>::ALL
            }

            fn name(self) -> &'static str {
                self.as_str()
            }
        }

        impl clap::builder::ValueParserFactory for $ty {
            type Parser = $crate::choice::ChoiceParser<$ty>;
            fn value_parser() -> Self::Parser {
                $crate::choice::ChoiceParser::default()
            }
        }
    };
}

pub(crate) use choice_parser;
pub(crate) use named_choices;

/// An enum of named choices (see `named_choices!`): its members and each one's name.
pub trait NamedChoice: Copy + Send + Sync + 'static + std::str::FromStr<Err = String> {
    fn all() -> &'static [Self];
    fn name(self) -> &'static str;
}

/// clap's parser of a named choice: its `FromStr`, whose refusal names the value and what is
/// accepted ("--mode: unknown mode 'x' (accepted: ...)", the form of every refusal), and its
/// names as clap's possible values, which `--help`, completions and man pages list. (Not
/// clap's `ValueEnum`: clap would pick its own parser and refusal over this one.)
#[derive(Clone, Copy, Debug)]
pub struct ChoiceParser<T>(std::marker::PhantomData<T>);

impl<T> Default for ChoiceParser<T> {
    fn default() -> Self {
        ChoiceParser(std::marker::PhantomData)
    }
}

impl<T> clap::builder::TypedValueParser for ChoiceParser<T>
where
    T: NamedChoice,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let parse: fn(&str) -> Result<T, String> = |text| text.parse();
        parse.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            T::all().iter().map(|c| clap::builder::PossibleValue::new(c.name())),
        ))
    }
}
