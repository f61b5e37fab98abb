//! A turn's argument rewrites (see [`crate::learning::rewrite`]): before a call runs, each of
//! its arguments in an old form is written in the form its tool taught, and the call in the
//! conversation says so (the model sees the form it should use; the user sees a progress
//! line). A tool's refusal that states its form by example, and a refused call that a later
//! call of the same tool fixed, teach the turn at once (Qwen2.5-Coder-1.5B repeated a refused
//! call word for word after the error had stated the fix) and are kept for later turns.
//!
//! Only the tools of servers that allow it (`rewrite_arguments`, on by default) are in a
//! turn's [`Forms`], and only while the bot learns.
//!
//! ```
//! use heurist::agent::rewriting::Forms;
//! use heurist::learning::rewrite::Example;
//! let mut forms = Forms::default();
//! forms.allow("desk__stock_level", Vec::new());
//! let error = "no item 'SKU-15': SKUs are written SKU- and six digits (item 4411 is SKU-004411)";
//! let taught = forms.refused("desk__stock_level", r#"{"sku":"SKU-15"}"#, error);
//! assert_eq!(taught[0].example, Example::new("4411", "SKU-004411"));
//! let (arguments, changes) = forms.rewrite("desk__stock_level", r#"{"sku":"SKU-15"}"#).unwrap();
//! assert_eq!(arguments, r#"{"sku":"SKU-000015"}"#);
//! assert_eq!(changes[0].to, "SKU-000015");
//! ```

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::learning::rewrite::{self, Example, ToolForms};

/// One argument of a call the bot rewrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentChange {
    pub argument: String,
    pub from: String,
    pub to: String,
}

/// An example a turn taught about one tool's argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taught {
    pub tool: String,
    pub argument: String,
    pub example: Example,
}

/// The argument forms of the tools a turn may rewrite: per tool, per argument, the examples
/// (newest first).
#[derive(Debug, Clone, Default)]
pub struct Forms {
    tools: HashMap<String, ToolForms>,
    /// Calls refused in this turn, per tool: their arguments, for a later fix.
    refused: Vec<(String, Map<String, Value>)>,
    /// The tools whose output (third-party text: a page, search results, a server's answer)
    /// the turn read: a later call's arguments may be their words, so a fix is learned only
    /// where the fixed tool's own output is all the turn read.
    read: std::collections::HashSet<String>,
    /// The rewritten calls already counted (tool and arguments): a repeat the bot refuses
    /// without running it is not another failure of the rewrite.
    counted: std::collections::HashSet<(String, String)>,
}

impl Forms {
    /// Lets the turn rewrite `tool`'s arguments, with the examples it taught before.
    pub fn allow(&mut self, tool: &str, arguments: ToolForms) {
        self.tools.insert(tool.to_string(), arguments);
    }

    /// Whether `tool` taught a form of one of its arguments.
    #[must_use]
    pub fn taught(&self, tool: &str) -> bool {
        self.tools
            .get(tool)
            .is_some_and(|arguments| arguments.iter().any(|(_, e)| !e.is_empty()))
    }

    /// Whether the turn may rewrite `tool`'s arguments.
    #[must_use]
    pub fn allows(&self, tool: &str) -> bool {
        self.tools.contains_key(tool)
    }

    /// The turn read third-party text from `tool`: no later fix of another tool is learned
    /// (a tool's own results are its own word on its arguments).
    pub fn read_from(&mut self, tool: &str) {
        self.read.insert(tool.to_string());
    }

    /// `arguments` (a call's JSON) with every argument in an old form rewritten, and what
    /// changed; `None` when nothing does.
    #[must_use]
    pub fn rewrite(&self, tool: &str, arguments: &str) -> Option<(String, Vec<ArgumentChange>)> {
        let taught = self.tools.get(tool)?;
        let mut object = parse(arguments)?;
        let mut changes = Vec::new();
        for (argument, examples) in taught {
            let Some(value) = object.get_mut(argument) else {
                continue;
            };
            let Some(from) = scalar(value) else {
                continue;
            };
            if let Some(to) = rewrite::rewrite(examples, &from) {
                *value = like(value, &to);
                changes.push(ArgumentChange {
                    argument: argument.clone(),
                    from,
                    to,
                });
            }
        }
        if changes.is_empty() {
            return None;
        }
        Some((Value::Object(object).to_string(), changes))
    }

    /// Whether a rewritten call of `tool` with `arguments` is the first of its kind in the turn
    /// (its outcome counts once).
    pub fn first_of_its_kind(&mut self, tool: &str, arguments: &str) -> bool {
        self.counted
            .insert((tool.to_string(), arguments.trim().to_string()))
    }

    /// Learns from `tool`'s refusal of `arguments` (its server's words): the examples the
    /// refusal states, for the argument whose value it quotes (or the call's only one).
    pub fn refused(&mut self, tool: &str, arguments: &str, error: &str) -> Vec<Taught> {
        if !self.tools.contains_key(tool) {
            return Vec::new();
        }
        let Some(object) = parse(arguments) else {
            return Vec::new();
        };
        let words = rewrite::words(error);
        let scalars: Vec<(String, String)> = object
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), scalar(v)?)))
            .collect();
        let quoted: Vec<&(String, String)> = scalars
            .iter()
            .filter(|(_, value)| words.contains(&value.as_str()))
            .collect();
        let about = match (&quoted[..], &scalars[..]) {
            ([one], _) => Some((*one).clone()),
            ([], [one]) => Some(one.clone()),
            _ => None,
        };
        self.refused.push((tool.to_string(), object));
        let Some((argument, value)) = about else {
            return Vec::new();
        };
        let taught: Vec<Taught> = rewrite::stated_pairs(&value, error)
            .into_iter()
            .map(|example| Taught {
                tool: tool.to_string(),
                argument: argument.clone(),
                example,
            })
            .collect();
        self.learn(&taught);
        taught
    }

    /// Learns from a call of `tool` that worked with `arguments` the model wrote: where a
    /// call refused earlier in the turn differed in one argument only, that pair.
    pub fn worked(&mut self, tool: &str, arguments: &str) -> Vec<Taught> {
        let Some(object) = parse(arguments).filter(|_| self.read.iter().all(|t| t == tool)) else {
            return Vec::new();
        };
        let taught: Vec<Taught> = self
            .refused
            .iter()
            .filter(|(t, refused)| t == tool && refused.len() == object.len())
            .filter_map(|(_, refused)| one_change(refused, &object))
            .filter_map(|(argument, from, to)| {
                Some(Taught {
                    tool: tool.to_string(),
                    example: rewrite::fixed_pair(&from, &to)?,
                    argument,
                })
            })
            .collect();
        self.learn(&taught);
        taught
    }

    /// Adds `taught` to the turn's forms (newest first, the ones a rule still fits).
    fn learn(&mut self, taught: &[Taught]) {
        for t in taught {
            let Some(arguments) = self.tools.get_mut(&t.tool) else {
                continue;
            };
            let at = match arguments.iter().position(|(a, _)| *a == t.argument) {
                Some(at) => at,
                None => {
                    arguments.push((t.argument.clone(), Vec::new()));
                    arguments.len() - 1
                }
            };
            let examples = &mut arguments[at].1;
            let mut with_it = examples.clone();
            with_it.insert(0, t.example.clone());
            // An example no rule fits with the kept ones leaves them (see `rewrite::keep`).
            if !examples.contains(&t.example) && rewrite::teaches(&with_it) {
                *examples = rewrite::consistent_newest(&with_it);
            }
        }
    }
}

/// The one argument (name, refused value, worked value) two calls' arguments differ in.
fn one_change(
    refused: &Map<String, Value>,
    worked: &Map<String, Value>,
) -> Option<(String, String, String)> {
    let mut differing = worked
        .iter()
        .filter(|(k, v)| refused.get(k.as_str()) != Some(v));
    let (argument, value) = differing.next()?;
    if differing.next().is_some() {
        return None;
    }
    Some((
        argument.clone(),
        scalar(refused.get(argument)?)?,
        scalar(value)?,
    ))
}

fn parse(arguments: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(arguments.trim()) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// A string or number argument, as text.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `text` as a value of `original`'s type: a number stays a number where it still is one.
fn like(original: &Value, text: &str) -> Value {
    match original {
        Value::Number(_) => serde_json::from_str::<serde_json::Number>(text)
            .map_or_else(|_| Value::String(text.to_string()), Value::Number),
        _ => Value::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPING: &str = "desk__shipping_quote";
    const GRAMS: &str = "cannot quote the weight '1.5': weights are whole grams, digits only, \
                         without a unit (a 0.3 kg parcel is 300)";

    #[test]
    fn a_refusal_teaches_the_turn_and_numbers_stay_numbers() {
        let mut forms = Forms::default();
        forms.allow(SHIPPING, Vec::new());
        let taught = forms.refused(SHIPPING, r#"{"weight": 1.5}"#, GRAMS);
        assert_eq!(taught.len(), 1);
        assert_eq!(taught[0].argument, "weight");
        let (arguments, _) = forms.rewrite(SHIPPING, r#"{"weight": 1.5}"#).unwrap();
        assert_eq!(arguments, r#"{"weight":1500}"#);
        let (arguments, _) = forms.rewrite(SHIPPING, r#"{"weight": "2.5"}"#).unwrap();
        assert_eq!(arguments, r#"{"weight":"2500"}"#);
        assert_eq!(forms.rewrite(SHIPPING, r#"{"weight": 800}"#), None);
    }

    #[test]
    fn tools_not_allowed_learn_nothing_and_are_never_rewritten() {
        let mut forms = Forms::default();
        assert!(
            forms
                .refused(SHIPPING, r#"{"weight": 1.5}"#, GRAMS)
                .is_empty()
        );
        assert_eq!(forms.rewrite(SHIPPING, r#"{"weight": 1.5}"#), None);
    }

    #[test]
    fn a_fix_in_one_argument_is_an_example() {
        let tool = "desk__ticket";
        let mut forms = Forms::default();
        forms.allow(tool, Vec::new());
        let refused = forms.refused(tool, r#"{"id":"TCK-5127","queue":"A"}"#, "unknown id");
        assert!(refused.is_empty());
        let taught = forms.worked(tool, r#"{"id":"TCK-005127","queue":"A"}"#);
        assert_eq!(taught[0].example, Example::new("TCK-5127", "TCK-005127"));
        let (arguments, changes) = forms
            .rewrite(tool, r#"{"id":"TCK-98","queue":"B"}"#)
            .unwrap();
        assert!(arguments.contains(r#""id":"TCK-000098""#), "{arguments}");
        assert_eq!(changes.len(), 1);
        // Two arguments changed at once: which one did the fix is not known.
        let both = forms.worked(tool, r#"{"id":"TCK-005128","queue":"C"}"#);
        assert!(both.is_empty());
    }

    #[test]
    fn a_rewritten_call_counts_once_per_turn() {
        let mut forms = Forms::default();
        assert!(forms.first_of_its_kind(SHIPPING, r#"{"weight":1500}"#));
        assert!(!forms.first_of_its_kind(SHIPPING, r#" {"weight":1500} "#));
        assert!(forms.first_of_its_kind(SHIPPING, r#"{"weight":2500}"#));
    }

    /// A fix after the turn read a page, or another tool's answer (a ticket a customer wrote,
    /// of the same server), may be their words: never learned.
    #[test]
    fn no_fix_is_learned_after_reading_anything_but_the_tools_own_output() {
        let tool = "desk__ticket";
        for (other, learned) in [
            (tool, true),
            ("fetch_url", false),
            ("desk__read_ticket", false),
        ] {
            let mut forms = Forms::default();
            forms.allow(tool, Vec::new());
            forms.allow("desk__read_ticket", Vec::new());
            forms.refused(tool, r#"{"id":"5127"}"#, "unknown id");
            forms.read_from(other);
            let taught = forms.worked(tool, r#"{"id":"TCK-005127"}"#);
            assert_eq!(!taught.is_empty(), learned, "after reading {other}");
        }
    }

    #[test]
    fn a_refusal_quoting_several_arguments_teaches_nothing() {
        let tool = "desk__ticket";
        let mut forms = Forms::default();
        forms.allow(tool, Vec::new());
        let error = "ticket '15' of queue '7' unknown (this one is TCK-000015)";
        assert!(
            forms
                .refused(tool, r#"{"id":"15","queue":"7"}"#, error)
                .is_empty()
        );
    }
}
