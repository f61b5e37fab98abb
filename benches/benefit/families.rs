//! The benchmark's task families, and how a task's calls and answer are judged against what
//! the desk (`tests/e2e/support/desk.rs`) would have wanted: the first call's form, whether
//! it was exactly right, and whether the answer carries the right figure.

use serde_json::Value;

use crate::support::desk::{self, DeskCall};

/// What a lesson in a family has to carry over.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A tool argument's house form, which only the tool's error tells.
    Convention,
    /// Tools that must be called in an order.
    Procedure,
    /// How the answer must be written.
    Output,
}

/// One kind of task: training tasks that teach, held-out ones that measure.
pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    /// The desk's tools the family's tasks call (without the bot's `desk__` prefix).
    pub(crate) tools: &'static [&'static str],
    /// Asked in order, in one chat.
    pub(crate) train: &'static [&'static str],
    /// The held-out tasks, with what the task's first call should be.
    pub(crate) held_out: &'static [(&'static str, &'static str)],
}

/// Every family, in the order of their training.
pub(crate) const FAMILIES: &[Family] = &[
    Family {
        name: "ticket ids",
        kind: Kind::Convention,
        tools: &["ticket"],
        train: &[
            "What is the status of support ticket 4411?",
            "Is ticket 2093 still open?",
        ],
        held_out: &[
            ("Can you check support ticket 5127 for me?", "TCK-005127"),
            ("Which team is handling ticket 98?", "TCK-000098"),
            ("Ticket 31337: who is it waiting for?", "TCK-031337"),
        ],
    },
    Family {
        name: "booking dates",
        kind: Kind::Convention,
        tools: &["booking"],
        train: &[
            "Which meeting room is booked on 2026-12-14?",
            "Is any room booked on 2027-01-05?",
        ],
        held_out: &[
            ("What room is booked on 2026-12-21?", "21.12.2026"),
            ("Check the room bookings for 2027-02-03", "03.02.2027"),
            ("Which meeting room is taken on 2027-03-15?", "15.03.2027"),
        ],
    },
    // Issue 34's scenario: SKUs by item number, a rule only the error states with an example
    // of another item (Qwen2.5-Coder-1.5B wrote `SKU-009822` for item 982).
    Family {
        name: "stock SKUs",
        kind: Kind::Convention,
        tools: &["stock_level"],
        train: &[
            "How many units of item 15 are in stock?",
            "Is item 2093 in stock at the warehouse?",
        ],
        held_out: &[
            ("How many units of item 982 are in stock?", "SKU-000982"),
            ("Do we still have item 31 in the warehouse?", "SKU-000031"),
            ("Stock level for item 5127, please", "SKU-005127"),
            ("How many of item 70 are left in stock?", "SKU-000070"),
        ],
    },
    // The second tool of issue 34's server: weights in whole grams, which only its error says.
    Family {
        name: "shipping grams",
        kind: Kind::Convention,
        tools: &["shipping_quote"],
        train: &[
            "What does it cost to ship a 1.5 kg parcel?",
            "Shipping quote for a parcel of 0.8 kg, please",
        ],
        held_out: &[
            ("How much is shipping for a 2.5 kg parcel?", "2500"),
            ("What would a 0.75 kg parcel cost to ship?", "750"),
            ("Quote me shipping for a parcel weighing 1.2 kg", "1200"),
            ("How much to ship a 4 kg box?", "4000"),
        ],
    },
    Family {
        name: "lock before deploy",
        kind: Kind::Procedure,
        tools: &["lock", "deploy"],
        train: &[
            "Deploy the api service",
            "Please deploy the billing service",
        ],
        held_out: &[
            ("Deploy the search service", "search"),
            (
                "Deploy the latest build of the payments service",
                "payments",
            ),
            ("Can you deploy the auth service now?", "auth"),
        ],
    },
    Family {
        name: "temperatures in °F",
        kind: Kind::Output,
        tools: &["weather"],
        train: &[
            "What's the weather in Paris?",
            "No, always give temperatures in Fahrenheit as well as Celsius.",
        ],
        held_out: &[
            ("What's the weather in Oslo today?", "Oslo"),
            ("How warm is it in Madrid right now?", "Madrid"),
            ("Tell me the weather in Hamburg", "Hamburg"),
        ],
    },
];

/// The families whose names start with one of the comma-separated `prefixes` (all for none).
pub(crate) fn select(prefixes: Option<&str>) -> Vec<&'static Family> {
    FAMILIES
        .iter()
        .filter(|f| {
            prefixes.is_none_or(|only| {
                only.split(',')
                    .any(|o| !o.trim().is_empty() && f.name.starts_with(o.trim()))
            })
        })
        .collect()
}

/// The family a task's text belongs to (the text may carry more around the task).
pub(crate) fn family_of(text: &str) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| {
        f.train.iter().any(|t| text.ends_with(t))
            || f.held_out.iter().any(|(t, _)| text.ends_with(t))
    })
}

/// Whether the task's first call to its family's tools was in the right form, and exactly
/// right.
pub(crate) fn first_call_checks(
    family: &Family,
    expected: &str,
    calls: &[DeskCall],
) -> (bool, bool) {
    let Some(first) = calls
        .iter()
        .find(|c| family.tools.contains(&c.tool.as_str()))
    else {
        return (false, false);
    };
    let value = first
        .arguments
        .as_object()
        .and_then(|a| a.values().next())
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default();
    match family.name {
        // The form is the convention's shape; exactly right is the value too (Qwen wrote
        // `TCK-5127` and `SKU-009822`: the form, not the value).
        "ticket ids" => (ticket_form(&value), value == expected),
        "booking dates" => (desk::is_house_date(&value), value == expected),
        "stock SKUs" => (desk::is_house_sku(&value), value == expected),
        // Any whole number is the form (a bare `4` for 4 kg is one, and is 4 g).
        "shipping grams" => (desk::whole_grams(&value).is_some(), value == expected),
        "lock before deploy" => (
            first.tool == "lock",
            first.tool == "lock" && value.trim().eq_ignore_ascii_case(expected),
        ),
        _ => (true, value.trim().eq_ignore_ascii_case(expected)),
    }
}

/// `TCK-` and digits, however many.
fn ticket_form(id: &str) -> bool {
    id.strip_prefix("TCK-")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the task succeeded: its answer carries the right figure (the desk's answer for the
/// right argument), or for the procedure, the right service was deployed.
pub(crate) fn succeeded(family: &Family, expected: &str, answer: &str, calls: &[DeskCall]) -> bool {
    let answer_lower = answer.to_lowercase();
    match family.name {
        "ticket ids" => answer_lower.contains(desk::ticket_team(expected)),
        "booking dates" => answer.contains(desk::booked_room(expected)),
        "stock SKUs" => has_number(answer, &desk::units(expected).to_string()),
        "shipping grams" => {
            let price = desk::whole_grams(expected).map_or_else(String::new, desk::shipping_price);
            has_number(answer, &price) || has_number(answer, &price.replace('.', ","))
        }
        "lock before deploy" => calls.iter().any(|c| {
            c.tool == "deploy"
                && c.error.is_none()
                && c.arguments["service"]
                    .as_str()
                    .is_some_and(|s| s.trim().eq_ignore_ascii_case(expected))
        }),
        _ => answer.contains("°F") || answer_lower.contains("fahrenheit"),
    }
}

/// Whether `text` holds `number` as a whole figure (`32` in "32 units", not in "1320").
fn has_number(text: &str, number: &str) -> bool {
    !number.is_empty()
        && text.match_indices(number).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + number.len()..].chars().next();
            let figure = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
            // "4.65" is not in "14.65" nor "4.657"; a sentence's full stop may follow.
            let decimal_after = text[at + number.len()..]
                .strip_prefix(['.', ','])
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
            !figure(before) && !figure(after) && !decimal_after
        })
}
