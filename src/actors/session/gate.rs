//! The gate every complete tool call passes before it runs, in this order: the command policy
//! (shell tools, as their definitions declare them; under every mode), the PreToolUse hooks (deny / ask / allow / updatedInput),
//! the permission rules (deny, then a hook's allow or ask, then ask, then allow), then the
//! session's grants (an answer `allow_for_session` adds one), then the session's approver; and after a call ran, its PostToolUse hooks, whose context
//! is appended to the output the model sees.
//!
//! It decides and returns what to record (`Verdict`); the dispatch records and runs. It runs in
//! spawned tasks, never inside the actor's `handle`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;

use super::SessionState;
use super::hook_events::{decision_record, failure_records, permission_name};
use crate::approval::command_policy::CommandPolicy;
use crate::approval::grants::{self, Grants};
use crate::approval::permission_rules::{PermissionRules, RuleCall, RuleDecision};
use crate::approval::{Answer, ApprovalRequest, Approver};
use crate::hooks::{self, HookCall, HookContext, HookEnv, HookEvent, HooksConfig, Permission};
use crate::message::{
    Decision, EventPayload, ModelPayload, OmniMessage, Payload, StopReason, build,
};
use crate::tools::ToolRegistry;

/// Output of a call the command policy forbids.
pub(super) const POLICY_DENIED: &str = "Tool call denied by policy.";
/// Output of a call the approver denies.
pub(super) const USER_DENIED: &str = "Tool call denied by user.";

/// What the gate decided for one call.
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    /// `approval_decision.source`.
    pub(super) source: &'static str,
    pub(super) reason: Option<String>,
    /// Recorded before the decision (`hook_error`, `hook_rewrite`).
    pub(super) records: Vec<OmniMessage>,
    /// The arguments the call runs with, when a hook replaced them.
    pub(super) arguments: Option<String>,
    /// The output of a call that does not run.
    pub(super) denial: String,
    /// PreToolUse context, appended to the call's output.
    pub(super) context: Vec<String>,
    /// The call asked to run outside the sandbox (recorded as `"escalation": true`).
    pub(super) escalation: bool,
    /// The `approval_grant` an answer `allow_for_session` made, recorded after the decision.
    pub(super) grant: Option<OmniMessage>,
    /// The principal whose answer decided (`approval_decision.decided_by`).
    pub(super) decided_by: Option<String>,
}

impl Verdict {
    pub(super) fn new(decision: Decision, source: &'static str, reason: Option<String>) -> Self {
        let denial = match decision {
            Decision::Forbidden => POLICY_DENIED,
            _ => USER_DENIED,
        };
        Verdict {
            decision,
            source,
            reason,
            records: Vec::new(),
            arguments: None,
            denial: denial.to_string(),
            context: Vec::new(),
            escalation: false,
            grant: None,
            decided_by: None,
        }
    }

    pub(super) fn record(&self, tool_call_id: &str) -> OmniMessage {
        let build = if self.escalation {
            build::escalation_decision_by
        } else {
            build::approval_decision_by
        };
        let mut record = build(
            self.decision,
            tool_call_id,
            self.source,
            self.reason.clone(),
        );
        if let (
            Some(by),
            crate::message::Payload::Event(EventPayload::ApprovalDecision { decided_by, .. }),
        ) = (&self.decided_by, &mut record.payload)
        {
            *decided_by = Some(by.clone());
        }
        record
    }
}

/// What the gate needs from the session (cloned into the deciding task).
#[derive(Clone)]
pub(super) struct Gate {
    policy: Arc<CommandPolicy>,
    /// The session's tools: a call's definition says which argument the policy checks.
    tools: ToolRegistry,
    hooks: Arc<HooksConfig>,
    rules: Arc<PermissionRules>,
    workspace: std::path::PathBuf,
    approver: Arc<dyn Approver>,
    ctx: HookContext,
    env: HookEnv,
    /// The session's sandbox, when it has one: escalated shell calls are decided apart.
    sandbox: Option<Arc<crate::sandbox::SandboxPolicy>>,
    /// The grants of the session's policy, when its approver has one.
    grants: Option<Arc<Grants>>,
}

impl Gate {
    pub(super) fn of(state: &SessionState) -> Gate {
        let options = &state.options;
        let super::hook_events::HookSite { hooks, ctx, env } =
            super::hook_events::HookSite::of(state);
        Gate {
            policy: options.config.command_policy.clone(),
            tools: options.config.tools.clone(),
            hooks,
            rules: options.config.permissions.clone(),
            workspace: options.workspace.clone(),
            approver: options.approver.clone(),
            ctx,
            env,
            sandbox: options
                .sandbox
                .as_ref()
                .map(|_| Arc::new(options.config.sandbox.clone())),
            grants: options.approver.policy().map(|p| p.grants().clone()),
        }
    }

    fn policy_verdict(&self, name: &str, arguments: &str) -> Option<Verdict> {
        let tool = self.tools.get(name)?;
        let rule = self.policy.check_call(&tool.definition, arguments)?;
        tracing::info!("tool call {name} forbidden by the command policy rule {rule}");
        Some(Verdict::new(
            Decision::Forbidden,
            "policy",
            Some(rule.to_string()),
        ))
    }

    /// The permission rule deciding `request`, if any.
    fn rule(&self, request: &ApprovalRequest) -> Option<(RuleDecision, String)> {
        let tool = self.tools.get(&request.name);
        self.rules.decide(&RuleCall {
            name: &request.name,
            definition: tool.map(|t| &*t.definition),
            arguments: &request.arguments,
            workspace: &self.workspace,
        })
    }

    /// The rule of the session's grant allowing `request` (`matching`), or the rule an answer
    /// `allow_for_session` to it grants (`!matching`; `None` for a compound command).
    fn grant_rule(&self, request: &ApprovalRequest, matching: bool) -> Option<String> {
        let tool = self.tools.get(&request.name);
        let call = RuleCall {
            name: &request.name,
            definition: tool.map(|t| &*t.definition),
            arguments: &request.arguments,
            workspace: &self.workspace,
        };
        if matching {
            self.grants.as_ref()?.matching(&call)
        } else {
            grants::rule_for(&call)
        }
    }

    /// After the policy and the hooks: a deny rule, then the hook's decision, then an ask
    /// rule, an allow rule, the approver.
    async fn after_hooks(
        &self,
        request: ApprovalRequest,
        hook: Option<Permission>,
        hook_reason: Option<String>,
    ) -> Verdict {
        let rule = self.rule(&request);
        if let Some((RuleDecision::Deny, text)) = &rule {
            let mut v = Verdict::new(Decision::Deny, "rule", Some(text.clone()));
            v.denial = format!("Tool call denied by permission rule {text}.");
            return v;
        }
        // A hook's or a rule's allow never takes a call out of the sandbox: an escalated call
        // is decided by the escalation's rule (`approve_or_escalate`).
        let escalates = self.escalates(&request);
        match (hook, rule) {
            (Some(Permission::Allow), _) if !escalates => {
                Verdict::new(Decision::Allow, "hook", hook_reason)
            }
            (Some(Permission::Ask), _) => {
                let mut v = self.approve_or_escalate(request, true).await;
                v.reason = v.reason.or(hook_reason);
                v
            }
            (Some(Permission::Allow), _) => self.approve_or_escalate(request, false).await,
            (_, Some((RuleDecision::Ask, text))) => {
                let mut v = self.approve_or_escalate(request, true).await;
                v.reason = v.reason.or(Some(text));
                v
            }
            (_, Some((RuleDecision::Allow, text))) if !escalates => {
                Verdict::new(Decision::Allow, "rule", Some(text))
            }
            _ => match self.grant_rule(&request, true).filter(|_| !escalates) {
                Some(rule) => Verdict::new(Decision::Allow, "grant", Some(rule)),
                None => self.approve_or_escalate(request, false).await,
            },
        }
    }

    /// Decides one call: policy, PreToolUse hooks, permission rules, approver.
    pub(super) async fn decide(self, mut request: ApprovalRequest) -> Verdict {
        if let Some(v) = self.policy_verdict(&request.name, &request.arguments) {
            return v;
        }
        let call = self.hook_call(&request);
        let pre = hooks::run_event(
            &self.hooks,
            HookEvent::PreToolUse,
            &self.ctx,
            &self.env,
            &call,
            None,
        )
        .await;
        let Some(pre) = pre else {
            return self.after_hooks(request, None, None).await;
        };
        let mut records = failure_records(None, &request.tool_call_id, &pre.failures);
        if let Some(d) = pre.decision {
            records.push(decision_record(
                HookEvent::PreToolUse,
                &pre,
                permission_name(d),
                Some(&request.tool_call_id),
            ));
        }
        if pre.decision == Some(Permission::Deny) {
            let reason = pre.reason.unwrap_or_else(|| "no reason given".to_string());
            let mut v = Verdict::new(Decision::Deny, "hook", Some(reason.clone()));
            v.denial = format!("Tool call blocked by PreToolUse hook: {reason}");
            v.records = records;
            return v;
        }
        let mut arguments = None;
        if let Some((command, new)) = pre.updated_input {
            let new_text = serde_json::Value::Object(new).to_string();
            records.push(OmniMessage::event(EventPayload::HookRewrite {
                tool_call_id: request.tool_call_id.clone(),
                command,
                original_arguments: request.arguments.clone(),
                arguments: new_text.clone(),
            }));
            request.arguments = new_text.clone();
            arguments = Some(new_text);
            // The rewritten command faces the policy too.
            if let Some(mut v) = self.policy_verdict(&request.name, &request.arguments) {
                v.records = records;
                return v;
            }
        }
        let mut v = self.after_hooks(request, pre.decision, pre.reason).await;
        // The PreToolUse records first, then those of the asking (PermissionRequest, …).
        records.append(&mut v.records);
        v.records = records;
        v.arguments = arguments;
        v.context = pre.context;
        v
    }

    /// Whether `request` is a shell call of a sandboxed session that asks to run outside it.
    fn escalates(&self, request: &ApprovalRequest) -> bool {
        self.sandbox.is_some()
            && crate::tools::escalation::asks_escalation(&request.name, &request.arguments)
    }

    /// The approver's decision, or for an escalated call the escalation's: always asked under
    /// `always-ask` / `read-only` (and by an approver without a mode); under `allow-all` /
    /// `deny-all` allowed only with `sandbox.allow_escalation: true`.
    async fn approve_or_escalate(&self, request: ApprovalRequest, ask: bool) -> Verdict {
        let Some(policy) = self.sandbox.as_ref().filter(|_| self.escalates(&request)) else {
            return self.approve(request, ask, true).await;
        };
        use crate::approval::{EscalationRule, escalation_rule};
        use crate::tools::escalation;
        let mode = self.approver.policy().map(|p| p.mode());
        let mut v = match escalation_rule(mode, policy.allow_escalation) {
            EscalationRule::Allow => Verdict::new(
                Decision::Allow,
                "mode",
                Some("sandbox.allow_escalation is true".to_string()),
            ),
            EscalationRule::Deny => {
                let mut v = Verdict::new(
                    Decision::Deny,
                    "mode",
                    Some(escalation::NOT_ALLOWED_REASON.to_string()),
                );
                v.denial = escalation::denial(policy);
                v
            }
            EscalationRule::Ask => {
                let mut v = self.approve(request, true, false).await;
                if v.decision != Decision::Allow {
                    v.denial = escalation::denial(policy);
                    if let Some(reason) = &v.reason {
                        // The answerer's reason, as for any denied call.
                        v.denial = format!("{} Reason: {reason}", v.denial);
                    }
                }
                v
            }
        };
        v.escalation = true;
        v
    }

    /// The approver's decision (`ask`: past its mode). A panic counts as `deny`. An answer
    /// `allow_for_session` allows the call and, when `grantable` (not an escalated call) and
    /// the call is not a compound command, adds a grant to the session.
    async fn approve(&self, request: ApprovalRequest, ask: bool, grantable: bool) -> Verdict {
        let source = self.approver.decided_by(&request, ask);
        let mut records = Vec::new();
        if source != "mode" {
            // Somebody would be asked: a PermissionRequest hook may answer instead, and the
            // Notification hooks hear that an approval waits.
            if let Some(v) = self.permission_request(&request, &mut records).await {
                return v;
            }
            self.notify_waiting(&request, &mut records).await;
        }
        let rule = grantable
            .then(|| self.grant_rule(&request, false))
            .flatten();
        let tool_call_id = request.tool_call_id.clone();
        let pending = self.approver.answer(request, ask);
        let answer = AssertUnwindSafe(pending)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::warn!("approver panicked; denying");
                Answer::bare(Decision::Deny)
            });
        let decision = answer.decision;
        let decided_by = self.approver.answered_by(&tool_call_id);
        if decision != Decision::AllowForSession {
            let mut v = Verdict::new(decision, source, None);
            v.records = records;
            v.decided_by = decided_by;
            if decision == Decision::Deny
                && let Some(reason) = answer.reason
            {
                // The model is told why, in the answerer's words.
                v.denial = format!("{USER_DENIED} Reason: {reason}");
                v.reason = Some(reason);
            }
            return v;
        }
        let mut v = Verdict::new(Decision::Allow, source, None);
        v.records = records;
        v.decided_by = decided_by;
        match (rule, &self.grants) {
            (Some(rule), Some(grants)) => {
                let now = crate::message::now_timestamp();
                let grant = grants.add(rule.clone(), now);
                tracing::info!("granted {rule} for the session ({})", grant.grant_id);
                let mut record = OmniMessage::event(EventPayload::ApprovalGrant {
                    grant_id: grant.grant_id,
                    rule,
                    tool_call_id,
                });
                // Resume reads `created_at` back from the record's timestamp.
                record.timestamp = grant.created_at;
                v.grant = Some(record);
            }
            _ => tracing::info!(
                "allow_for_session for {tool_call_id}: no grant (compound, escalated or no policy)"
            ),
        }
        v
    }

    /// The PermissionRequest hooks' answer for a call that would be asked: `Some` verdict when
    /// one allowed or denied it; else `None` (ask as without them), their failures and the
    /// records pushed to `records`.
    async fn permission_request(
        &self,
        request: &ApprovalRequest,
        records: &mut Vec<OmniMessage>,
    ) -> Option<Verdict> {
        let event = HookEvent::PermissionRequest;
        if !self.hooks.has(event) {
            return None;
        }
        let call = self.hook_call(request);
        let c = hooks::run_event(&self.hooks, event, &self.ctx, &self.env, &call, None).await?;
        records.extend(failure_records(
            Some(event),
            &request.tool_call_id,
            &c.failures,
        ));
        let decision = c.decision.filter(|d| *d != Permission::Ask)?;
        records.push(decision_record(
            event,
            &c,
            permission_name(decision),
            Some(&request.tool_call_id),
        ));
        let (d, reason) = match decision {
            Permission::Allow => (Decision::Allow, c.reason),
            _ => (
                Decision::Deny,
                Some(c.reason.unwrap_or_else(|| "no reason given".into())),
            ),
        };
        let mut v = Verdict::new(d, "hook", reason.clone());
        if d == Decision::Deny {
            v.denial = format!(
                "Tool call denied by PermissionRequest hook: {}",
                reason.unwrap_or_default()
            );
        }
        v.records = std::mem::take(records);
        Some(v)
    }

    /// Tells the Notification hooks (`permission_prompt`) that `request` waits for an answer,
    /// before it is asked (bounded by their timeouts); their output is ignored, their failures
    /// are recorded.
    async fn notify_waiting(&self, request: &ApprovalRequest, records: &mut Vec<OmniMessage>) {
        let event = HookEvent::Notification;
        if !self.hooks.has(event) {
            return;
        }
        let mut fields = serde_json::Map::new();
        fields.insert(
            "message".into(),
            format!("Rookery needs your permission to use {}", request.name).into(),
        );
        fields.insert("notification_type".into(), "permission_prompt".into());
        fields.insert("tool_use_id".into(), request.tool_call_id.clone().into());
        let run = hooks::run_lifecycle(
            &self.hooks,
            event,
            "permission_prompt",
            &self.ctx,
            &self.env,
            fields,
        );
        if let Some(c) = run.await {
            records.extend(failure_records(
                Some(event),
                &request.tool_call_id,
                &c.failures,
            ));
        }
    }

    fn hook_call(&self, request: &ApprovalRequest) -> HookCall {
        HookCall {
            tool_use_id: request.tool_call_id.clone(),
            tool_name: request.name.clone(),
            arguments: request.arguments.clone(),
            claude_code: (self.tools.get(&request.name)).and_then(|t| t.definition.claude_code),
        }
    }

    /// Runs the PostToolUse hooks of a call that ran and appends their context (and the
    /// PreToolUse context) to its output, after a blank line. Returns the output and the
    /// records to write before it.
    pub(super) async fn after(
        &self,
        call: HookCall,
        mut output: OmniMessage,
        started: Instant,
        mut context: Vec<String>,
    ) -> (OmniMessage, Vec<OmniMessage>) {
        let Payload::Model(ModelPayload::ToolCallOutput {
            output: text,
            stop_reason,
            ..
        }) = &mut output.payload
        else {
            return (output, Vec::new());
        };
        let response = hooks::ToolResponse {
            output: text.clone(),
            stop_reason: stop_reason_name(*stop_reason),
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        let post = hooks::run_event(
            &self.hooks,
            HookEvent::PostToolUse,
            &self.ctx,
            &self.env,
            &call,
            Some(&response),
        )
        .await;
        let mut records = Vec::new();
        if let Some(post) = post {
            records = failure_records(None, &call.tool_use_id, &post.failures);
            context.extend(post.context);
        }
        if !context.is_empty() {
            text.push_str("\n\n");
            text.push_str(&context.join("\n\n"));
        }
        (output, records)
    }

    /// Whether [`Gate::after`] has anything to do for `tool` (Claude Code's `alias`).
    pub(super) fn has_after(&self, tool: &str, alias: Option<&str>, context: &[String]) -> bool {
        !context.is_empty()
            || !(self.hooks)
                .matching(HookEvent::PostToolUse, tool, alias)
                .is_empty()
    }
}

fn stop_reason_name(s: StopReason) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
