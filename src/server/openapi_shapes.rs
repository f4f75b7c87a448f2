//! The shapes of the HTTP API's answers, for the OpenAPI document: the handlers build their
//! JSON with `json!`, and these types say what that JSON is (names, types, which may be null).
//!
//! They are descriptions only: nothing serializes them, and a handler never returns one. The
//! tests of `tests/suite/openapi.rs` check real answers against them, so a handler that
//! changes its JSON without changing its shape here fails there.

use serde_json::Value;
use utoipa::ToSchema;

/// Every error: `{"error":{"code","message"}}` (some codes add members, e.g. the `approvals`
/// of `ambiguous_approval`, or `limit` and `current` of `quota_exceeded`).
#[derive(ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorObject,
}

/// The `error` member of an [`ErrorBody`].
#[derive(ToSchema)]
pub struct ErrorObject {
    /// What went wrong, for programs (`unknown_session`, `session_busy`, …).
    pub code: String,
    /// What went wrong, for people: what to do about it.
    pub message: String,
}

/// `GET /healthz`.
#[derive(ToSchema)]
pub struct Health {
    /// Always `ok`.
    #[schema(example = "ok")]
    pub status: String,
}

/// The answer of a create or a fork: the new session's id.
#[derive(ToSchema)]
pub struct Created {
    /// The session's id.
    #[schema(example = "session-2026-12-06-05-10-04-3f8a1c2d")]
    pub session_id: String,
}

/// `POST /v1/sessions/{id}/resume`.
#[derive(ToSchema)]
pub struct Resumed {
    /// The session's id.
    pub session_id: String,
    /// False when the session was already served (nothing was reopened).
    pub resumed: bool,
}

/// A session's status.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Waiting for a task.
    Idle,
    /// Running a task.
    Running,
    /// Its trace failed: it takes no more tasks.
    Failed,
    /// Closed while this answer was made.
    Closed,
    /// Not resident: woken by the next request that needs it.
    Hibernated,
}

/// A session's sandbox.
#[derive(ToSchema)]
pub struct SandboxView {
    /// `off`, `read-only` or `workspace-write`.
    pub mode: String,
    /// `off` or `on`.
    pub network: String,
}

/// How a session's last task ended (`null` before one has).
#[derive(ToSchema)]
pub struct LastTask {
    /// `completed`, `aborted`, `failed`, … (the task's stop reason).
    pub status: String,
    /// Why it did not complete (`null` when it did).
    pub error: Option<TaskError>,
}

/// Why a task did not complete.
#[derive(ToSchema)]
pub struct TaskError {
    /// What went wrong, for programs.
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
}

/// A task waiting in a session's queue (`if_busy: "enqueue"`).
#[derive(ToSchema)]
pub struct QueuedTask {
    /// Its id (for `DELETE /v1/sessions/{id}/queue/{entry_id}`).
    pub entry_id: String,
    /// Its text.
    pub text: String,
}

/// A session as `GET /v1/sessions/{id}` and the list show it.
#[derive(ToSchema)]
pub struct SessionView {
    /// The session's id.
    pub session_id: String,
    /// The principal that owns it (`null` on a server without principals).
    pub owner: Option<String>,
    /// Its status.
    pub status: SessionStatus,
    /// Its workspace (an absolute path).
    pub workspace: String,
    /// When it was created (ISO-8601 UTC).
    pub created_at: String,
    /// `always-ask`, `allow-reads`, … (see `PUT …/approval_mode`).
    pub approval_mode: String,
    /// Its sandbox.
    pub sandbox: SandboxView,
    /// Approvals waiting for an answer.
    pub pending_approvals: u64,
    /// The id of the last event of its stream (0 before any).
    pub last_event_id: u64,
    /// Its trace file.
    pub trace_path: String,
    /// Why its trace failed (`null` while it works).
    pub error: Option<String>,
    /// How its last task ended.
    pub last_task: Option<LastTask>,
    /// Tasks waiting to run.
    pub queue: Vec<QueuedTask>,
}

/// `GET /v1/sessions`: a page of sessions.
#[derive(ToSchema)]
pub struct SessionPage {
    /// The sessions, by id.
    pub sessions: Vec<SessionView>,
    /// The `cursor` of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// What `POST /v1/sessions/{id}/tasks` did with the task.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum TaskStatus {
    /// It runs.
    Started,
    /// It was sent to the running task as a steer (`if_busy: "steer"`).
    Steered,
    /// It waits in the queue (`if_busy: "enqueue"`).
    Queued,
}

/// `POST /v1/sessions/{id}/tasks`.
#[derive(ToSchema)]
pub struct TaskAccepted {
    /// The session's id.
    pub session_id: String,
    /// The last event id before the task: read its events with `Last-Event-ID` set to this.
    pub events_after: u64,
    /// What happened to the task.
    pub status: TaskStatus,
    /// The queue entry's id (only when `queued`).
    #[schema(required = false)]
    pub entry_id: Option<String>,
}

/// What a steer did.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum SteerStatus {
    /// It waits for the running task's next turn.
    Queued,
    /// No task ran: it started one.
    Started,
}

/// `POST /v1/sessions/{id}/steer`.
#[derive(ToSchema)]
pub struct Steered {
    /// The session's id.
    pub session_id: String,
    /// What happened to the steer.
    pub steer: SteerStatus,
    /// The last event id before the steer.
    pub events_after: u64,
}

/// `POST /v1/sessions/{id}/abort`.
#[derive(ToSchema)]
pub struct Aborting {
    /// The session's id.
    pub session_id: String,
}

/// What a compact request did.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum CompactStatus {
    /// The session was idle: it compacts now.
    Compacting,
    /// A task runs: it compacts before its next request.
    Scheduled,
}

/// `POST /v1/sessions/{id}/compact`.
#[derive(ToSchema)]
pub struct Compacting {
    /// The session's id.
    pub session_id: String,
    /// What happens.
    pub status: CompactStatus,
}

/// `POST /v1/sessions/{id}/rollback`.
#[derive(ToSchema)]
pub struct RolledBack {
    /// Tasks dropped from the context.
    pub dropped_tasks: u64,
    /// Always false: files the tasks changed stay as they are.
    pub files_reverted: bool,
}

/// `POST /v1/sessions/{id}/stream_token`.
#[derive(ToSchema)]
pub struct StreamToken {
    /// Opens `GET /v1/sessions/{id}/events?stream_token=…` of this session only.
    pub stream_token: String,
    /// Seconds it stays valid.
    pub expires_in: u64,
}

/// A tool call waiting for an answer.
#[derive(ToSchema)]
pub struct PendingApproval {
    /// Its id (what `POST …/approvals/{approval_id}` takes).
    pub approval_id: String,
    /// The tool call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// The call's arguments, as the model sent them.
    pub arguments: Value,
    /// The chain of sessions that made the call (a subagent's call names its parent first).
    pub origin: Vec<String>,
}

/// `GET /v1/sessions/{id}/approvals`.
#[derive(ToSchema)]
pub struct ApprovalList {
    /// The pending approvals, oldest first.
    pub approvals: Vec<PendingApproval>,
}

/// A grant: a rule `allow_for_session` added.
#[derive(ToSchema)]
pub struct Grant {
    /// Its id (for `DELETE …/grants/{grant_id}`).
    pub grant_id: String,
    /// What it allows (`Bash(git status:*)`, `write_file`, …).
    pub rule: String,
    /// When it was added (ISO-8601 UTC).
    pub created_at: String,
}

/// `GET /v1/sessions/{id}/grants`.
#[derive(ToSchema)]
pub struct GrantList {
    /// The grants, oldest first.
    pub grants: Vec<Grant>,
}

/// `GET /v1/sessions/{id}/messages`: a page of the conversation.
#[derive(ToSchema)]
pub struct MessagePage {
    /// The messages, oldest first: each a trace record (`docs/protocol.md`).
    pub messages: Vec<TraceRecord>,
    /// The `cursor` of the next page; `null` when the history ended.
    pub next_cursor: Option<String>,
}

/// One record of the protocol (`docs/protocol.md`): a trace line, and the `data` of an event of
/// the stream.
#[derive(ToSchema)]
pub struct TraceRecord {
    /// When it was made (ISO-8601 UTC with milliseconds).
    pub timestamp: String,
    /// `model_msg`, `user_msg`, `event`, `session_meta`, … (the envelope's type).
    #[schema(rename = "type")]
    pub kind: String,
    /// The payload; its own `type` names it (`text`, `tool_call`, `task_end`, …).
    #[schema(required = false)]
    pub payload: Option<Value>,
    /// The chain of sessions it came from (a subagent's names its parent first).
    #[schema(required = false)]
    pub origin: Option<Vec<String>>,
}

/// One event of `GET /v1/sessions/{id}/events` (`text/event-stream`): `id: <n>`,
/// `event: <name>`, `data: <record>`, with keep-alive comments between.
#[derive(ToSchema)]
pub struct StreamEvent {
    /// The event's number (1, 2, 3, …): what `Last-Event-ID` takes to go on after it. With
    /// `--store` it is the record's `seq` in the store (the same on every node), and an event
    /// that is not stored (a partial, the server's own events) is sent without `id`.
    #[schema(required = false)]
    pub id: u64,
    /// The payload's type (`text`, `tool_call`, `tool_output`, `request_begin`, `task_end`, …),
    /// or the envelope's when the payload has none (`session_meta`). With `--store`, a stream
    /// whose session moved to another node ends with `session_moved` (payload
    /// `{"type":"session_moved","node":"<holder>"}`).
    pub event: String,
    /// The record, as one line of JSON.
    pub data: TraceRecord,
}

/// An approval mode.
#[derive(ToSchema)]
pub enum ApprovalModeName {
    /// Every tool call runs.
    #[schema(rename = "allow-all")]
    AllowAll,
    /// Every call that needs an approval is denied.
    #[schema(rename = "deny-all")]
    DenyAll,
    /// Reads run; everything else is denied.
    #[schema(rename = "read-only")]
    ReadOnly,
    /// Every call that needs an approval waits for one through the API.
    #[schema(rename = "always-ask")]
    AlwaysAsk,
}

/// The sandbox a create asks for: never looser than the server's `--sandbox`; a part left
/// out is the server's.
#[derive(ToSchema)]
pub struct SandboxRequest {
    /// The mode.
    #[schema(required = false)]
    pub mode: Option<SandboxModeName>,
    /// The network.
    #[schema(required = false)]
    pub network: Option<NetworkName>,
}

/// A sandbox mode.
#[derive(ToSchema)]
pub enum SandboxModeName {
    /// No sandbox.
    #[schema(rename = "off")]
    Off,
    /// Reads anywhere, writes nowhere.
    #[schema(rename = "read-only")]
    ReadOnly,
    /// Writes in the workspace only.
    #[schema(rename = "workspace-write")]
    WorkspaceWrite,
}

/// A sandbox's network.
#[derive(ToSchema)]
pub enum NetworkName {
    /// No network.
    #[schema(rename = "off")]
    Off,
    /// The network.
    #[schema(rename = "on")]
    On,
}

/// A schedule of a session: its task on a cron pattern (`POST` and `GET …/schedules`). Minutes
/// are the schedule clock's: counted from the Unix epoch, each `minute_ms` long.
#[derive(ToSchema)]
pub struct Schedule {
    /// `sch-…`.
    pub schedule_id: String,
    /// The 5-field cron pattern.
    pub cron: String,
    /// The text of each run's task.
    pub text: String,
    /// The IANA time zone the pattern is read in.
    pub timezone: String,
    /// What a run does when the session is busy.
    #[schema(pattern = "^(reject|enqueue|interrupt|steer)$")]
    pub if_busy: String,
    /// The minute it was added in.
    pub created_minute: u64,
    /// The minute it last ran in (its creation minute before its first run).
    pub last_minute: u64,
    /// The next minute it runs in; `null` when the pattern matches no later minute.
    pub next_minute: Option<u64>,
    /// `next_minute` in milliseconds since the epoch on the schedule clock.
    pub next_at_ms: Option<u64>,
}

/// `GET /v1/sessions/{id}/schedules`.
#[derive(ToSchema)]
pub struct ScheduleList {
    /// The session's schedules.
    pub schedules: Vec<Schedule>,
    /// The length of a schedule minute (`serve --schedule-minute-ms`).
    pub minute_ms: u64,
    /// The schedule clock's current minute.
    pub now_minute: u64,
}

/// `GET /v1/cluster`: the live nodes of a cluster.
#[derive(ToSchema)]
pub struct ClusterNodes {
    /// The node that answered.
    pub node_id: String,
    /// The live nodes (a heartbeat within one lease TTL), by id.
    pub nodes: Vec<ClusterNode>,
}

/// One node of [`ClusterNodes`].
#[derive(ToSchema)]
pub struct ClusterNode {
    /// Its `--node-id`.
    pub node_id: String,
    /// Its `--advertise` URL, where the other nodes forward its sessions' requests.
    pub advertise: String,
    /// Its last heartbeat (RFC 3339, UTC).
    pub last_heartbeat: String,
    /// The sessions whose unexpired lease it holds.
    pub resident_sessions: i64,
}
