//! The two callback-data formats of Heurist's inline buttons, and Telegram's 64-byte limit.
//!
//! - Options: `__opt__<ticket>|<label>`. The ticket (`<id>.<index>`) names a sled record that
//!   holds the chat, the answer's message and the full labels; the label in the data is only a
//!   prefix, cut on a UTF-8 boundary so the whole string fits 64 bytes. The full label comes
//!   from the record, so a long or non-ASCII label never breaks the keyboard.
//! - Actions: `__act__<action>|<payload>`, payloads short by construction (model *keys*, not
//!   slugs; ticket ids).
//!
//! On top of the two formats, [`CallbackData::parse`] is the one way data is read: it gives an
//! [`OptionPress`] or an [`Action`], which the dispatcher's schema routes on, one branch per
//! action.
//!
//! Callback data comes from the client and can be forged: parsing only parses; every route
//! checks the record and the presser's role on the server.
//!
//! ```
//! use heurist::telegram::callback_data::{CallbackData, OptionPress};
//! let data = OptionPress::encode("k1", 0, &"é".repeat(100)).unwrap();
//! assert!(data.len() <= 64);
//! let Some(CallbackData::Option(press)) = CallbackData::parse(&data) else {
//!     panic!("an option");
//! };
//! assert_eq!((press.ticket.as_str(), press.index), ("k1", 0));
//! assert!(press.label.chars().all(|c| c == 'é'));
//! ```

use crate::cancel::TurnId;
use crate::ids::UserId;

/// Callback data prefix for dynamic option buttons.
pub(crate) const CALLBACK_PREFIX: &str = "__opt__";

/// Callback data prefix for action buttons (model selection, clear, feedback).
pub(crate) const ACTION_PREFIX: &str = "__act__";

/// Telegram refuses callback data outside 1–64 bytes (`BUTTON_DATA_INVALID`).
pub(crate) const MAX_CALLBACK_BYTES: usize = 64;

/// Decodes option callback data into `(ticket, label)`; `None` without the option prefix.
///
/// The ticket must not contain `|`; the label may. Examples:
/// `__opt__t|Label` → `(Some("t"), "Label")`, `__opt__|Label` → `(None, "Label")`,
/// `__opt__BareLabel` → `(None, "BareLabel")`.
#[must_use]
fn decode_callback(content: &str) -> Option<(Option<String>, String)> {
    let rest = content.strip_prefix(CALLBACK_PREFIX)?;
    Some(match rest.split_once('|') {
        Some((ticket, label)) if !ticket.is_empty() => {
            (Some(ticket.to_string()), label.to_string())
        }
        Some((_, label)) => (None, label.to_string()),
        None => (None, rest.to_string()),
    })
}

/// Decodes action callback data into `(action, payload)`; `None` without the action prefix.
/// `__act__clear|` and `__act__clear` both give `("clear", "")`.
#[must_use]
fn decode_action(content: &str) -> Option<(String, String)> {
    let rest = content.strip_prefix(ACTION_PREFIX)?;
    match rest.split_once('|') {
        Some((action, payload)) => Some((action.to_string(), payload.to_string())),
        None => Some((rest.to_string(), String::new())),
    }
}

/// Encodes an option button's data, cutting the label so the whole fits 64 bytes. `None` if
/// even the ticket does not fit or contains `|` (a programming error, logged by the caller).
#[must_use]
pub(crate) fn encode_option(ticket: &str, label: &str) -> Option<String> {
    encode(CALLBACK_PREFIX, ticket, label)
}

/// Encodes an action button's data; `None` if it cannot fit 64 bytes without cutting the
/// action (payloads are cut like labels, so keep them short and self-checking).
#[must_use]
pub(crate) fn encode_action(action: &str, payload: &str) -> Option<String> {
    encode(ACTION_PREFIX, action, payload)
}

/// Encodes an action whose payload names ids that must not be cut (a cut id would name
/// another record); `None` if the whole does not fit 64 bytes.
fn encode_whole(action: &str, payload: &str) -> Option<String> {
    let fits = ACTION_PREFIX.len() + action.len() + 1 + payload.len() <= MAX_CALLBACK_BYTES;
    fits.then(|| encode_action(action, payload)).flatten()
}

fn encode(prefix: &str, head: &str, tail: &str) -> Option<String> {
    if head.contains('|') {
        return None;
    }
    let fixed = prefix.len() + head.len() + 1;
    if fixed > MAX_CALLBACK_BYTES {
        return None;
    }
    let tail = cut_to_bytes(tail, MAX_CALLBACK_BYTES - fixed);
    Some(format!("{prefix}{head}|{tail}"))
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
#[must_use]
pub(crate) fn cut_to_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A press of an option button: option `index` of ticket `ticket`, whose button carried
/// `label` (a prefix of the full label, which the ticket holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionPress {
    pub ticket: String,
    pub index: usize,
    pub label: String,
}

impl OptionPress {
    /// The data of option `index` of ticket `ticket`; `None` if it cannot fit (see
    /// [`encode_option`]).
    #[must_use]
    pub fn encode(ticket: &str, index: usize, label: &str) -> Option<String> {
        encode_option(&format!("{ticket}.{index}"), label)
    }

    /// The press that [`decode_callback`]'s output names; `None` without a `<id>.<index>`
    /// ticket.
    #[must_use]
    fn from_decoded((ticket, label): (Option<String>, String)) -> Option<Self> {
        let (id, index) = ticket?
            .rsplit_once('.')
            .map(|(id, i)| (id.to_string(), i.parse()))?;
        Some(Self {
            ticket: id,
            index: index.ok()?,
            label,
        })
    }
}

/// The admin lists that page: `/heuristics`, `/heuristics pending`, `/skills`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Lessons,
    Pending,
    Skills,
}

impl List {
    fn code(self) -> char {
        match self {
            Self::Lessons => 'h',
            Self::Pending => 'p',
            Self::Skills => 's',
        }
    }

    /// `h3` → (Lessons, 3).
    fn parse(text: &str) -> Option<(Self, u32)> {
        let mut chars = text.chars();
        let list = match chars.next()? {
            'h' => Self::Lessons,
            'p' => Self::Pending,
            's' => Self::Skills,
            _ => return None,
        };
        Some((list, chars.as_str().parse().ok()?))
    }
}

/// What an action button does. Payloads are short by construction (model *keys*, not slugs;
/// ticket ids; lesson ids), so every action fits 64 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Switch the chat to the configured model whose key this is.
    SetModel(String),
    /// Forget this chat's conversation.
    Clear,
    /// 👍 (`up`) or 👎 on the answer of feedback ticket `ticket`.
    Feedback { ticket: String, up: bool },
    /// Show page `page` of an admin list.
    Page { list: List, page: u32 },
    /// Approve a pending lesson, then show page `page` of `list` again.
    Approve { id: u64, list: List, page: u32 },
    /// Forget a learned lesson, then show page `page` of `list` again.
    Forget { id: u64, list: List, page: u32 },
    /// Stop turn `TurnId` (only while it runs: an old ⏹ names a turn that is over). `None`:
    /// a ⏹ left on screen by a version before turns had ids, whose turn is over too.
    Stop(Option<TurnId>),
    /// The mark of an option already chosen: pressing it changes nothing.
    Chosen,
    /// Run the message of a failed turn again (retry ticket `ticket`), once.
    Retry { ticket: String },
    /// "Request access" under a stranger's refusal: only the user whose id it carries may use
    /// it.
    RequestAccess(UserId),
    /// Show page `page` of `owner`'s `/memory` (only `owner` may).
    MemoryPage { owner: UserId, page: u32 },
    /// 🗑 Forget `owner`'s fact `id`, then show page `page` of their `/memory` again.
    MemoryForget { owner: UserId, id: u64, page: u32 },
    /// Forget all of `owner`'s facts.
    MemoryForgetAll { owner: UserId },
    /// Show page `page` of `owner`'s `/tasks` (only they, or an admin, may).
    TasksPage { owner: UserId, page: u32 },
    /// ❌ Cancel scheduled task `id` (its owner or an admin), then show page `page` again.
    CancelTask { id: u64, page: u32 },
    /// ✅ (`yes`) or ✖ under a fact or task the provenance gate holds: proposal `id` (only its
    /// user's press counts).
    Confirm { id: String, yes: bool },
    /// Turn "use my memory in groups" on or off for `owner` (only they may).
    MemoryGroups { owner: UserId, on: bool },
}

impl Action {
    /// The button data; `None` if it cannot fit 64 bytes (a programming error).
    #[must_use]
    pub(crate) fn encode(&self) -> Option<String> {
        match self {
            Self::SetModel(key) => encode_action("set_model", key),
            Self::Clear => encode_action("clear", ""),
            Self::Feedback { ticket, up } => {
                encode_action("fb", &format!("{ticket}.{}", if *up { "u" } else { "d" }))
            }
            Self::Page { list, page } => encode_action("page", &format!("{}{page}", list.code())),
            Self::Approve { id, list, page } => {
                encode_action("approve", &format!("{id}.{}{page}", list.code()))
            }
            Self::Forget { id, list, page } => {
                encode_action("forget", &format!("{id}.{}{page}", list.code()))
            }
            Self::Stop(turn) => {
                encode_action("stop", &turn.map(|t| t.to_string()).unwrap_or_default())
            }
            Self::Chosen => encode_action("chosen", ""),
            Self::Retry { ticket } => encode_action("retry", ticket),
            Self::RequestAccess(user) => encode_action("access", &user.to_string()),
            Self::MemoryPage { owner, page } => encode_whole("mpage", &format!("{owner}.{page}")),
            Self::MemoryForget { owner, id, page } => {
                encode_whole("mforget", &format!("{owner}.{id}.{page}"))
            }
            Self::MemoryForgetAll { owner } => encode_whole("mforgetall", &owner.to_string()),
            Self::TasksPage { owner, page } => encode_action("tasks", &format!("{owner}.{page}")),
            Self::CancelTask { id, page } => encode_action("untask", &format!("{id}.{page}")),
            Self::Confirm { id, yes } => {
                encode_whole("confirm", &format!("{id}.{}", if *yes { "y" } else { "n" }))
            }
            Self::MemoryGroups { owner, on } => {
                encode_whole("mgroups", &format!("{owner}.{}", u8::from(*on)))
            }
        }
    }

    /// The action that [`decode_action`]'s output names; `None` for anything that is not a
    /// well-formed action.
    #[must_use]
    fn from_decoded(action: &str, payload: String) -> Option<Self> {
        Some(match action {
            "set_model" => Self::SetModel(payload),
            "clear" => Self::Clear,
            "fb" => {
                let (ticket, vote) = payload.rsplit_once('.')?;
                let up = match vote {
                    "u" => true,
                    "d" => false,
                    _ => return None,
                };
                Self::Feedback {
                    ticket: ticket.to_string(),
                    up,
                }
            }
            "page" => {
                let (list, page) = List::parse(&payload)?;
                Self::Page { list, page }
            }
            "approve" | "forget" => {
                let (id, place) = payload.split_once('.').unwrap_or((&payload, "h0"));
                let (list, page) = List::parse(place)?;
                let id = id.parse().ok()?;
                if action == "approve" {
                    Self::Approve { id, list, page }
                } else {
                    Self::Forget { id, list, page }
                }
            }
            "stop" if payload.is_empty() => Self::Stop(None),
            "stop" => Self::Stop(Some(TurnId::parse(&payload)?)),
            "chosen" => Self::Chosen,
            "retry" if !payload.is_empty() => Self::Retry { ticket: payload },
            "access" => Self::RequestAccess(UserId(payload.parse().ok()?)),
            "mpage" => {
                let (owner, page) = payload.split_once('.')?;
                Self::MemoryPage {
                    owner: UserId(owner.parse().ok()?),
                    page: page.parse().ok()?,
                }
            }
            "tasks" => {
                let (owner, page) = payload.split_once('.')?;
                Self::TasksPage {
                    owner: UserId(owner.parse().ok()?),
                    page: page.parse().ok()?,
                }
            }
            "mforget" => {
                let mut parts = payload.splitn(3, '.');
                let mut next = || parts.next().map(str::parse::<u64>)?.ok();
                let (owner, id, page) = (next()?, next()?, next()?);
                Self::MemoryForget {
                    owner: UserId(owner),
                    id,
                    page: u32::try_from(page).ok()?,
                }
            }
            "mforgetall" => Self::MemoryForgetAll {
                owner: UserId(payload.parse().ok()?),
            },
            "confirm" => Self::confirm(&payload)?,
            "mgroups" => Self::memory_in_groups(&payload)?,
            "untask" => {
                let (id, page) = payload.split_once('.')?;
                Self::CancelTask {
                    id: id.parse().ok()?,
                    page: page.parse().ok()?,
                }
            }
            _ => return None,
        })
    }
}

impl Action {
    /// `<id>.y` (✅) or `<id>.n` (✖) under a confirmation.
    fn confirm(payload: &str) -> Option<Self> {
        let (id, answer) = payload.rsplit_once('.')?;
        let yes = match answer {
            "y" => true,
            "n" => false,
            _ => return None,
        };
        (!id.is_empty()).then(|| Self::Confirm {
            id: id.to_string(),
            yes,
        })
    }

    /// `<owner>.1` (on) or `<owner>.0` (off) under `/memory`.
    fn memory_in_groups(payload: &str) -> Option<Self> {
        let (owner, on) = payload.split_once('.')?;
        let on = match on {
            "1" => true,
            "0" => false,
            _ => return None,
        };
        Some(Self::MemoryGroups {
            owner: UserId(owner.parse().ok()?),
            on,
        })
    }
}

/// What a button's data names: the one parse every callback route uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackData {
    /// An option button (see [`OptionPress`]).
    Option(OptionPress),
    /// An action button (see [`Action`]).
    Action(Action),
}

impl CallbackData {
    /// What `data` names; `None` for data that is forged, garbled or of no known button (the
    /// schema answers such a press as expired).
    #[must_use]
    pub fn parse(data: &str) -> Option<Self> {
        if let Some(decoded) = decode_callback(data) {
            return OptionPress::from_decoded(decoded).map(Self::Option);
        }
        let (action, payload) = decode_action(data)?;
        Action::from_decoded(&action, payload).map(Self::Action)
    }

    /// Whether pressing this button may start a turn (an option, a 🔁 Retry): the routes that
    /// call [`crate::turn::accept`].
    #[must_use]
    pub(crate) fn starts_turn(&self) -> bool {
        matches!(self, Self::Option(_) | Self::Action(Action::Retry { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_decode_callback() {
        struct Case {
            name: &'static str,
            input: &'static str,
            expected: Option<(Option<&'static str>, &'static str)>,
        }
        let cases = [
            Case {
                name: "with ticket id",
                input: "__opt__mahbot-123|Option A",
                expected: Some((Some("mahbot-123"), "Option A")),
            },
            Case {
                name: "empty ticket id",
                input: "__opt__|Label",
                expected: Some((None, "Label")),
            },
            Case {
                name: "no delimiter",
                input: "__opt__BareLabel",
                expected: Some((None, "BareLabel")),
            },
            Case {
                name: "rejects non prefix",
                input: "random_text",
                expected: None,
            },
            Case {
                name: "rejects empty",
                input: "",
                expected: None,
            },
            Case {
                name: "label with extra pipes",
                input: "__opt__ticket|A|B|C",
                expected: Some((Some("ticket"), "A|B|C")),
            },
            Case {
                name: "only prefix and pipe",
                input: "__opt__|",
                expected: Some((None, "")),
            },
            Case {
                name: "action is not an option",
                input: "__act__clear|",
                expected: None,
            },
            Case {
                name: "non-ascii label",
                input: "__opt__t.1|Привет 👋",
                expected: Some((Some("t.1"), "Привет 👋")),
            },
        ];
        for case in &cases {
            let result = decode_callback(case.input);
            let expected = case
                .expected
                .map(|(tid, lbl)| (tid.map(String::from), lbl.to_string()));
            assert_eq!(result, expected, "case: {}", case.name);
        }
    }

    #[test]
    fn test_decode_action() {
        struct Case {
            name: &'static str,
            input: &'static str,
            expected: Option<(&'static str, &'static str)>,
        }
        let cases = [
            Case {
                name: "with payload",
                input: "__act__set_image_model|google/gemini-3.1-flash-image-preview",
                expected: Some(("set_image_model", "google/gemini-3.1-flash-image-preview")),
            },
            Case {
                name: "empty payload pipe",
                input: "__act__clear_session|",
                expected: Some(("clear_session", "")),
            },
            Case {
                name: "no pipe",
                input: "__act__clear_session",
                expected: Some(("clear_session", "")),
            },
            Case {
                name: "rejects non prefix",
                input: "random_text",
                expected: None,
            },
            Case {
                name: "rejects empty",
                input: "",
                expected: None,
            },
            Case {
                name: "option is not an action",
                input: "__opt__t|x",
                expected: None,
            },
        ];
        for case in &cases {
            let result = decode_action(case.input);
            let expected = case.expected.map(|(a, p)| (a.to_string(), p.to_string()));
            assert_eq!(result, expected, "case: {}", case.name);
        }
    }

    #[test]
    fn encoding_fits_64_bytes_on_char_boundaries_and_round_trips() {
        struct Case {
            name: &'static str,
            ticket: &'static str,
            label: String,
            kept: usize,
        }
        let cases = [
            Case {
                name: "short ascii kept whole",
                ticket: "a1.0",
                label: "Yes".into(),
                kept: 3,
            },
            Case {
                name: "exactly fits",
                ticket: "a1.0",
                label: "x".repeat(52),
                kept: 52,
            },
            Case {
                name: "long ascii cut",
                ticket: "a1.0",
                label: "x".repeat(200),
                kept: 52,
            },
            Case {
                name: "2-byte chars cut before a half",
                ticket: "a1.0",
                label: "é".repeat(40),
                kept: 26,
            },
            Case {
                name: "4-byte emoji cut before a half",
                ticket: "a1.0",
                label: "😀".repeat(20),
                kept: 13,
            },
            Case {
                name: "3-byte cjk",
                ticket: "zzzzzz.3",
                label: "漢".repeat(30),
                kept: 16,
            },
        ];
        for case in cases {
            let data = encode_option(case.ticket, &case.label).unwrap();
            assert!(
                data.len() <= MAX_CALLBACK_BYTES,
                "case {}: {} bytes",
                case.name,
                data.len()
            );
            let (ticket, label) = decode_callback(&data).unwrap();
            assert_eq!(ticket.as_deref(), Some(case.ticket), "case {}", case.name);
            assert!(case.label.starts_with(&label), "case {}", case.name);
            assert_eq!(label.chars().count(), case.kept, "case {}", case.name);
        }
        assert_eq!(encode_option("bad|ticket", "x"), None);
        assert_eq!(encode_option(&"t".repeat(60), "x"), None);
        assert_eq!(encode_action("clear", "").as_deref(), Some("__act__clear|"));
    }

    #[test]
    fn the_longest_ticket_ids_fit_with_room_for_the_label() {
        struct Case {
            name: &'static str,
            data: Option<String>,
            kept_tail: &'static str,
        }
        let id = "z".repeat(crate::store::TICKET_ID_CHARS);
        let cases = [
            Case {
                name: "option button with a two-digit index: 40 bytes of label",
                data: encode_option(&format!("{id}.10"), &"x".repeat(100)),
                kept_tail: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            },
            Case {
                name: "feedback button: the whole payload",
                data: Action::Feedback {
                    ticket: id.clone(),
                    up: false,
                }
                .encode(),
                kept_tail: "zzzzzzzzzzzzz.d",
            },
            Case {
                name: "retry button: the whole ticket",
                data: Action::Retry { ticket: id.clone() }.encode(),
                kept_tail: "zzzzzzzzzzzzz",
            },
        ];
        for case in cases {
            let data = case
                .data
                .unwrap_or_else(|| panic!("case {}: does not fit", case.name));
            assert!(data.len() <= MAX_CALLBACK_BYTES, "case {}", case.name);
            let (_, tail) = data.split_once('|').unwrap();
            assert_eq!(tail, case.kept_tail, "case {}", case.name);
        }
    }

    #[test]
    fn stop_data_names_its_turn_and_garbled_data_names_none() {
        struct Case {
            name: &'static str,
            data: &'static str,
            action: Option<Action>,
        }
        let cases = [
            Case {
                name: "the largest turn id",
                data: "__act__stop|3w5e11264sgsf",
                action: Some(Action::Stop(Some(TurnId(u64::MAX)))),
            },
            Case {
                name: "a short id",
                data: "__act__stop|z",
                action: Some(Action::Stop(Some(TurnId(35)))),
            },
            Case {
                name: "a ⏹ from before turns had ids: its turn is over",
                data: "__act__stop|",
                action: Some(Action::Stop(None)),
            },
            Case {
                name: "no payload at all: a ⏹ without an id, too",
                data: "__act__stop",
                action: Some(Action::Stop(None)),
            },
            Case {
                name: "an id that overflows",
                data: "__act__stop|zzzzzzzzzzzzz",
                action: None,
            },
            Case {
                name: "garbage",
                data: "__act__stop|1;drop",
                action: None,
            },
        ];
        for case in cases {
            let (name, payload) = decode_action(case.data).unwrap();
            assert_eq!(
                Action::from_decoded(&name, payload),
                case.action,
                "case: {}",
                case.name
            );
        }
        let longest = Action::Stop(Some(TurnId(u64::MAX))).encode().unwrap();
        assert_eq!(longest, "__act__stop|3w5e11264sgsf");
        assert!(longest.len() <= MAX_CALLBACK_BYTES);
    }

    #[test]
    fn one_parse_names_every_button_and_nothing_else() {
        struct Case {
            name: &'static str,
            data: &'static str,
            parsed: Option<CallbackData>,
            starts_turn: bool,
        }
        let option = |ticket: &str, index, label: &str| {
            Some(CallbackData::Option(OptionPress {
                ticket: ticket.into(),
                index,
                label: label.into(),
            }))
        };
        let cases = [
            Case {
                name: "an option",
                data: "__opt__k1.2|Yes",
                parsed: option("k1", 2, "Yes"),
                starts_turn: true,
            },
            Case {
                name: "an option whose ticket has no index",
                data: "__opt__k1|Yes",
                parsed: None,
                starts_turn: false,
            },
            Case {
                name: "an option without a ticket",
                data: "__opt__Yes",
                parsed: None,
                starts_turn: false,
            },
            Case {
                name: "a retry",
                data: "__act__retry|t1",
                parsed: Some(CallbackData::Action(Action::Retry {
                    ticket: "t1".into(),
                })),
                starts_turn: true,
            },
            Case {
                name: "an action that starts no turn",
                data: "__act__clear|",
                parsed: Some(CallbackData::Action(Action::Clear)),
                starts_turn: false,
            },
            Case {
                name: "a task's cancel",
                data: "__act__untask|42.1",
                parsed: Some(CallbackData::Action(Action::CancelTask { id: 42, page: 1 })),
                starts_turn: false,
            },
            Case {
                name: "a confirmation's ✅",
                data: "__act__confirm|0abc.y",
                parsed: Some(CallbackData::Action(Action::Confirm {
                    id: "0abc".into(),
                    yes: true,
                })),
                starts_turn: false,
            },
            Case {
                name: "a confirmation with a forged answer",
                data: "__act__confirm|0abc.maybe",
                parsed: None,
                starts_turn: false,
            },
            Case {
                name: "a forged task id",
                data: "__act__untask|-1.0",
                parsed: None,
                starts_turn: false,
            },
            Case {
                name: "a tasks page without its owner",
                data: "__act__tasks|3",
                parsed: None,
                starts_turn: false,
            },
            Case {
                name: "an unknown action",
                data: "__act__launch|now",
                parsed: None,
                starts_turn: false,
            },
            Case {
                name: "no known prefix",
                data: "nonsense",
                parsed: None,
                starts_turn: false,
            },
        ];
        for case in cases {
            let parsed = CallbackData::parse(case.data);
            assert_eq!(parsed, case.parsed, "case {}", case.name);
            assert_eq!(
                parsed.is_some_and(|data| data.starts_turn()),
                case.starts_turn,
                "case {}",
                case.name
            );
        }
    }

    /// A memory button names its owner and fact whole or not at all: a cut id would forget
    /// another fact.
    #[test]
    fn memory_buttons_fit_whole_and_garbled_ones_name_nothing() {
        let largest = Action::MemoryForget {
            owner: UserId(u64::MAX),
            id: u64::MAX,
            page: u32::MAX,
        };
        assert_eq!(largest.encode(), None, "too long to carry whole");
        let real = Action::MemoryForget {
            owner: UserId(8_123_456_789),
            id: 123_456,
            page: 4,
        };
        let data = real.encode().unwrap();
        assert!(data.len() <= MAX_CALLBACK_BYTES);
        assert_eq!(CallbackData::parse(&data), Some(CallbackData::Action(real)));
        for garbled in [
            "__act__mforget|1.2",
            "__act__mforget|1.x.0",
            "__act__mforget|1.2.99999999999",
            "__act__mpage|1",
            "__act__mforgetall|",
            "__act__mforgetall|-1",
        ] {
            assert_eq!(CallbackData::parse(garbled), None, "{garbled}");
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            #[test]
            fn options_fit_64_bytes_and_round_trip(ticket in "[a-z0-9.]{1,20}", label in ".{0,120}") {
                let data = encode_option(&ticket, &label).unwrap();
                prop_assert!(!data.is_empty() && data.len() <= MAX_CALLBACK_BYTES);
                let (decoded_ticket, decoded_label) = decode_callback(&data).unwrap();
                prop_assert_eq!(decoded_ticket.as_deref(), Some(ticket.as_str()));
                prop_assert!(label.starts_with(&decoded_label));
            }

            #[test]
            fn actions_fit_64_bytes_and_round_trip(action in "[a-z_]{1,20}", payload in ".{0,80}") {
                let data = encode_action(&action, &payload).unwrap();
                prop_assert!(data.len() <= MAX_CALLBACK_BYTES);
                let (decoded_action, decoded_payload) = decode_action(&data).unwrap();
                prop_assert_eq!(decoded_action, action);
                prop_assert!(payload.starts_with(&decoded_payload));
            }

            #[test]
            fn typed_routes_round_trip(ticket in "[a-z0-9]{1,16}", index in 0usize..10, label in ".{0,80}", id in any::<u64>()) {
                let data = OptionPress::encode(&ticket, index, &label).unwrap();
                prop_assert!(data.len() <= MAX_CALLBACK_BYTES);
                let Some(CallbackData::Option(press)) = CallbackData::parse(&data) else {
                    panic!("not an option: {data}");
                };
                prop_assert_eq!((press.ticket.as_str(), press.index), (ticket.as_str(), index));
                prop_assert!(label.starts_with(&press.label));
                for action in [
                    Action::SetModel(ticket.clone()),
                    Action::Clear,
                    Action::Feedback { ticket: ticket.clone(), up: index % 2 == 0 },
                    Action::Forget { id, list: List::Pending, page: 999 },
                    Action::Approve { id, list: List::Lessons, page: 0 },
                    Action::Page { list: List::Skills, page: 12 },
                    Action::Stop(Some(TurnId(id))),
                    Action::Stop(None),
                    Action::Chosen,
                    Action::Retry { ticket: ticket.clone() },
                    Action::RequestAccess(UserId(id)),
                    Action::MemoryPage { owner: UserId(id), page: 3 },
                    Action::MemoryForget { owner: UserId(id), id: index as u64, page: 12 },
                    Action::MemoryForgetAll { owner: UserId(id) },
                    Action::TasksPage { owner: UserId(id), page: u32::MAX },
                    Action::CancelTask { id, page: u32::MAX },
                    Action::Confirm { id: crate::ids::base36(id), yes: index % 2 == 0 },
                    Action::MemoryGroups { owner: UserId(id), on: index % 2 == 1 },
                ] {
                    let data = action.encode().unwrap();
                    prop_assert!(data.len() <= MAX_CALLBACK_BYTES);
                    prop_assert_eq!(CallbackData::parse(&data), Some(CallbackData::Action(action)));
                }
            }

            #[test]
            fn decoding_arbitrary_data_never_panics(data in ".{0,100}") {
                let _ = decode_callback(&data);
                let _ = decode_action(&data);
                let _ = CallbackData::parse(&data);
            }
        }
    }
}
