//! "desk": an in-process MCP server (streamable HTTP on 127.0.0.1) whose tools have house
//! conventions that their schemas do not tell and only their errors do, the way a company's
//! internal tools are. The tests and `benches/benefit` measure whether what the bot learned
//! from such an error changes the next task's first call.
//!
//! - `ticket {id}`: ids are `TCK-` and six digits, zero-padded (`TCK-004411`).
//! - `booking {date}`: dates are `DD.MM.YYYY` (`14.12.2026`).
//! - `stock_level {sku}`: SKUs are `SKU-` and the item number as six digits, zero-padded
//!   (item 4411 is `SKU-004411`); a house-form SKU of the wrong number (`SKU-009822` for item
//!   982) is another item, answered as such.
//! - `shipping_quote {weight}`: weights are whole grams (a 2.5 kg parcel is `2500`); a bare
//!   `4` for a 4 kg parcel is read as 4 g, and quoted as such.
//! - `lock {service}` then `deploy {service}`: a deploy needs the service locked first.
//! - `weather {city}`: no convention; the answer's (°C) is what a user may want otherwise.
//!
//! The errors of `ticket` and `booking` name the rule and the corrected value of the argument
//! they got, as a helpful internal tool's error does; those of `stock_level` and
//! `shipping_quote` (the scenario of issue 34, where they shared one server) state only the
//! rule and an example of another value, so the model has to apply it. Every call is logged,
//! with what it answered, so a caller can read what a task did.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use heurist::config::{McpRoles, McpServerConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// One call the desk served.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeskCall {
    /// The tool's name on the desk (`ticket`), without the bot's `desk__` prefix.
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    /// The error it answered, if it failed.
    pub(crate) error: Option<String>,
    /// What it answered: its result, or the error.
    pub(crate) reply: String,
}

#[derive(Clone, Default)]
struct Desk {
    calls: Arc<Mutex<Vec<DeskCall>>>,
    locked: Arc<Mutex<HashSet<String>>>,
}

/// The running desk server; stops with the test's runtime.
#[derive(Clone)]
pub(crate) struct DeskServer {
    pub(crate) url: String,
    desk: Desk,
}

impl DeskServer {
    pub(crate) async fn start() -> Self {
        let desk = Desk::default();
        let served = desk.clone();
        let service: StreamableHttpService<Desk, LocalSessionManager> = StreamableHttpService::new(
            move || Ok(served.clone()),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Self { url, desk }
    }

    /// The bot's entry for it, named `desk` (its tools are `desk__ticket`, ...).
    pub(crate) fn entry(&self) -> McpServerConfig {
        McpServerConfig {
            name: "desk".into(),
            command: None,
            args: Vec::new(),
            env: Default::default(),
            cwd: None,
            url: Some(self.url.clone()),
            headers: Default::default(),
            allowed_tools: Vec::new(),
            roles: McpRoles::User,
            in_groups: false,
            timeout_secs: 30,
            rewrite_arguments: true,
        }
    }

    /// Every call so far, in order.
    pub(crate) fn calls(&self) -> Vec<DeskCall> {
        self.desk.calls.lock().unwrap().clone()
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

fn string_arg(name: &str, description: &str) -> JsonObject {
    object(json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
    }))
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "ticket",
            "Look up a support ticket's status by its id.",
            string_arg("id", "The ticket's id."),
        ),
        Tool::new(
            "booking",
            "List the meeting-room bookings on a date.",
            string_arg("date", "The date."),
        ),
        Tool::new(
            "stock_level",
            "How many units of an item the warehouse holds, by SKU.",
            string_arg("sku", "The item's SKU."),
        ),
        Tool::new(
            "shipping_quote",
            "The price of shipping a parcel, by its weight.",
            object(json!({
                "type": "object",
                "properties": {"weight": {"type": "number", "description": "The parcel's weight."}},
                "required": ["weight"],
            })),
        ),
        Tool::new(
            "lock",
            "Lock a service for maintenance.",
            string_arg("service", "The service's name."),
        ),
        Tool::new(
            "deploy",
            "Deploy the latest build of a service.",
            string_arg("service", "The service's name."),
        ),
        Tool::new(
            "weather",
            "Today's weather in a city.",
            string_arg("city", "The city's name."),
        ),
    ]
}

/// The digits of `text`, as a number (0 when there are none).
fn number_in(text: &str) -> u64 {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(0)
}

/// A ticket id in the house form, from any way of writing its number.
pub(crate) fn ticket_id(text: &str) -> String {
    format!("TCK-{:06}", number_in(text) % 1_000_000)
}

pub(crate) fn is_ticket_id(id: &str) -> bool {
    id.strip_prefix("TCK-")
        .is_some_and(|d| d.len() == 6 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The team a ticket waits for, by its number.
pub(crate) fn ticket_team(id: &str) -> &'static str {
    ["billing", "shipping", "returns", "accounts"][(number_in(id) % 4) as usize]
}

/// `DD.MM.YYYY` from an ISO date or the house form itself; `None` for anything else.
pub(crate) fn house_date(text: &str) -> Option<String> {
    let text = text.trim();
    let iso: Vec<&str> = text.split('-').collect();
    if let [y, m, d] = iso[..]
        && y.len() == 4
        && m.len() == 2
        && d.len() == 2
    {
        return Some(format!("{d}.{m}.{y}"));
    }
    is_house_date(text).then(|| text.to_string())
}

pub(crate) fn is_house_date(date: &str) -> bool {
    let parts: Vec<&str> = date.split('.').collect();
    matches!(parts[..], [d, m, y] if d.len() == 2 && m.len() == 2 && y.len() == 4)
        && date.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// The room booked on a date (the same date, the same room), by its day and month: dates of
/// one year get different rooms, so two right answers never read the same.
pub(crate) fn booked_room(date: &str) -> &'static str {
    ["Aurora", "Boreal", "Cirrus", "Delta"][(number_in(date) / 10_000 % 4) as usize]
}

/// An SKU in the house form, from any way of writing its item number.
pub(crate) fn house_sku(text: &str) -> String {
    format!("SKU-{:06}", number_in(text) % 1_000_000)
}

/// `SKU-` and six digits: the house form, whichever item it names.
pub(crate) fn is_house_sku(sku: &str) -> bool {
    sku.strip_prefix("SKU-")
        .is_some_and(|d| d.len() == 6 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Units in stock of an SKU.
pub(crate) fn units(sku: &str) -> u64 {
    11 + number_in(sku) * 7 % 89
}

/// A weight in whole grams: digits only (a JSON integer or a string of digits), at least 1.
pub(crate) fn whole_grams(weight: &str) -> Option<u64> {
    let weight = weight.trim();
    if weight.is_empty() || !weight.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    weight.parse().ok().filter(|g| *g > 0)
}

/// The price of shipping a parcel of `grams`, in euros with two decimals ("4.65").
pub(crate) fn shipping_price(grams: u64) -> String {
    let cents = 390 + (grams * 3).div_ceil(100);
    format!("{}.{:02}", cents / 100, cents % 100)
}

fn success(text: String) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

fn failure(text: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

impl Desk {
    fn answer(&self, tool: &str, arguments: &JsonObject) -> Result<String, String> {
        let arg = |name: &str| {
            arguments
                .get(name)
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_default()
        };
        match tool {
            "ticket" => {
                let id = arg("id");
                if is_ticket_id(&id) {
                    Ok(format!(
                        "Ticket {id}: open, waiting for the {} team.",
                        ticket_team(&id)
                    ))
                } else {
                    Err(format!(
                        "unknown ticket id '{id}': ticket ids are written TCK- and six digits, \
                         zero-padded (this one is {})",
                        ticket_id(&id)
                    ))
                }
            }
            "booking" => {
                let date = arg("date");
                if is_house_date(&date) {
                    Ok(format!(
                        "{date}: room {} is booked 10:00-11:00.",
                        booked_room(&date)
                    ))
                } else {
                    let fixed = house_date(&date).unwrap_or_else(|| "14.12.2026".into());
                    Err(format!(
                        "cannot read the date '{date}': dates are written DD.MM.YYYY (this one \
                         is {fixed})"
                    ))
                }
            }
            "stock_level" => {
                let sku = arg("sku");
                if is_house_sku(&sku) {
                    Ok(format!(
                        "{sku}: {} units in the Leipzig warehouse.",
                        units(&sku)
                    ))
                } else {
                    Err(format!(
                        "no item '{sku}': SKUs are written SKU- followed by the item number as \
                         six digits, zero-padded (item 4411 is SKU-004411)"
                    ))
                }
            }
            "shipping_quote" => {
                let weight = arg("weight");
                match whole_grams(&weight) {
                    Some(grams) => Ok(format!(
                        "A {grams} g parcel ships for EUR {} (standard delivery).",
                        shipping_price(grams)
                    )),
                    None => Err(format!(
                        "cannot quote the weight '{weight}': weights are whole grams, digits \
                         only, without a unit (a 0.3 kg parcel is 300)"
                    )),
                }
            }
            "lock" => {
                let service = arg("service").trim().to_lowercase();
                self.locked.lock().unwrap().insert(service.clone());
                Ok(format!("Locked {service} for maintenance."))
            }
            "deploy" => {
                let service = arg("service").trim().to_lowercase();
                if self.locked.lock().unwrap().remove(&service) {
                    Ok(format!(
                        "Deployed {service} build 812; the lock is released."
                    ))
                } else {
                    Err(format!(
                        "service '{service}' is not locked: call lock with service '{service}' \
                         first, then deploy"
                    ))
                }
            }
            "weather" => {
                let city = arg("city");
                let celsius = 4 + city.trim().len() * 7 % 20;
                Ok(format!("{city}: {celsius} °C, light rain."))
            }
            other => Err(format!("no tool {other}")),
        }
    }
}

impl ServerHandler for Desk {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let answer = self.answer(request.name.as_ref(), &arguments);
        self.calls.lock().unwrap().push(DeskCall {
            tool: request.name.to_string(),
            arguments: Value::Object(arguments),
            error: answer.as_ref().err().cloned(),
            reply: match &answer {
                Ok(text) | Err(text) => text.clone(),
            },
        });
        Ok(match answer {
            Ok(text) => success(text),
            Err(text) => failure(text),
        })
    }
}
